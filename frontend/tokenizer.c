/* Loading a Hugging Face tokenizer.json (+ tokenizer_config.json) and the
 * small accessors of tokenizer.h.
 *
 * What is supported, and what Folio does with it (each part reproduces the
 * Rust code of Hugging Face `tokenizers`, which vLLM and transformers use):
 *  - model: BPE with vocab, merges ("a b" strings or ["a", "b"] pairs; a
 *    "#version" line is skipped; a pair listed twice keeps its last rank),
 *    unk_token, fuse_unk, byte_fallback (<0xXX> tokens), ignore_merges,
 *    continuing_subword_prefix, end_of_word_suffix. dropout is refused.
 *    Encoding: tokenizer_bpe.c (Hugging Face's heap-based merge, same order).
 *  - normalizer: null, Prepend, Replace (String pattern), Sequence of these.
 *  - pre_tokenizer: null, or Metaspace (replacement, prepend_scheme
 *    always/first/never or the older add_prefix_space, split), alone or in
 *    a Sequence.
 *  - added_tokens: matched before BPE exactly as AddedVocabulary does:
 *    normalized=false ones in the raw text, normalized=true ones (by their
 *    normalized form) in each normalized piece; leftmost-longest; lstrip and
 *    rstrip take Unicode white space, single_word needs no regex-\w
 *    character on either side. Ids as Hugging Face assigns them (the vocab's
 *    id when the content is in it, else the next free id).
 *  - post_processor: null, TemplateProcessing (its "single" template), or a
 *    Sequence holding one TemplateProcessing (ByteLevel members ignored: they
 *    only touch offsets).
 *  - decoder: Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence; null
 *    joins tokens with " " as Hugging Face does. See tokenizer_decode.c.
 *  - tokenizer_config.json (optional): chat_template (a string, or a list of
 *    {name, template} from which "default" is taken), bos_token/eos_token
 *    (a string or {"content": ...}), add_bos_token/add_eos_token. When
 *    either add_* key is present the post-processor becomes [BOS] A [EOS] as
 *    those flags say, which is what transformers' Llama tokenizer does (and
 *    so what vLLM serves); without them tokenizer.json's post-processor rules.
 *
 * Behaviour on odd input, chosen and tested (tests/test_tokenizer.py,
 * tests/unit/test_tokenizer.c):
 *  - Invalid UTF-8: each maximal invalid subsequence becomes U+FFFD before
 *    anything else, as Rust's String::from_utf8_lossy and Python's
 *    bytes.decode("utf-8", "replace") do, so the ids are Hugging Face's ids
 *    of that repaired text (for Llama-2: U+FFFD is byte-fallback <0xEF>
 *    <0xBF> <0xBD>). Hugging Face's Python API cannot take such bytes at all.
 *  - NUL bytes are ordinary characters (Llama-2: <0x00>).
 *  - Decoding: an id outside [0, vocab size) is an error (NULL); Hugging Face
 *    silently drops it instead. An id inside the range that has no token is
 *    dropped, as Hugging Face does. Invalid UTF-8 made by byte tokens comes
 *    out as one U+FFFD per byte of the run, as Hugging Face's ByteFallback.
 *  - decode(encode(x)) == x for valid UTF-8 x with the Llama-2 files: the
 *    Strip decoder removes exactly the one space the Prepend normalizer
 *    added (x's own leading spaces survive). Exceptions are Hugging Face's
 *    too: a special token's text inside x (<s>) decodes back to itself
 *    unless skip_special, and text right after an added token got its own
 *    "▁" from Prepend, which decodes as a space.
 *
 * A tokenizer is read-only after load: encode/decode may run on many
 * threads at once (each call keeps its scratch space to itself). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static char *dup_bytes(const char *s, size_t len)
{
    char *p = malloc(len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = 0;
    }
    return p;
}

/* A JSON string, or an object's "content" string (the forms of
 * tokenizer_config.json's bos_token/eos_token). */
static const char *token_string(json_t *v)
{
    if (json_is_object(v))
        v = json_object_get(v, "content");
    return json_string_value(v);
}

/* ---- model */

static int set_id_str(struct folio_tokenizer *t, int32_t id, const char *s, size_t len)
{
    char *p = dup_bytes(s, len);
    if (!p)
        return -1;
    free(t->id_str[id]);
    t->id_str[id] = p;
    t->id_len[id] = (uint32_t)len;
    return 0;
}

