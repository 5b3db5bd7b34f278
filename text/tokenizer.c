/* Loading a Hugging Face tokenizer.json (+ tokenizer_config.json), or a
 * GGUF file's tokenizer (tokenizer_gguf.c turns it into the same form), and
 * the small accessors of tokenizer.h.
 *
 * What is supported, and what Folio does with it (each part reproduces the
 * Rust code of Hugging Face `tokenizers`, which vLLM and transformers use):
 *  - model: BPE with vocab, merges ("a b" strings or ["a", "b"] pairs; a
 *    "#version" line is skipped; a pair listed twice keeps its last rank),
 *    unk_token, fuse_unk, byte_fallback (<0xXX> tokens), ignore_merges,
 *    continuing_subword_prefix, end_of_word_suffix. dropout is refused.
 *    Encoding: tokenizer_bpe.c (Hugging Face's heap-based merge, same order).
 *  - normalizer: null, Prepend, Replace (String pattern), NFC, Sequence of
 *    these (tokenizer_normalize.c).
 *  - pre_tokenizer: null; Metaspace (replacement, prepend_scheme
 *    always/first/never or the older add_prefix_space, split), alone or in
 *    a Sequence; or a Sequence of Split (Regex or String; every behavior;
 *    invert), Digits and ByteLevel (add_prefix_space, use_regex), ByteLevel
 *    last (tokenizer_pretok.c, tokenizer_bytelevel.c).
 *  - added_tokens: matched before BPE exactly as AddedVocabulary does:
 *    normalized=false ones in the raw text, normalized=true ones (by their
 *    normalized form) in each normalized piece; leftmost-longest; lstrip and
 *    rstrip take Unicode white space, single_word needs no regex-\w
 *    character on either side. Ids as Hugging Face assigns them (the vocab's
 *    id when the content is in it, else the next free id).
 *  - post_processor: null, TemplateProcessing (its "single" template), or a
 *    Sequence holding one TemplateProcessing (ByteLevel members ignored: they
 *    only touch offsets).
 *  - decoder: Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel,
 *    Sequence; null
 *    joins tokens with " " as Hugging Face does. See tokenizer_decode.c.
 *  - tokenizer_config.json (optional): chat_template (a string, or a list of
 *    {name, template} from which "default" is taken), bos_token/eos_token
 *    (a string or {"content": ...}), add_bos_token/add_eos_token. When
 *    either add_* key is present the post-processor becomes [BOS] A [EOS] as
 *    those flags say, which is what transformers' Llama tokenizer does (and
 *    so what vLLM serves); without them tokenizer.json's post-processor rules.
 *
 * Behaviour on odd input, chosen and tested (tests/test_tokenizer.py,
 * tests/test_tokenizer_real.py, tests/unit/test_tokenizer.c):
 *  - Invalid UTF-8: each maximal invalid subsequence becomes U+FFFD before
 *    anything else, as Rust's String::from_utf8_lossy and Python's
 *    bytes.decode("utf-8", "replace") do, so the ids are Hugging Face's ids
 *    of that repaired text (for Llama-2: U+FFFD is byte-fallback <0xEF>
 *    <0xBF> <0xBD>). Hugging Face's Python API cannot take such bytes at all.
 *  - NUL bytes are ordinary characters (Llama-2: <0x00>).
 *  - Decoding: an id outside [0, vocab size) is an error (NULL); Hugging Face
 *    silently drops it instead. An id inside the range that has no token is
 *    dropped, as Hugging Face does. Invalid UTF-8 made by byte tokens comes
 *    out as one U+FFFD per byte of the run, as Hugging Face's ByteFallback;
 *    bytes of byte-level tokens that are not UTF-8 come out as U+FFFD per
 *    maximal invalid subsequence, as the ByteLevel decoder's from_utf8_lossy.
 *  - decode(encode(x)) == x for valid UTF-8 x with the Llama-2 files: the
 *    Strip decoder removes exactly the one space the Prepend normalizer
 *    added (x's own leading spaces survive). Exceptions are Hugging Face's
 *    too: a special token's text inside x (<s>) decodes back to itself
 *    unless skip_special, and text right after an added token got its own
 *    "▁" from Prepend, which decodes as a space. Byte-level BPE gives back
 *    every x (after NFC, where the normalizer has it).
 *
 * A tokenizer is read-only after load: encode/decode may run on many
 * threads at once (each call keeps its scratch space to itself). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer_internal.h"

/* A JSON string, or an object's "content" string (the forms of
 * tokenizer_config.json's bos_token/eos_token). */
static const char *token_string(json_t *v)
{
    if (json_is_object(v))
        v = json_object_get(v, "content");
    return json_string_value(v);
}

/* ---- model */

