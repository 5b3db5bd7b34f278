/* Text to ids, in Hugging Face's order (TokenizerImpl::encode_single_sequence):
 *   1. added tokens with normalized=false are found in the raw text;
 *   2. every other piece is normalized on its own (so Prepend "▁" applies
 *      to each piece), then added tokens with normalized=true are found in it;
 *   3. the pre-tokenizer (none, or Metaspace) splits what is left into words;
 *   4. the BPE model turns each word into ids;
 *   5. the post-processor adds BOS/EOS when add_special.
 * Matching of added tokens follows AddedVocabulary::find_matches: leftmost
 * longest, single_word by regex \w, lstrip/rstrip by \s. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

struct span {
    size_t start, stop;
    int32_t token; /* index into t->added, -1 for text */
};

struct encoder {
    const struct folio_tokenizer *t;
    struct tok_bpe_scratch bpe;
    int32_t *ids;
    size_t n, cap;
    char *norm, *pre; /* normalized piece, pre-tokenized piece */
    size_t norm_cap, pre_cap;
};

static int push_id(struct encoder *e, int32_t id)
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

static int push_span(struct span **v, size_t *n, size_t *cap, struct span s)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        struct span *p = realloc(*v, c * sizeof *p);
        if (!p)
            return -1;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = s;
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
                        size_t len, struct span **spans, size_t *n, size_t *cap)
{
    size_t start_offset = 0;
    *n = 0;
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
                push_span(spans, n, cap, (struct span){start_offset, start, -1}))
                return -1;
            if (push_span(spans, n, cap, (struct span){start, stop, tok}))
                return -1;
            start_offset = stop;
        }
    }
    if (start_offset < len && push_span(spans, n, cap, (struct span){start_offset, len, -1}))
        return -1;
    return 0;
}

/* Runs the normalizer over s into e->norm; returns the normalized length. */
static int normalize(struct encoder *e, const char *s, size_t len, size_t *out_len)
{
    const struct folio_tokenizer *t = e->t;
    if (tok_grow((void **)&e->norm, &e->norm_cap, len + 1, 1))
        return -1;
    memcpy(e->norm, s, len);
    size_t n = len;
    for (size_t k = 0; k < t->n_norm; k++) {
        const struct tok_norm_op *op = &t->norm[k];
        if (op->kind == TOK_NORM_PREPEND) {
            if (!n)
                continue;
            if (tok_grow((void **)&e->norm, &e->norm_cap, n + op->a_len + 1, 1))
                return -1;
            memmove(e->norm + op->a_len, e->norm, n);
            memcpy(e->norm, op->a, op->a_len);
            n += op->a_len;
        } else {
            /* Replace every non-overlapping occurrence, left to right. */
            size_t count = 0;
            for (size_t i = 0; i + op->a_len <= n;) {
                /* memchr finds candidates fast; most patterns are one byte. */
                const char *hit = memchr(e->norm + i, op->a[0], n - i);
                if (!hit || (size_t)(hit - e->norm) + op->a_len > n)
                    break;
                i = (size_t)(hit - e->norm);
                if (!memcmp(hit, op->a, op->a_len)) {
                    count++;
                    i += op->a_len;
                } else {
                    i++;
                }
            }
            if (!count)
                continue;
            size_t nn = n - count * op->a_len + count * op->b_len;
            if (tok_grow((void **)&e->pre, &e->pre_cap, nn + 1, 1))
                return -1;
            size_t o = 0;
            for (size_t i = 0; i < n;)
                if (e->norm[i] == op->a[0] && i + op->a_len <= n &&
                    !memcmp(e->norm + i, op->a, op->a_len)) {
                    memcpy(e->pre + o, op->b, op->b_len);
                    o += op->b_len;
                    i += op->a_len;
                } else {
                    e->pre[o++] = e->norm[i++];
                }
            char *tmp = e->norm;
            size_t tcap = e->norm_cap;
            e->norm = e->pre;
            e->norm_cap = e->pre_cap;
            e->pre = tmp;
            e->pre_cap = tcap;
            n = nn;
        }
    }
    *out_len = n;
    return 0;
}