static int merges_put(struct tok_bpe *bpe, int32_t a, int32_t b, uint32_t rank, int32_t new_id)
{
    uint64_t pair = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (size_t i = tok_pair_slot(pair, bpe->merge_mask);; i = (i + 1) & bpe->merge_mask) {
        struct tok_merge_slot *s = &bpe->merges[i];
        if (s->pair == UINT64_MAX || s->pair == pair) {
            s->pair = pair;
            s->rank = rank;
            s->new_id = new_id;
            return 0;
        }
    }
}

static int load_merges(struct folio_tokenizer *t, json_t *merges, char *err, size_t errlen)
{
    struct tok_bpe *bpe = &t->bpe;
    size_t n = json_array_size(merges), cap = 16;
    while (cap < 2 * n + 2)
        cap *= 2;
    bpe->merges = malloc(cap * sizeof *bpe->merges);
    if (!bpe->merges) {
        snprintf(err, errlen, "tokenizer.json: out of memory for %zu merges", n);
        return -1;
    }
    for (size_t i = 0; i < cap; i++)
        bpe->merges[i].pair = UINT64_MAX;
    bpe->merge_mask = cap - 1;
    size_t prefix_len = bpe->subword_prefix ? strlen(bpe->subword_prefix) : 0;
    char *joined = NULL;
    size_t joined_cap = 0;
    uint32_t rank = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t al, bl;
        if (json_is_string(m)) {
            const char *s = json_string_value(m);
            size_t len = json_string_length(m);
            if (!strncmp(s, "#version", 8))
                continue;
            const char *sp = memchr(s, ' ', len);
            if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s))) {
                snprintf(err, errlen, "tokenizer.json: model.merges[%zu] \"%s\" is not \"a b\"", i,
                         s);
                goto fail;
            }
            a = s;
            al = (size_t)(sp - s);
            b = sp + 1;
            bl = len - al - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            al = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            bl = json_string_length(json_array_get(m, 1));
        } else {
            snprintf(err, errlen, "tokenizer.json: model.merges[%zu] is neither \"a b\" nor a pair",
                     i);
            goto fail;
        }
        int32_t ai = tok_strmap_get(&bpe->vocab, a, al);
        int32_t bi = tok_strmap_get(&bpe->vocab, b, bl);
        size_t skip = (prefix_len && bl >= prefix_len) ? prefix_len : 0;
        if (al + bl + 1 > joined_cap) {
            joined_cap = 2 * (al + bl + 1);
            char *p = realloc(joined, joined_cap);
            if (!p) {
                snprintf(err, errlen, "tokenizer.json: out of memory");
                goto fail;
            }
            joined = p;
        }
        memcpy(joined, a, al);
        memcpy(joined + al, b + skip, bl - skip);
        int32_t ni = tok_strmap_get(&bpe->vocab, joined, al + bl - skip);
        if (ai < 0 || bi < 0 || ni < 0) {
            snprintf(err, errlen,
                     "tokenizer.json: model.merges[%zu] (\"%.*s\" \"%.*s\") uses a "
                     "token that is not in the vocab",
                     i, (int)al, a, (int)bl, b);
            goto fail;
        }
        merges_put(bpe, ai, bi, rank++, ni);
    }
    free(joined);
    return 0;
fail:
    free(joined);
    return -1;
}

static int optional_string(json_t *model, const char *key, char **out, char *err, size_t errlen)
{
    json_t *v = json_object_get(model, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        snprintf(err, errlen, "tokenizer.json: model.%s is not a string", key);
        return -1;
    }
    *out = dup_bytes(json_string_value(v), json_string_length(v));
    return *out ? 0 : -1;
}