int tok_set_id_str(struct folio_tokenizer *t, int32_t id, const char *s, size_t len)
{
    char *old = t->id_str[id];
    if (old && t->id_len[id] == len && !memcmp(old, s, len))
        return 0;
    char *p = tok_dup_bytes(s, len);
    if (!p)
        return -1;
    if (old && t->bpe.vocab.slots && tok_strmap_get(&t->bpe.vocab, old, t->id_len[id]) >= 0) {
        /* The vocab's key is this very string: it lives on until the tokenizer goes. */
        char **r = realloc(t->retired, (t->n_retired + 1) * sizeof *r);
        if (!r) {
            free(p);
            return -1;
        }
        t->retired = r;
        t->retired[t->n_retired++] = old;
    } else {
        free(old);
    }
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
    *out = tok_dup_bytes(json_string_value(v), json_string_length(v));
    return *out ? 0 : -1;
}

/* The BPE model's flags and strings. */
static int read_model_options(struct tok_bpe *bpe, json_t *model, char **unk, char *err,
                              size_t errlen)
{
    bpe->byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
    bpe->fuse_unk = json_is_true(json_object_get(model, "fuse_unk"));
    bpe->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    if (optional_string(model, "continuing_subword_prefix", &bpe->subword_prefix, err, errlen) ||
        optional_string(model, "end_of_word_suffix", &bpe->word_suffix, err, errlen) ||
        optional_string(model, "unk_token", unk, err, errlen))
        return -1;
    /* An empty prefix or suffix is none (transformers writes "" for GPT-2 style models). */
    if (bpe->subword_prefix && !bpe->subword_prefix[0]) {
        free(bpe->subword_prefix);
        bpe->subword_prefix = NULL;
    }
    if (bpe->word_suffix && !bpe->word_suffix[0]) {
        free(bpe->word_suffix);
        bpe->word_suffix = NULL;
    }
    return 0;
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
    char *unk = NULL;
    if (read_model_options(bpe, model, &unk, err, errlen))
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
        if (tok_set_id_str(t, id, key, i) || tok_strmap_put(&bpe->vocab, t->id_str[id], i, id)) {
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

int tok_from_json(const void *json_root, struct folio_tokenizer **out, char *err, size_t errlen)
{
    json_t *root = (json_t *)json_root;
    struct folio_tokenizer *t = calloc(1, sizeof *t);
    *out = NULL;
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    t->bos_id = t->eos_id = -1;
    tok_byte_level_init(t);
    if (!json_is_object(root)) {
        snprintf(err, errlen, "tokenizer.json: not a JSON object");
        goto fail;
    }
    if (load_model(t, root, err, errlen) ||
        tok_normalizer_parse(t, json_object_get(root, "normalizer"), err, errlen) ||
        tok_pre_tokenizer_parse(t, json_object_get(root, "pre_tokenizer"), err, errlen) ||
        tok_added_tokens_parse(t, root, err, errlen) ||
        load_post_processor(t, json_object_get(root, "post_processor"), err, errlen) ||
        tok_decoder_parse(t, json_object_get(root, "decoder"), err, errlen))
        goto fail;
    check_metaspace_split(t, json_object_get(json_object_get(root, "model"), "merges"));
    /* Room was kept for added tokens past the vocab; the real size is less. */
    t->n_ids = folio_tokenizer_vocab_size(t);
    *out = t;
    return 0;
fail:
    if (!err[0])
        snprintf(err, errlen, "tokenizer.json: out of memory");
    folio_tokenizer_free(t);
    return -1;
}

void tok_set_special_ids(struct folio_tokenizer *t)
{
    if (t->bos_token)
        t->bos_id = folio_tokenizer_token_id(t, t->bos_token);
    else if (t->n_prefix)
        t->bos_id = t->prefix_ids[0];
    if (t->eos_token)
        t->eos_id = folio_tokenizer_token_id(t, t->eos_token);
}

int folio_tokenizer_load(const char *model_path, struct folio_tokenizer **out, char *err,
                         size_t errlen)
{
    char path[4096];
    json_error_t je;
    *out = NULL;
    if (errlen)
        err[0] = 0;
    int is_gguf = folio_gguf_resolve(model_path, path, sizeof path, err, errlen);
    if (is_gguf < 0)
        return -1;
    if (is_gguf)
        return tok_load_gguf(path, out, err, errlen);
    snprintf(path, sizeof path, "%s/tokenizer.json", model_path);
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
    char sub[512] = "";
    struct folio_tokenizer *t;
    int rc = tok_from_json(root, &t, sub, sizeof sub);
    json_decref(root);
    if (rc) {
        snprintf(err, errlen, "%s/%s", model_path, sub);
        return -1;
    }
    if (load_config(t, model_path, err, errlen)) {
        folio_tokenizer_free(t);
        return -1;
    }
    tok_set_special_ids(t);
    *out = t;
    return 0;
}

void folio_tokenizer_free(struct folio_tokenizer *t)
{
    if (!t)
        return;
    for (int32_t i = 0; t->id_str && i < t->n_ids; i++)
        free(t->id_str[i]);
    free(t->id_str);
    for (size_t i = 0; i < t->n_retired; i++)
        free(t->retired[i]);
    free(t->retired);
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
    tok_pre_free(t);
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
