/* The tokenizer of a GGUF file (llama.cpp's metadata keys), turned into the
 * tokenizer.json it stands for and loaded by the same code, so a GGUF model
 * tokenizes exactly as its Hugging Face tokenizer does.
 *
 *  - tokenizer.ggml.model "gpt2": byte-level BPE from tokens and merges. The
 *    pre-tokenizer comes from tokenizer.ggml.pre, by the split regexes the
 *    named models' own tokenizer.json files use (llama-bpe/llama3: Llama-3's;
 *    qwen2: Qwen2's; smollm: each digit alone, then GPT-2's; gpt2: GPT-2's).
 *    An unknown name is an error that names it: guessing would give wrong ids.
 *  - "llama": SentencePiece-style BPE with byte fallback from tokens and
 *    scores; the merges are those the scores imply, in the order transformers
 *    derives them (generate_merges: every split of a token into two tokens,
 *    by the whole token's score, best first); spaces become "▁" with one in
 *    front of the text when add_space_prefix (default true), by a Metaspace
 *    pre-tokenizer as transformers builds it. (llama.cpp also puts a space
 *    after each special token in the text; transformers, vLLM and Folio do not.)
 *  - token_type: control tokens (3) become special added tokens, user-defined
 *    ones (4) plain added tokens, matched whole in the text (llama.cpp and
 *    transformers do both); for "llama" the unknown token (2) is special too.
 *  - BOS/EOS from bos_token_id/eos_token_id, added as add_bos_token and
 *    add_eos_token say (defaults: BOS for "llama", nothing for "gpt2");
 *    tokenizer.chat_template is the chat template. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer_internal.h"

enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_USER_DEFINED = 4 };

static const char LLAMA3_SPLIT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_SPLIT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* tokenizer.ggml.pre names and the split before ByteLevel (NULL: none). */
static const struct pre_name {
    const char *name;
    const char *split;  /* a Split regex, Isolated */
    bool digits;        /* Digits(individual_digits) first */
    bool byte_level_re; /* ByteLevel with GPT-2's regex */
} PRE_NAMES[] = {
    {"llama-bpe", LLAMA3_SPLIT, false, false},
    {"llama3", LLAMA3_SPLIT, false, false},
    {"llama-v3", LLAMA3_SPLIT, false, false},
    {"smaug-bpe", LLAMA3_SPLIT, false, false},
    {"qwen2", QWEN2_SPLIT, false, false},
    {"deepseek-r1-qwen", QWEN2_SPLIT, false, false},
    {"smollm", NULL, true, true},
    {"gpt2", NULL, false, true},
};

struct meta {
    struct folio_gguf *g;
    const struct folio_gguf_kv *tokens, *types, *scores, *merges;
    uint64_t n_tokens;
};

static int fail(char *err, size_t errlen, const struct meta *m, const char *what)
{
    snprintf(err, errlen, "%s: %s", folio_gguf_path(m->g), what);
    return -1;
}

static int token_at(const struct meta *m, uint64_t i, const char **s, size_t *len)
{
    return folio_gguf_kv_array_string(m->tokens, i, s, len);
}

static int64_t token_type(const struct meta *m, uint64_t i)
{
    int64_t v = TOKEN_NORMAL;
    if (m->types && folio_gguf_kv_array_int(m->types, i, &v))
        v = TOKEN_NORMAL;
    return v;
}

static bool get_bool(const struct meta *m, const char *key, bool dflt)
{
    const struct folio_gguf_kv *kv = folio_gguf_find(m->g, key);
    bool v;
    return kv && !folio_gguf_kv_bool(kv, &v) ? v : dflt;
}

/* The id under key, or -1 when absent or outside the vocabulary. */
static int64_t get_id(const struct meta *m, const char *key)
{
    const struct folio_gguf_kv *kv = folio_gguf_find(m->g, key);
    int64_t v;
    return kv && !folio_gguf_kv_int(kv, &v) && v >= 0 && (uint64_t)v < m->n_tokens ? v : -1;
}

static json_t *token_json(const struct meta *m, int64_t id)
{
    const char *s;
    size_t len;
    return id >= 0 && !token_at(m, (uint64_t)id, &s, &len) ? json_stringn(s, len) : NULL;
}