static int load_model(struct folio_tokenizer *t, json_t *root, char *err, size_t errlen)
{
    json_t *model = json_object_get(root, "model");
    struct tok_bpe *bpe = &t->bpe;
    if (!json_is_object(model)) {
        snprintf(err, errlen, "tokenizer.json: no \"model\" section");
        return -1;
    }
    const char *type = json_string_value(json_object_get(model, "type"));
    if (type && strcmp(type, "BPE")) {
        snprintf(err, errlen, "tokenizer.json: model.type \"%s\" is not supported (only BPE)",
                 type);
        return -1;
    }
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab) || !json_is_array(merges)) {
        snprintf(err, errlen,
                 "tokenizer.json: model needs a \"vocab\" object and a \"merges\" "
                 "list");
        return -1;
    }
    json_t *dropout = json_object_get(model, "dropout");
    if (json_is_number(dropout) && json_number_value(dropout) != 0.0) {
        snprintf(err, errlen, "tokenizer.json: model.dropout is not supported (it is random)");
        return -1;
    }
    bpe->byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
    bpe->fuse_unk = json_is_true(json_object_get(model, "fuse_unk"));
    bpe->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    char *unk = NULL;
    if (optional_string(model, "continuing_subword_prefix", &bpe->subword_prefix, err, errlen) ||
        optional_string(model, "end_of_word_suffix", &bpe->word_suffix, err, errlen) ||
        optional_string(model, "unk_token", &unk, err, errlen))
        return -1;

    /* The largest id decides the table sizes. */
    int32_t max_id = -1;
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v)
    {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id > INT32_MAX / 2) {
            snprintf(err, errlen, "tokenizer.json: model.vocab[\"%s\"] is not a valid id", key);
            free(unk);
            return -1;
        }
        if (id > max_id)
            max_id = (int32_t)id;
    }
    json_t *added = json_object_get(root, "added_tokens");
    size_t i;
    json_array_foreach(added, i, v)
    {
        json_int_t id = json_integer_value(json_object_get(v, "id"));
        if (id > max_id && id <= INT32_MAX / 2)
            max_id = (int32_t)id;
    }
    /* Added tokens missing from the vocab may get ids past all of these. */
    t->n_ids = max_id + 1 + (int32_t)json_array_size(added);
    t->id_str = calloc((size_t)t->n_ids, sizeof *t->id_str);
    t->id_len = calloc((size_t)t->n_ids, sizeof *t->id_len);
    t->id_special = calloc((size_t)t->n_ids, 1);
    bpe->bmp_id = malloc(0x10000 * sizeof *bpe->bmp_id);
    if (!t->id_str || !t->id_len || !t->id_special || !bpe->bmp_id ||
        tok_strmap_init(&bpe->vocab, json_object_size(vocab))) {
        snprintf(err, errlen, "tokenizer.json: out of memory");
        free(unk);
        return -1;
    }
    for (size_t c = 0; c < 0x10000; c++)
        bpe->bmp_id[c] = -1;
    json_object_keylen_foreach(vocab, key, i, v)
    {
        int32_t id = (int32_t)json_integer_value(v);
        if (set_id_str(t, id, key, i) || tok_strmap_put(&bpe->vocab, t->id_str[id], i, id)) {
            snprintf(err, errlen, "tokenizer.json: out of memory");
            free(unk);
            return -1;
        }
    }
    /* Vocab keys whose id another key overwrote still need their own copy. */
    for (size_t s = 0; s <= bpe->vocab.mask; s++) {
        struct tok_strmap_slot *sl = &bpe->vocab.slots[s];
        if (sl->key && sl->key != t->id_str[sl->id]) {
            snprintf(err, errlen, "tokenizer.json: model.vocab gives id %d to two tokens", sl->id);
            free(unk);
            return -1;
        }
    }
    for (int32_t id = 0; id <= max_id; id++) {
        const char *s = t->id_str[id];
        if (!s)
            continue;
        uint32_t cp;
        size_t cl = tok_utf8_len((unsigned char)s[0]);
        if (t->id_len[id] == cl && cl <= 3 && tok_utf8_decode(s, &cp) == cl)
            bpe->bmp_id[cp] = tok_strmap_get(&bpe->vocab, s, cl);
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        bpe->byte_id[b] = tok_strmap_get(&bpe->vocab, name, 6);
    }
    bpe->unk_id = -1;
    if (unk) {
        bpe->unk_id = tok_strmap_get(&bpe->vocab, unk, strlen(unk));
        if (bpe->unk_id < 0) {
            snprintf(err, errlen, "tokenizer.json: model.unk_token \"%s\" is not in the vocab",
                     unk);
            free(unk);
            return -1;
        }
        free(unk);
    }
    if (load_merges(t, merges, err, errlen))
        return -1;
    if (tok_bpe_mark_self(bpe, t->id_str, t->id_len, max_id + 1)) {
        snprintf(err, errlen, "tokenizer.json: out of memory");
        return -1;
    }
    return 0;
}

/* ---- normalizer and pre-tokenizer */

