/* Each id's own bytes, for consumers that work on bytes rather than text (the
 * grammar engine, grammar/): the decoder of tokenizer.json applied to one
 * token in the middle of a sequence, with no UTF-8 repair, so that a
 * character split over two byte-level tokens is two halves here and the
 * concatenation of every token's bytes is what decode() shows (where that
 * text is valid UTF-8 and no Strip or Metaspace touches the first token).
 *
 * Per stage, as tokenizer_decode.c runs it on a token that is not the
 * first: ByteLevel maps characters back to bytes; Replace replaces;
 * ByteFallback turns <0xXX> into its byte; Metaspace makes its replacement
 * a space; Strip (before a Fuse, where it works per token) drops its
 * leading and trailing content characters; after a Fuse the token is a
 * continuation, which Strip and the no-decoder join leave alone. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* Replaces every pat in s[0..*len) with rep; returns the new buffer or NULL. */
static char *replace_all(char *s, size_t *len, const char *pat, size_t pat_len, const char *rep,
                         size_t rep_len)
{
    size_t n = 0;
    for (size_t i = 0; i + pat_len <= *len;)
        if (!memcmp(s + i, pat, pat_len)) {
            n++;
            i += pat_len;
        } else {
            i++;
        }
    char *out = malloc(*len + n * rep_len + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < *len;)
        if (i + pat_len <= *len && !memcmp(s + i, pat, pat_len)) {
            memcpy(out + o, rep, rep_len);
            o += rep_len;
            i += pat_len;
        } else {
            out[o++] = s[i++];
        }
    out[o] = 0;
    *len = o;
    return out;
}

/* Strip per token: up to start leading and stop trailing content characters. */
static void strip_token(const struct tok_dec_op *op, char *s, size_t *len)
{
    size_t from = 0, to = *len;
    for (size_t k = 0;
         k < op->start && to - from >= op->a_len && !memcmp(s + from, op->a, op->a_len); k++)
        from += op->a_len;
    for (size_t k = 0;
         k < op->stop && to - from >= op->a_len && !memcmp(s + to - op->a_len, op->a, op->a_len);
         k++)
        to -= op->a_len;
    memmove(s, s + from, to - from);
    *len = to - from;
    s[*len] = 0;
}

int folio_tokenizer_token_bytes(const struct folio_tokenizer *t, int32_t id, char **out,
                                size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (id < 0 || id >= t->n_ids || !t->id_str[id])
        return -1;
    size_t len = t->id_len[id];
    /* +1: the no-decoder join (always the only stage) may prepend a space. */
    char *s = malloc(len + 2);
    if (!s)
        return -1;
    memcpy(s, t->id_str[id], len);
    s[len] = 0;
    bool fused = false;
    for (size_t k = 0; k < t->n_dec; k++) {
        const struct tok_dec_op *op = &t->dec[k];
        char *next = NULL;
        unsigned char byte;
        switch (op->kind) {
        case TOK_DEC_BYTE_LEVEL:
            /* Never longer: each character becomes one byte, or all stay as they are. */
            next = malloc(len + 2);
            if (next) {
                len = tok_byte_level_unmap(t, s, len, next);
                next[len] = 0;
            }
            break;
        case TOK_DEC_REPLACE:
            next = replace_all(s, &len, op->a, op->a_len, op->b, op->b_len);
            break;
        case TOK_DEC_METASPACE:
            next = replace_all(s, &len, op->a, op->a_len, " ", 1);
            break;
        case TOK_DEC_BYTE_FALLBACK:
            if (folio_tok_byte_token(s, len, &byte)) {
                s[0] = (char)byte;
                len = 1;
                s[1] = 0;
            }
            break;
        case TOK_DEC_FUSE:
            fused = true;
            break;
        case TOK_DEC_STRIP:
            if (!fused)
                strip_token(op, s, &len);
            break;
        case TOK_DEC_JOIN_SPACE:
            if (!fused) {
                memmove(s + 1, s, len + 1);
                s[0] = ' ';
                len++;
            }
            break;
        }
        if (op->kind == TOK_DEC_BYTE_LEVEL || op->kind == TOK_DEC_REPLACE ||
            op->kind == TOK_DEC_METASPACE) {
            free(s);
            if (!next)
                return -1;
            s = next;
        }
    }
    *out = s;
    *out_len = len;
    return 0;
}