static int build_vocab(const struct meta *m, json_t *model, json_t *added, bool spm, char *err,
                       size_t errlen)
{
    json_t *vocab = json_object();
    if (!vocab || json_object_set_new(model, "vocab", vocab))
        return fail(err, errlen, m, "out of memory");
    for (uint64_t i = 0; i < m->n_tokens; i++) {
        const char *s;
        size_t len;
        if (token_at(m, i, &s, &len))
            return fail(err, errlen, m, "tokenizer.ggml.tokens holds a value that is not a string");
        json_t *key = json_stringn(s, len);
        if (!key)
            return fail(err, errlen, m, "tokenizer.ggml.tokens holds a token that is not UTF-8");
        json_decref(key);
        /* jansson keys stop at NUL; such a token is left out, as no text spells it. */
        if (memchr(s, 0, len))
            continue;
        char *k = tok_dup_bytes(s, len);
        int rc = k ? json_object_set_new(vocab, k, json_integer((json_int_t)i)) : -1;
        free(k);
        if (rc)
            return fail(err, errlen, m, "out of memory");
        int64_t type = token_type(m, i);
        bool special = type == TOKEN_CONTROL || (spm && type == TOKEN_UNKNOWN);
        if ((special || type == TOKEN_USER_DEFINED) &&
            json_array_append_new(added, json_pack("{s:I, s:s%, s:b, s:b, s:b, s:b, s:b}", "id",
                                                   (json_int_t)i, "content", s, len, "single_word",
                                                   0, "lstrip", 0, "rstrip", 0, "normalized", 0,
                                                   "special", special)))
            return fail(err, errlen, m, "out of memory");
    }
    return 0;
}

static int copy_merges(const struct meta *m, json_t *model, char *err, size_t errlen)
{
    enum folio_gguf_vtype et;
    uint64_t n;
    if (folio_gguf_kv_array(m->merges, &et, &n) || et != FOLIO_GGUF_STRING)
        return fail(err, errlen, m, "tokenizer.ggml.merges is not an array of strings");
    json_t *list = json_array();
    if (!list || json_object_set_new(model, "merges", list))
        return fail(err, errlen, m, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if (folio_gguf_kv_array_string(m->merges, i, &s, &len) ||
            json_array_append_new(list, json_stringn(s, len)))
            return fail(err, errlen, m, "tokenizer.ggml.merges holds a merge that is not UTF-8");
    }
    return 0;
}

/* ---- merges implied by SentencePiece scores (transformers' generate_merges) */

struct cand {
    uint32_t tok;         /* the merged token */
    uint32_t left, right; /* ids of the two halves */
    uint32_t left_chars, right_chars;
    float score;
    uint64_t order; /* position before sorting: ties keep it */
};