static int load_normalizer(struct folio_tokenizer *t, json_t *n, char *err, size_t errlen)
{
    if (!n || json_is_null(n))
        return 0;
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!type) {
        snprintf(err, errlen, "tokenizer.json: normalizer has no \"type\"");
        return -1;
    }
    if (!strcmp(type, "Sequence")) {
        size_t i;
        json_t *v;
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list)) {
            snprintf(err, errlen, "tokenizer.json: normalizer Sequence has no \"normalizers\"");
            return -1;
        }
        json_array_foreach(list, i, v) if (load_normalizer(t, v, err, errlen)) return -1;
        return 0;
    }
    struct tok_norm_op op = {0};
    json_t *a, *b = NULL;
    if (!strcmp(type, "Prepend")) {
        op.kind = TOK_NORM_PREPEND;
        a = json_object_get(n, "prepend");
    } else if (!strcmp(type, "Replace")) {
        op.kind = TOK_NORM_REPLACE;
        a = json_object_get(json_object_get(n, "pattern"), "String");
        b = json_object_get(n, "content");
        if (!json_is_string(a) || !json_string_length(a) || !json_is_string(b)) {
            snprintf(err, errlen,
                     "tokenizer.json: normalizer Replace needs a non-empty "
                     "{\"String\": ...} pattern and a content (Regex is not supported)");
            return -1;
        }
    } else {
        snprintf(err, errlen, "tokenizer.json: normalizer type \"%s\" is not supported", type);
        return -1;
    }
    if (!json_is_string(a)) {
        snprintf(err, errlen, "tokenizer.json: normalizer Prepend needs a \"prepend\" string");
        return -1;
    }
    op.a_len = json_string_length(a);
    op.a = dup_bytes(json_string_value(a), op.a_len);
    if (b) {
        op.b_len = json_string_length(b);
        op.b = dup_bytes(json_string_value(b), op.b_len);
    }
    struct tok_norm_op *ops = realloc(t->norm, (t->n_norm + 1) * sizeof *ops);
    if (!op.a || (b && !op.b) || !ops) {
        free(op.a);
        free(op.b);
        if (ops)
            t->norm = ops;
        snprintf(err, errlen, "tokenizer.json: out of memory");
        return -1;
    }
    t->norm = ops;
    t->norm[t->n_norm++] = op;
    return 0;
}

static int load_pre_tokenizer(struct folio_tokenizer *t, json_t *p, char *err, size_t errlen)
{
    if (!p || json_is_null(p))
        return 0;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (type && !strcmp(type, "Sequence")) {
        json_t *list = json_object_get(p, "pretokenizers");
        if (json_array_size(list) == 1)
            return load_pre_tokenizer(t, json_array_get(list, 0), err, errlen);
        snprintf(err, errlen, "tokenizer.json: pre_tokenizer Sequence must hold one Metaspace");
        return -1;
    }
    if (!type || strcmp(type, "Metaspace")) {
        snprintf(err, errlen, "tokenizer.json: pre_tokenizer type \"%s\" is not supported",
                 type ? type : "?");
        return -1;
    }
    struct tok_metaspace *m = &t->metaspace;
    json_t *r = json_object_get(p, "replacement");
    const char *repl = json_string_value(r);
    if (!repl || !json_string_length(r) ||
        json_string_length(r) != tok_utf8_len((unsigned char)repl[0])) {
        snprintf(err, errlen,
                 "tokenizer.json: pre_tokenizer Metaspace needs a one-character "
                 "\"replacement\"");
        return -1;
    }
    m->repl_len = json_string_length(r);
    memcpy(m->repl, repl, m->repl_len);
    m->scheme = TOK_PREPEND_ALWAYS;
    const char *scheme = json_string_value(json_object_get(p, "prepend_scheme"));
    if (scheme && !strcmp(scheme, "first"))
        m->scheme = TOK_PREPEND_FIRST;
    else if (scheme && !strcmp(scheme, "never"))
        m->scheme = TOK_PREPEND_NEVER;
    else if (scheme && strcmp(scheme, "always")) {
        snprintf(err, errlen, "tokenizer.json: Metaspace prepend_scheme \"%s\" is unknown", scheme);
        return -1;
    }
    if (json_is_false(json_object_get(p, "add_prefix_space")))
        m->scheme = TOK_PREPEND_NEVER;
    json_t *split = json_object_get(p, "split");
    m->split = !json_is_false(split);
    t->has_metaspace = true;
    return 0;
}

/* ---- added tokens */

static int trie_node(struct tok_trie *tr, uint8_t byte)
{
    if (tr->n == tr->cap) {
        size_t c = tr->cap ? tr->cap * 2 : 64;
        struct tok_trie_node *p = realloc(tr->nodes, c * sizeof *p);
        if (!p)
            return -1;
        tr->nodes = p;
        tr->cap = c;
    }
    tr->nodes[tr->n] = (struct tok_trie_node){-1, -1, -1, byte};
    return (int)tr->n++;
}