/* The Metaspace pre-tokenizer, then BPE on each word. */
static int pretokenize_and_model(struct encoder *e, const char *s, size_t len, bool at_origin)
{
    const struct folio_tokenizer *t = e->t;
    if (!t->has_metaspace)
        return tok_bpe_word(&t->bpe, &e->bpe, s, len, &e->ids, &e->n, &e->cap);
    const struct tok_metaspace *m = &t->metaspace;
    if (tok_grow((void **)&e->pre, &e->pre_cap, (len + 1) * m->repl_len + 1, 1))
        return -1;
    size_t n = 0;
    bool starts =
        len >= 1 && (s[0] == ' ' || (len >= m->repl_len && !memcmp(s, m->repl, m->repl_len)));
    if (!starts &&
        (m->scheme == TOK_PREPEND_ALWAYS || (m->scheme == TOK_PREPEND_FIRST && at_origin))) {
        memcpy(e->pre, m->repl, m->repl_len);
        n = m->repl_len;
    }
    for (size_t i = 0; i < len; i++)
        if (s[i] == ' ') {
            memcpy(e->pre + n, m->repl, m->repl_len);
            n += m->repl_len;
        } else {
            e->pre[n++] = s[i];
        }
    const char *w = e->pre;
    if (!m->split)
        return tok_bpe_word(&t->bpe, &e->bpe, w, n, &e->ids, &e->n, &e->cap);
    /* MergedWithNext: each replacement character begins a new word. */
    size_t start = 0;
    for (size_t i = 1; i + m->repl_len <= n; i++)
        if (!memcmp(w + i, m->repl, m->repl_len)) {
            if (tok_bpe_word(&t->bpe, &e->bpe, w + start, i - start, &e->ids, &e->n, &e->cap))
                return -1;
            start = i;
            i += m->repl_len - 1;
        }
    return tok_bpe_word(&t->bpe, &e->bpe, w + start, n - start, &e->ids, &e->n, &e->cap);
}

static int encode_piece(struct encoder *e, const char *s, size_t len, bool at_origin)
{
    const struct folio_tokenizer *t = e->t;
    size_t nlen;
    if (normalize(e, s, len, &nlen))
        return -1;
    if (!nlen)
        return 0;
    if (t->norm_trie.n <= 1)
        return pretokenize_and_model(e, e->norm, nlen, at_origin);
    /* The normalized text must survive the pre-tokenizer's use of e->pre. */
    char *norm = malloc(nlen);
    struct span *spans = NULL;
    size_t n_spans = 0, cap = 0;
    int rc = -1;
    if (!norm)
        return -1;
    memcpy(norm, e->norm, nlen);
    if (find_matches(t, &t->norm_trie, norm, nlen, &spans, &n_spans, &cap))
        goto out;
    for (size_t i = 0; i < n_spans; i++) {
        if (spans[i].token >= 0) {
            if (push_id(e, t->added[spans[i].token].id))
                goto out;
        } else if (pretokenize_and_model(e, norm + spans[i].start, spans[i].stop - spans[i].start,
                                         at_origin && spans[i].start == 0)) {
            goto out;
        }
    }
    rc = 0;
out:
    free(spans);
    free(norm);
    return rc;
}

int32_t *folio_tokenizer_encode(const struct folio_tokenizer *t, const char *text, size_t len,
                                bool add_special, size_t *n)
{
    struct encoder e = {.t = t};
    char *fixed = NULL;
    struct span *spans = NULL;
    size_t n_spans = 0, cap = 0;
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
    if (find_matches(t, &t->raw_trie, text, len, &spans, &n_spans, &cap))
        goto out;
    for (size_t i = 0; i < n_spans; i++) {
        if (spans[i].token >= 0) {
            if (push_id(&e, t->added[spans[i].token].id))
                goto out;
        } else if (encode_piece(&e, text + spans[i].start, spans[i].stop - spans[i].start,
                                spans[i].start == 0)) {
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
    free(spans);
    free(e.norm);
    free(e.pre);
    tok_bpe_scratch_free(&e.bpe);
    if (!ok) {
        free(e.ids);
        return NULL;
    }
    *n = e.n;
    return e.ids;
}