static int cand_cmp(const void *pa, const void *pb)
{
    const struct cand *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    if (a->left_chars != b->left_chars)
        return a->left_chars > b->left_chars ? -1 : 1;
    if (a->right_chars != b->right_chars)
        return a->right_chars > b->right_chars ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

static size_t utf8_count(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

static int scored_merges(const struct meta *m, json_t *model, json_t *vocab, char *err,
                         size_t errlen)
{
    struct cand *c = NULL;
    size_t n = 0, cap = 0;
    json_t *list = json_array();
    if (!list || json_object_set_new(model, "merges", list))
        return fail(err, errlen, m, "out of memory");
    char *buf = NULL;
    size_t buf_cap = 0;
    int rc = -1;
    for (uint64_t i = 0; i < m->n_tokens; i++) {
        const char *s;
        size_t len;
        double score = 0;
        token_at(m, i, &s, &len);
        if (m->scores && folio_gguf_kv_array_float(m->scores, i, &score))
            score = 0;
        /* Each split at a character boundary into two vocabulary tokens, in
         * the order of the halves' ids (as transformers sorts them). */
        size_t first = n;
        for (size_t k = 1; k < len; k++) {
            if (((unsigned char)s[k] & 0xC0) == 0x80)
                continue;
            if (tok_grow((void **)&buf, &buf_cap, len + 1, 1))
                goto out;
            memcpy(buf, s, k);
            buf[k] = 0;
            json_t *l = json_object_get(vocab, buf);
            memcpy(buf, s + k, len - k);
            buf[len - k] = 0;
            json_t *r = json_object_get(vocab, buf);
            if (!l || !r)
                continue;
            if (tok_grow((void **)&c, &cap, n + 1, sizeof *c))
                goto out;
            c[n] = (struct cand){(uint32_t)i,
                                 (uint32_t)json_integer_value(l),
                                 (uint32_t)json_integer_value(r),
                                 (uint32_t)utf8_count(s, k),
                                 (uint32_t)utf8_count(s + k, len - k),
                                 (float)score,
                                 0};
            n++;
        }
        for (size_t a = first + 1; a < n; a++) /* insertion sort: a few per token */
            for (size_t b = a;
                 b > first && (c[b - 1].left > c[b].left ||
                               (c[b - 1].left == c[b].left && c[b - 1].right > c[b].right));
                 b--) {
                struct cand t = c[b];
                c[b] = c[b - 1];
                c[b - 1] = t;
            }
    }
    for (size_t k = 0; k < n; k++)
        c[k].order = k;
    if (n)
        qsort(c, n, sizeof *c, cand_cmp);
    for (size_t k = 0; k < n; k++) {
        const char *ls, *rs;
        size_t ll, rl;
        token_at(m, c[k].left, &ls, &ll);
        token_at(m, c[k].right, &rs, &rl);
        json_t *pair = json_pack("[s%, s%]", ls, ll, rs, rl);
        if (!pair || json_array_append_new(list, pair))
            goto out;
    }
    rc = 0;
out:
    free(c);
    free(buf);
    if (rc)
        fail(err, errlen, m, "out of memory");
    return rc;
}

/* ---- the pipeline around the model */

static json_t *byte_level_pipeline(const struct meta *m, json_t *root, char *err, size_t errlen)
{
    const char *pre = "";
    size_t pre_len = 0;
    const struct folio_gguf_kv *kv = folio_gguf_find(m->g, "tokenizer.ggml.pre");
    if (kv && folio_gguf_kv_string(kv, &pre, &pre_len)) {
        fail(err, errlen, m, "tokenizer.ggml.pre is not a string");
        return NULL;
    }
    const struct pre_name *p = NULL;
    for (size_t i = 0; i < sizeof PRE_NAMES / sizeof PRE_NAMES[0]; i++)
        if (strlen(PRE_NAMES[i].name) == pre_len && !memcmp(PRE_NAMES[i].name, pre, pre_len))
            p = &PRE_NAMES[i];
    if (!p) {
        snprintf(err, errlen,
                 "%s: tokenizer.ggml.pre \"%.*s\" is not a pre-tokenizer Folio knows (llama-bpe, "
                 "llama3, llama-v3, smaug-bpe, qwen2, deepseek-r1-qwen, smollm, gpt2)",
                 folio_gguf_path(m->g), (int)(pre_len > 100 ? 100 : pre_len), pre);
        return NULL;
    }
    json_t *list = json_array();
    if (p->digits)
        json_array_append_new(list,
                              json_pack("{s:s, s:b}", "type", "Digits", "individual_digits", 1));
    if (p->split)
        json_array_append_new(list,
                              json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern",
                                        "Regex", p->split, "behavior", "Isolated", "invert", 0));
    json_array_append_new(list, json_pack("{s:s, s:b, s:b}", "type", "ByteLevel",
                                          "add_prefix_space", 0, "use_regex", p->byte_level_re));
    json_object_set_new(root, "pre_tokenizer",
                        json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", list));
    json_object_set_new(root, "decoder", json_pack("{s:s}", "type", "ByteLevel"));
    return root;
}

static json_t *sentencepiece_pipeline(const struct meta *m, json_t *root)
{
    bool prefix = get_bool(m, "tokenizer.ggml.add_space_prefix", true);
    json_t *dec = json_array();
    json_array_append_new(dec, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern",
                                         "String", "▁", "content", " "));
    json_array_append_new(dec, json_pack("{s:s}", "type", "ByteFallback"));
    json_array_append_new(dec, json_pack("{s:s}", "type", "Fuse"));
    if (prefix)
        json_array_append_new(dec, json_pack("{s:s, s:s, s:i, s:i}", "type", "Strip", "content",
                                             " ", "start", 1, "stop", 0));
    json_object_set_new(root, "pre_tokenizer",
                        json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement", "▁",
                                  "prepend_scheme", prefix ? "first" : "never", "split", 0));
    json_object_set_new(root, "decoder",
                        json_pack("{s:s, s:o}", "type", "Sequence", "decoders", dec));
    return root;
}

/* TemplateProcessing with BOS and EOS as the flags say. */
static void post_processor(const struct meta *m, json_t *root, bool spm)
{
    int64_t ids[2] = {get_id(m, "tokenizer.ggml.bos_token_id"),
                      get_id(m, "tokenizer.ggml.eos_token_id")};
    bool add[2] = {get_bool(m, "tokenizer.ggml.add_bos_token", spm),
                   get_bool(m, "tokenizer.ggml.add_eos_token", false)};
    json_t *single = json_array(), *specials = json_object();
    for (int k = 0; k < 2; k++) {
        json_t *name = token_json(m, ids[k]);
        if (k == 1)
            json_array_append_new(single,
                                  json_pack("{s:{s:s, s:i}}", "Sequence", "id", "A", "type_id", 0));
        if (add[k] && name) {
            json_array_append_new(
                single, json_pack("{s:{s:O, s:i}}", "SpecialToken", "id", name, "type_id", 0));
            json_object_set_new(specials, json_string_value(name),
                                json_pack("{s:O, s:[I], s:[O]}", "id", name, "ids",
                                          (json_int_t)ids[k], "tokens", name));
        }
        json_decref(name);
    }
    json_object_set_new(root, "post_processor",
                        json_pack("{s:s, s:o, s:o}", "type", "TemplateProcessing", "single", single,
                                  "special_tokens", specials));
}