static int trie_add(struct tok_trie *tr, const char *s, size_t len, int32_t token)
{
    if (!tr->n && trie_node(tr, 0) < 0)
        return -1;
    int32_t node = 0;
    tr->first_byte[(uint8_t)s[0] >> 3] |= (uint8_t)(1u << ((uint8_t)s[0] & 7));
    for (size_t i = 0; i < len; i++) {
        int32_t c = tr->nodes[node].first_child;
        while (c >= 0 && tr->nodes[c].byte != (uint8_t)s[i])
            c = tr->nodes[c].next_sibling;
        if (c < 0) {
            c = trie_node(tr, (uint8_t)s[i]);
            if (c < 0)
                return -1;
            tr->nodes[c].next_sibling = tr->nodes[node].first_child;
            tr->nodes[node].first_child = c;
        }
        node = c;
    }
    tr->nodes[node].token = token;
    return 0;
}

/* The normalizer applied to a whole string (for normalized added tokens). */
static int normalize_string(const struct folio_tokenizer *t, const char *s, size_t len, char **out,
                            size_t *out_len)
{
    char *cur = dup_bytes(s, len);
    size_t n = len;
    for (size_t k = 0; cur && k < t->n_norm; k++) {
        const struct tok_norm_op *op = &t->norm[k];
        char *next;
        if (op->kind == TOK_NORM_PREPEND) {
            if (!n)
                continue;
            next = malloc(n + op->a_len + 1);
            if (next) {
                memcpy(next, op->a, op->a_len);
                memcpy(next + op->a_len, cur, n + 1);
                n += op->a_len;
            }
        } else {
            next = malloc(n * (op->b_len + 1) + 1);
            size_t o = 0;
            for (size_t i = 0; next && i < n;)
                if (i + op->a_len <= n && !memcmp(cur + i, op->a, op->a_len)) {
                    memcpy(next + o, op->b, op->b_len);
                    o += op->b_len;
                    i += op->a_len;
                } else {
                    next[o++] = cur[i++];
                }
            if (next) {
                next[o] = 0;
                n = o;
            }
        }
        free(cur);
        cur = next;
    }
    *out = cur;
    *out_len = n;
    return cur ? 0 : -1;
}

static int load_added_tokens(struct folio_tokenizer *t, json_t *root, struct tok_strmap *added_ids,
                             char *err, size_t errlen)
{
    json_t *list = json_object_get(root, "added_tokens"), *v;
    size_t i;
    if (list && !json_is_array(list)) {
        snprintf(err, errlen, "tokenizer.json: \"added_tokens\" is not a list");
        return -1;
    }
    t->added = calloc(json_array_size(list) + 1, sizeof *t->added);
    if (!t->added)
        return -1;
    /* Hugging Face numbers added tokens that are not in the vocab from the
     * vocab's size on (its token count, not its largest id). */
    int32_t next_id = (int32_t)t->bpe.vocab.count;
    json_array_foreach(list, i, v)
    {
        json_t *content = json_object_get(v, "content");
        if (!json_is_string(content)) {
            snprintf(err, errlen, "tokenizer.json: added_tokens[%zu] has no \"content\" string", i);
            return -1;
        }
        size_t len = json_string_length(content);
        const char *s = json_string_value(content);
        if (!len)
            continue; /* Hugging Face ignores empty added tokens */
        struct tok_added a = {
            .len = len,
            .single_word = json_is_true(json_object_get(v, "single_word")),
            .lstrip = json_is_true(json_object_get(v, "lstrip")),
            .rstrip = json_is_true(json_object_get(v, "rstrip")),
            .normalized = !json_is_false(json_object_get(v, "normalized")),
            .special = json_is_true(json_object_get(v, "special")),
        };
        a.id = tok_strmap_get(added_ids, s, len);
        if (a.id < 0)
            a.id = tok_strmap_get(&t->bpe.vocab, s, len);
        if (a.id < 0)
            a.id = next_id++;
        if (a.id >= t->n_ids) {
            snprintf(err, errlen, "tokenizer.json: added_tokens[%zu] gets id %d, too large", i,
                     a.id);
            return -1;
        }
        a.content = dup_bytes(s, len);
        if (!a.content)
            return -1;
        if (a.normalized) {
            if (normalize_string(t, s, len, &a.pattern, &a.pattern_len)) {
                free(a.content);
                return -1;
            }
        } else {
            a.pattern = dup_bytes(s, len);
            a.pattern_len = len;
            if (!a.pattern) {
                free(a.content);
                return -1;
            }
        }
        if (tok_strmap_put(added_ids, a.content, len, a.id))
            return -1;
        t->added[t->n_added++] = a;
    }
    /* A later entry for the same id replaces an earlier one (a map by id). */
    for (size_t k = 0; k < t->n_added; k++) {
        struct tok_added *a = &t->added[k];
        bool replaced = false;
        for (size_t later = k + 1; later < t->n_added; later++)
            if (t->added[later].id == a->id)
                replaced = true;
        if (replaced)
            continue;
        if (trie_add(a->normalized ? &t->norm_trie : &t->raw_trie, a->pattern, a->pattern_len,
                     (int32_t)k))
            return -1;
        /* Decoding gives back what was matched: the normalized form for a
         * normalized token (Hugging Face's simple_id_to_token). */
        if (set_id_str(t, a->id, a->pattern, a->pattern_len))
            return -1;
    }
    return 0;
}

