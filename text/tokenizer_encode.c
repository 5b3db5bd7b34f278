/* Text to ids, in Hugging Face's order (TokenizerImpl::encode_single_sequence):
 *   1. added tokens with normalized=false are found in the raw text;
 *   2. every other piece is normalized on its own (so Prepend "▁" applies
 *      to each piece), then added tokens with normalized=true are found in it;
 *   3. the pre-tokenizer splits what is left into words (tokenizer_pretok.c);
 *   4. the BPE model turns each word into ids;
 *   5. the post-processor adds BOS/EOS when add_special.
 * Matching of added tokens follows AddedVocabulary::find_matches: leftmost
 * longest, single_word by regex \w, lstrip/rstrip by \s. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static int push_id(struct tok_encoder *e, int32_t id)
{
    if (e->n == e->cap) {
        size_t c = e->cap ? e->cap * 2 : 256;
        int32_t *p = realloc(e->ids, c * sizeof *p);
        if (!p)
            return -1;
        e->ids = p;
        e->cap = c;
    }
    e->ids[e->n++] = id;
    return 0;
}

int tok_span_push(struct tok_span_vec *v, struct tok_span s)
{
    if (v->n == v->cap && tok_grow((void **)&v->v, &v->cap, v->n + 1, sizeof *v->v))
        return -1;
    v->v[v->n++] = s;
    return 0;
}

/* The code point that ends s[0..end) (end > 0, valid UTF-8). */
static uint32_t last_cp(const char *s, size_t end)
{
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80)
        i--;
    uint32_t cp;
    tok_utf8_decode(s + i, &cp);
    return cp;
}

/* Length of the longest pattern of the trie that starts at s[0..len), or 0. */
static size_t trie_longest(const struct tok_trie *tr, const char *s, size_t len, int32_t *token)
{
    size_t best = 0;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t c = tr->nodes[node].first_child;
        while (c >= 0 && tr->nodes[c].byte != (uint8_t)s[i])
            c = tr->nodes[c].next_sibling;
        if (c < 0)
            break;
        node = c;
        if (tr->nodes[node].token >= 0) {
            best = i + 1;
            *token = tr->nodes[node].token;
        }
    }
    return best;
}

/* AddedVocabulary::find_matches over s[0..len). */
static int find_matches(const struct folio_tokenizer *t, const struct tok_trie *tr, const char *s,
                        size_t len, struct tok_span_vec *spans)
{
    size_t start_offset = 0;
    spans->n = 0;
    if (tr->n > 1) {
        for (size_t pos = 0; pos < len;) {
            unsigned char b = (unsigned char)s[pos];
            if (!(tr->first_byte[b >> 3] & (1u << (b & 7)))) {
                pos++;
                continue;
            }
            int32_t tok = -1;
            size_t mlen = trie_longest(tr, s + pos, len - pos, &tok);
            if (!mlen) {
                pos++;
                continue;
            }
            const struct tok_added *a = &t->added[tok];
            size_t start = pos, stop = pos + mlen;
            pos = stop; /* the matcher goes on after the match, whatever follows */
            if (a->single_word) {
                bool start_space = start == 0 || !tok_is_word_char(last_cp(s, start));
                uint32_t next_cp = 0;
                if (stop < len)
                    tok_utf8_decode(s + stop, &next_cp);
                bool stop_space = stop == len || !tok_is_word_char(next_cp);
                if (!start_space || !stop_space)
                    continue;
            }
            if (a->lstrip) {
                size_t ns = start;
                while (ns > 0) {
                    uint32_t cp = last_cp(s, ns);
                    if (!tok_is_whitespace(cp))
                        break;
                    char tmp[4];
                    ns -= tok_utf8_encode(cp, tmp);
                }
                start = ns > start_offset ? ns : start_offset;
            }
            if (a->rstrip) {
                while (stop < len) {
                    uint32_t cp;
                    size_t cl = tok_utf8_decode(s + stop, &cp);
                    if (!tok_is_whitespace(cp))
                        break;
                    stop += cl;
                }
            }
            if (start_offset < start &&
                tok_span_push(spans, (struct tok_span){start_offset, start, -1, false}))
                return -1;
            if (tok_span_push(spans, (struct tok_span){start, stop, tok, false}))
                return -1;
            start_offset = stop;
        }
    }
    if (start_offset < len && tok_span_push(spans, (struct tok_span){start_offset, len, -1, false}))
        return -1;
    return 0;
}

static int encode_piece(struct tok_encoder *e, const char *s, size_t len, bool at_origin)
{
    const struct folio_tokenizer *t = e->t;
    size_t nlen;
    if (tok_normalize(t, s, len, &e->norm, &e->norm_cap, &e->pre, &e->pre_cap, &nlen))
        return -1;
    if (!nlen)
        return 0;
    if (t->norm_trie.n <= 1)
        return tok_pretokenize_and_model(e, e->norm, nlen, at_origin);
    /* The normalized text must survive the pre-tokenizer's use of e->pre. */
    char *norm = tok_dup_bytes(e->norm, nlen);
    struct tok_span_vec spans = {0};
    int rc = -1;
    if (!norm)
        return -1;
    if (find_matches(t, &t->norm_trie, norm, nlen, &spans))
        goto out;
    for (size_t i = 0; i < spans.n; i++) {
        struct tok_span sp = spans.v[i];
        if (sp.token >= 0) {
            if (push_id(e, t->added[sp.token].id))
                goto out;
        } else if (tok_pretokenize_and_model(e, norm + sp.start, sp.stop - sp.start,
                                             at_origin && sp.start == 0)) {
            goto out;
        }
    }
    rc = 0;
out:
    free(spans.v);
    free(norm);
    return rc;
}

static void encoder_free(struct tok_encoder *e)
{
    free(e->norm);
    free(e->pre);
    free(e->words.v);
    free(e->next.v);
    free(e->found.v);
    free(e->prefixed);
    free(e->mapped);
    pcre2_match_data_free(e->md);
    tok_bpe_scratch_free(&e->bpe);
}

int32_t *folio_tokenizer_encode(const struct folio_tokenizer *t, const char *text, size_t len,
                                bool add_special, size_t *n)
{
    struct tok_encoder e = {.t = t};
    char *fixed = NULL;
    struct tok_span_vec spans = {0};
    bool ok = false;
    *n = 0;
    if (tok_utf8_lossy(text, len, &fixed, &len))
        return NULL;
    if (fixed)
        text = fixed;
    if (add_special)
        for (size_t i = 0; i < t->n_prefix; i++)
            if (push_id(&e, t->prefix_ids[i]))
                goto out;
    if (find_matches(t, &t->raw_trie, text, len, &spans))
        goto out;
    for (size_t i = 0; i < spans.n; i++) {
        struct tok_span sp = spans.v[i];
        if (sp.token >= 0) {
            if (push_id(&e, t->added[sp.token].id))
                goto out;
        } else if (encode_piece(&e, text + sp.start, sp.stop - sp.start, sp.start == 0)) {
            goto out;
        }
    }
    if (add_special)
        for (size_t i = 0; i < t->n_suffix; i++)
            if (push_id(&e, t->suffix_ids[i]))
                goto out;
    /* Callers get a valid pointer even for zero ids. */
    if (push_id(&e, 0))
        goto out;
    e.n--;
    ok = true;
out:
    free(fixed);
    free(spans.v);
    encoder_free(&e);
    if (!ok) {
        free(e.ids);
        return NULL;
    }
    *n = e.n;
    return e.ids;
}