/* The tokenizer.json this file's metadata describes. */
static json_t *tokenizer_json(const struct meta *m, char *err, size_t errlen)
{
    const char *type;
    size_t type_len;
    if (folio_gguf_get_string(m->g, "tokenizer.ggml.model", &type, &type_len, err, errlen))
        return NULL;
    bool spm = type_len == 5 && !memcmp(type, "llama", 5);
    bool bbpe = type_len == 4 && !memcmp(type, "gpt2", 4);
    if (!spm && !bbpe) {
        snprintf(err, errlen,
                 "%s: tokenizer.ggml.model \"%.*s\" is not supported (gpt2 and llama are)",
                 folio_gguf_path(m->g), (int)(type_len > 100 ? 100 : type_len), type);
        return NULL;
    }
    json_t *root = json_object(), *added = json_array();
    json_t *model = json_pack("{s:s, s:b, s:b, s:b}", "type", "BPE", "byte_fallback", spm,
                              "fuse_unk", spm, "ignore_merges", 0);
    if (!root || !added || !model || json_object_set_new(root, "model", model) ||
        json_object_set_new(root, "added_tokens", added)) {
        json_decref(root);
        fail(err, errlen, m, "out of memory");
        return NULL;
    }
    if (build_vocab(m, model, added, spm, err, errlen) ||
        (m->merges ? copy_merges(m, model, err, errlen)
         : spm     ? scored_merges(m, model, json_object_get(model, "vocab"), err, errlen)
                   : fail(err, errlen, m, "tokenizer.ggml.merges is missing")) ||
        !(spm ? sentencepiece_pipeline(m, root) : byte_level_pipeline(m, root, err, errlen))) {
        json_decref(root);
        return NULL;
    }
    post_processor(m, root, spm);
    return root;
}

static int set_string(const struct meta *m, const char *key, char **out)
{
    const struct folio_gguf_kv *kv = folio_gguf_find(m->g, key);
    const char *s;
    size_t len;
    if (!kv || folio_gguf_kv_string(kv, &s, &len))
        return 0;
    return (*out = tok_dup_bytes(s, len)) ? 0 : -1;
}

static int set_token(const struct meta *m, const char *key, char **out)
{
    int64_t id = get_id(m, key);
    const char *s;
    size_t len;
    if (id < 0 || token_at(m, (uint64_t)id, &s, &len))
        return 0;
    return (*out = tok_dup_bytes(s, len)) ? 0 : -1;
}

int tok_load_gguf(const char *path, struct folio_tokenizer **out, char *err, size_t errlen)
{
    struct meta m = {0};
    enum folio_gguf_vtype et;
    *out = NULL;
    if (folio_gguf_open(path, &m.g, err, errlen))
        return -1;
    m.tokens = folio_gguf_find(m.g, "tokenizer.ggml.tokens");
    m.types = folio_gguf_find(m.g, "tokenizer.ggml.token_type");
    m.scores = folio_gguf_find(m.g, "tokenizer.ggml.scores");
    m.merges = folio_gguf_find(m.g, "tokenizer.ggml.merges");
    json_t *root = NULL;
    struct folio_tokenizer *t = NULL;
    if (!m.tokens || folio_gguf_kv_array(m.tokens, &et, &m.n_tokens) || et != FOLIO_GGUF_STRING ||
        !m.n_tokens || m.n_tokens > INT32_MAX / 4) {
        fail(err, errlen, &m, "tokenizer.ggml.tokens is missing or not a list of strings");
        goto out;
    }
    if (!(root = tokenizer_json(&m, err, errlen)))
        goto out;
    char sub[512] = "";
    if (tok_from_json(root, &t, sub, sizeof sub)) {
        snprintf(err, errlen, "%s: the tokenizer in its metadata: %s", path, sub);
        goto out;
    }
    if (set_string(&m, "tokenizer.chat_template", &t->chat_template) ||
        set_token(&m, "tokenizer.ggml.bos_token_id", &t->bos_token) ||
        set_token(&m, "tokenizer.ggml.eos_token_id", &t->eos_token)) {
        fail(err, errlen, &m, "out of memory");
        folio_tokenizer_free(t);
        t = NULL;
        goto out;
    }
    tok_set_special_ids(t);
    *out = t;
out:
    json_decref(root);
    folio_gguf_close(m.g);
    return t ? 0 : -1;
}