static int mark_special(struct folio_tokenizer *t, struct tok_strmap *specials)
{
    for (size_t k = 0; k < t->n_added; k++)
        if (t->added[k].special &&
            tok_strmap_put(specials, t->added[k].content, t->added[k].len, 1))
            return -1;
    for (int32_t id = 0; id < t->n_ids; id++)
        if (t->id_str[id] && tok_strmap_get(specials, t->id_str[id], t->id_len[id]) >= 0)
            t->id_special[id] = 1;
    return 0;
}

/* ---- post-processor */

static int id_list_append(int32_t **ids, size_t *n, json_t *list)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (!json_is_integer(v))
            return -1;
        int32_t *p = realloc(*ids, (*n + 1) * sizeof *p);
        if (!p)
            return -1;
        *ids = p;
        (*ids)[(*n)++] = (int32_t)json_integer_value(v);
    }
    return 0;
}

static int load_template(struct folio_tokenizer *t, json_t *pp, char *err, size_t errlen)
{
    json_t *single = json_object_get(pp, "single"),
           *specials = json_object_get(pp, "special_tokens");
    size_t i;
    json_t *item;
    bool seen_a = false;
    if (!json_is_array(single)) {
        snprintf(err, errlen, "tokenizer.json: TemplateProcessing has no \"single\" list");
        return -1;
    }
    json_array_foreach(single, i, item)
    {
        json_t *sp = json_object_get(item, "SpecialToken");
        if (json_object_get(item, "Sequence")) {
            seen_a = true;
            continue;
        }
        const char *name = json_string_value(json_object_get(sp, "id"));
        json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids");
        if (!name || !json_is_array(ids) ||
            id_list_append(seen_a ? &t->suffix_ids : &t->prefix_ids,
                           seen_a ? &t->n_suffix : &t->n_prefix, ids)) {
            snprintf(err, errlen,
                     "tokenizer.json: post_processor.single[%zu] names no special "
                     "token with ids",
                     i);
            return -1;
        }
    }
    for (size_t k = 0; k < t->n_prefix; k++)
        if (t->prefix_ids[k] < 0 || t->prefix_ids[k] >= t->n_ids)
            goto bad_id;
    for (size_t k = 0; k < t->n_suffix; k++)
        if (t->suffix_ids[k] < 0 || t->suffix_ids[k] >= t->n_ids)
            goto bad_id;
    return 0;
bad_id:
    snprintf(err, errlen, "tokenizer.json: post_processor uses an id outside the vocab");
    return -1;
}

static int load_post_processor(struct folio_tokenizer *t, json_t *pp, char *err, size_t errlen)
{
    if (!pp || json_is_null(pp))
        return 0;
    const char *type = json_string_value(json_object_get(pp, "type"));
    if (type && !strcmp(type, "TemplateProcessing"))
        return load_template(t, pp, err, errlen);
    if (type && !strcmp(type, "ByteLevel"))
        return 0;
    if (type && !strcmp(type, "Sequence")) {
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(pp, "processors"), i, v)
        {
            if (load_post_processor(t, v, err, errlen))
                return -1;
        }
        return 0;
    }
    snprintf(err, errlen, "tokenizer.json: post_processor type \"%s\" is not supported",
             type ? type : "?");
    return -1;
}

/* ---- tokenizer_config.json */

static int load_config(struct folio_tokenizer *t, const char *dir, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0; /* optional */
    fclose(f);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!json_is_object(root)) {
        snprintf(err, errlen, "%s:%d: %s", path, je.line, root ? "not an object" : je.text);
        json_decref(root);
        return -1;
    }
    int rc = -1;
    json_t *tmpl = json_object_get(root, "chat_template");
    if (json_is_array(tmpl)) {
        size_t i;
        json_t *v;
        json_array_foreach(tmpl, i, v)
        {
            const char *name = json_string_value(json_object_get(v, "name"));
            if (name && !strcmp(name, "default"))
                tmpl = json_object_get(v, "template");
        }
    }
    if (json_is_string(tmpl) && !(t->chat_template = strdup(json_string_value(tmpl))))
        goto out;
    const char *bos = token_string(json_object_get(root, "bos_token"));
    const char *eos = token_string(json_object_get(root, "eos_token"));
    if ((bos && !(t->bos_token = strdup(bos))) || (eos && !(t->eos_token = strdup(eos))))
        goto out;
    json_t *add_bos = json_object_get(root, "add_bos_token");
    json_t *add_eos = json_object_get(root, "add_eos_token");
    if (json_is_boolean(add_bos) || json_is_boolean(add_eos)) {
        int32_t bos_id = bos ? folio_tokenizer_token_id(t, bos) : -1;
        int32_t eos_id = eos ? folio_tokenizer_token_id(t, eos) : -1;
        t->n_prefix = t->n_suffix = 0;
        if (json_is_true(add_bos)) {
            if (bos_id < 0) {
                snprintf(err, errlen, "%s: add_bos_token is true but bos_token is not a token",
                         path);
                goto out;
            }
            int32_t *p = realloc(t->prefix_ids, sizeof *p);
            if (!p)
                goto out;
            t->prefix_ids = p;
            t->prefix_ids[t->n_prefix++] = bos_id;
        }
        if (json_is_true(add_eos)) {
            if (eos_id < 0) {
                snprintf(err, errlen, "%s: add_eos_token is true but eos_token is not a token",
                         path);
                goto out;
            }
            int32_t *p = realloc(t->suffix_ids, sizeof *p);
            if (!p)
                goto out;
            t->suffix_ids = p;
            t->suffix_ids[t->n_suffix++] = eos_id;
        }
    }
    rc = 0;
out:
    if (rc && !err[0])
        snprintf(err, errlen, "%s: out of memory", path);
    json_decref(root);
    return rc;
}

/* Whether cutting words before a metaspace is exact: no merge joins a token
 * that does not end in the metaspace with one that starts with it. */
static void check_metaspace_split(struct folio_tokenizer *t, json_t *merges)
{
    struct tok_bpe *bpe = &t->bpe;
    const char *ms = NULL;
    size_t ml = 0;
    if (t->has_metaspace) {
        ms = t->metaspace.repl;
        ml = t->metaspace.repl_len;
    } else {
        for (size_t k = 0; k < t->n_norm; k++)
            if (t->norm[k].kind == TOK_NORM_REPLACE && !strcmp(t->norm[k].a, " ") &&
                t->norm[k].b_len && t->norm[k].b_len <= 4 &&
                t->norm[k].b_len == tok_utf8_len((unsigned char)t->norm[k].b[0])) {
                ms = t->norm[k].b;
                ml = t->norm[k].b_len;
            }
    }
    if (!ms || bpe->ignore_merges || bpe->subword_prefix || bpe->word_suffix ||
        tok_strmap_get(&bpe->vocab, ms, ml) < 0)
        return;
    for (size_t i = 0; i <= bpe->merge_mask; i++) {
        const struct tok_merge_slot *m = &bpe->merges[i];
        if (m->pair == UINT64_MAX)
            continue;
        const char *a = t->id_str[m->pair >> 32], *b = t->id_str[(uint32_t)m->pair];
        size_t al = t->id_len[m->pair >> 32], bl = t->id_len[(uint32_t)m->pair];
        bool b_starts = bl >= ml && !memcmp(b, ms, ml);
        bool a_ends = al >= ml && !memcmp(a + al - ml, ms, ml);
        if (b_starts && !a_ends)
            return;
    }
    (void)merges;
    memcpy(bpe->metaspace, ms, ml);
    bpe->metaspace_len = ml;
    bpe->split_at_metaspace = true;
}

int folio_tokenizer_load(const char *model_dir, struct folio_tokenizer **out, char *err,
                         size_t errlen)
{
    char path[4096];
    json_error_t je;
    struct tok_strmap added_ids = {0}, specials = {0};
    *out = NULL;
    if (errlen)
        err[0] = 0;
    snprintf(path, sizeof path, "%s/tokenizer.json", model_dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open", path);
        return -1;
    }
    fclose(f);
    json_t *root = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!root) {
        snprintf(err, errlen, "%s:%d:%d: invalid JSON: %s", path, je.line, je.column, je.text);
        return -1;
    }
    struct folio_tokenizer *t = calloc(1, sizeof *t);
    if (!t || tok_strmap_init(&added_ids, 64) || tok_strmap_init(&specials, 64)) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    t->bos_id = t->eos_id = -1;
    char sub[512] = "";
    if (!json_is_object(root)) {
        snprintf(sub, sizeof sub, "tokenizer.json: not a JSON object");
        goto fail_sub;
    }
    if (load_model(t, root, sub, sizeof sub) ||
        load_normalizer(t, json_object_get(root, "normalizer"), sub, sizeof sub) ||
        load_pre_tokenizer(t, json_object_get(root, "pre_tokenizer"), sub, sizeof sub) ||
        load_added_tokens(t, root, &added_ids, sub, sizeof sub) || mark_special(t, &specials) ||
        load_post_processor(t, json_object_get(root, "post_processor"), sub, sizeof sub) ||
        tok_decoder_parse(t, json_object_get(root, "decoder"), sub, sizeof sub))
        goto fail_sub;
    check_metaspace_split(t, json_object_get(json_object_get(root, "model"), "merges"));
    /* Room was kept for added tokens past the vocab; the real size is less. */
    t->n_ids = folio_tokenizer_vocab_size(t);
    if (load_config(t, model_dir, err, errlen))
        goto fail;
    if (t->bos_token)
        t->bos_id = folio_tokenizer_token_id(t, t->bos_token);
    else if (t->n_prefix)
        t->bos_id = t->prefix_ids[0];
    if (t->eos_token)
        t->eos_id = folio_tokenizer_token_id(t, t->eos_token);
    tok_strmap_free(&added_ids);
    tok_strmap_free(&specials);
    json_decref(root);
    *out = t;
    return 0;
fail_sub:
    if (!sub[0])
        snprintf(sub, sizeof sub, "tokenizer.json: out of memory");
    snprintf(err, errlen, "%s/%s", model_dir, sub);
fail:
    tok_strmap_free(&added_ids);
    tok_strmap_free(&specials);
    folio_tokenizer_free(t);
    json_decref(root);
    return -1;
}

void folio_tokenizer_free(struct folio_tokenizer *t)
{
    if (!t)
        return;
    for (int32_t i = 0; t->id_str && i < t->n_ids; i++)
        free(t->id_str[i]);
    free(t->id_str);
    free(t->id_len);
    free(t->id_special);
    tok_strmap_free(&t->bpe.vocab);
    free(t->bpe.bmp_id);
    free(t->bpe.merges);
    free(t->bpe.self_word);
    free(t->bpe.subword_prefix);
    free(t->bpe.word_suffix);
    for (size_t k = 0; k < t->n_added; k++) {
        free(t->added[k].content);
        free(t->added[k].pattern);
    }
    free(t->added);
    free(t->raw_trie.nodes);
    free(t->norm_trie.nodes);
    for (size_t k = 0; k < t->n_norm; k++) {
        free(t->norm[k].a);
        free(t->norm[k].b);
    }
    free(t->norm);
    free(t->prefix_ids);
    free(t->suffix_ids);
    for (size_t k = 0; k < t->n_dec; k++) {
        free(t->dec[k].a);
        free(t->dec[k].b);
    }
    free(t->dec);
    free(t->chat_template);
    free(t->bos_token);
    free(t->eos_token);
    free(t);
}

int32_t folio_tokenizer_vocab_size(const struct folio_tokenizer *t)
{
    int32_t n = t->n_ids;
    while (n > 0 && !t->id_str[n - 1])
        n--;
    return n;
}

int32_t folio_tokenizer_bos_id(const struct folio_tokenizer *t)
{
    return t->bos_id;
}

int32_t folio_tokenizer_eos_id(const struct folio_tokenizer *t)
{
    return t->eos_id;
}

int32_t folio_tokenizer_token_id(const struct folio_tokenizer *t, const char *token)
{
    size_t len = strlen(token);
    for (size_t k = 0; k < t->n_added; k++)
        if (t->added[k].len == len && !memcmp(t->added[k].content, token, len))
            return t->added[k].id;
    return tok_strmap_get(&t->bpe.vocab, token, len);
}

bool folio_tokenizer_is_special(const struct folio_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_ids && t->id_special[id];
}

const char *folio_tokenizer_chat_template(const struct folio_tokenizer *t)
{
    return t->chat_template;
}

const char *folio_tokenizer_bos_token(const struct folio_tokenizer *t)
{
    return t->bos_token;
}

const char *folio_tokenizer_eos_token(const struct folio_tokenizer *t)
{
    return t->eos_token;
}
