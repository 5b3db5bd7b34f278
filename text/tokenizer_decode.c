/* Ids back to text: the decoder of tokenizer.json run as a stream.
 *
 * Hugging Face's decoders map a list of token strings to a list of strings
 * (Replace, ByteFallback, Fuse, Strip, Metaspace), and decode() joins the
 * result. Here each decoder is a stage that takes one piece at a time, so
 * the same code serves the one-shot folio_tokenizer_decode (push every id,
 * then finish) and the streaming folio_detok: their outputs are equal by
 * construction. A piece is a token's text, or after Fuse a continuation of
 * the one fused token ("cont"), which matters to Strip and Metaspace.
 *
 * What a stage holds back: ByteFallback keeps a run of <0xXX> tokens until a
 * non-byte token (or finish) ends it, because Hugging Face turns the WHOLE
 * run into one U+FFFD per byte when any of it is invalid UTF-8; emitting a
 * complete character early could then disagree with decode(). Strip with
 * stop > 0 holds trailing content characters. Everything emitted is whole
 * UTF-8 characters, since every piece is valid UTF-8. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* ---- parsing the decoder section */

static int dup_json_string(json_t *v, char **out, size_t *len)
{
    if (!json_is_string(v))
        return -1;
    *len = json_string_length(v);
    *out = malloc(*len + 1);
    if (!*out)
        return -1;
    memcpy(*out, json_string_value(v), *len + 1);
    return 0;
}

static size_t utf8_chars(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i += tok_utf8_len((unsigned char)s[i]))
        n++;
    return n;
}

static int add_op(struct folio_tokenizer *t, struct tok_dec_op op)
{
    struct tok_dec_op *d = realloc(t->dec, (t->n_dec + 1) * sizeof *d);
    if (!d)
        return -1;
    t->dec = d;
    t->dec[t->n_dec++] = op;
    return 0;
}

static int parse_one(struct folio_tokenizer *t, json_t *d, bool *fused, char *err, size_t errlen)
{
    const char *type = json_string_value(json_object_get(d, "type"));
    struct tok_dec_op op = {0};
    if (!type) {
        snprintf(err, errlen, "decoder: an entry has no \"type\"");
        return -1;
    }
    if (!strcmp(type, "Sequence")) {
        json_t *list = json_object_get(d, "decoders");
        size_t i;
        json_t *v;
        if (!json_is_array(list)) {
            snprintf(err, errlen, "decoder: Sequence without a \"decoders\" list");
            return -1;
        }
        json_array_foreach(list, i, v) if (parse_one(t, v, fused, err, errlen)) return -1;
        return 0;
    }
    if (!strcmp(type, "Replace")) {
        op.kind = TOK_DEC_REPLACE;
        json_t *pat = json_object_get(json_object_get(d, "pattern"), "String");
        if (!pat) {
            snprintf(err, errlen, "decoder: Replace supports only a \"String\" pattern");
            return -1;
        }
        if (dup_json_string(pat, &op.a, &op.a_len) ||
            dup_json_string(json_object_get(d, "content"), &op.b, &op.b_len) || !op.a_len) {
            free(op.a);
            snprintf(err, errlen, "decoder: Replace needs a non-empty pattern and a content");
            return -1;
        }
        if (*fused && utf8_chars(op.a, op.a_len) != 1) {
            free(op.a);
            free(op.b);
            snprintf(err, errlen, "decoder: Replace of several characters after Fuse unsupported");
            return -1;
        }
    } else if (!strcmp(type, "ByteFallback")) {
        op.kind = TOK_DEC_BYTE_FALLBACK;
        if (*fused) {
            snprintf(err, errlen, "decoder: ByteFallback after Fuse is not supported");
            return -1;
        }
    } else if (!strcmp(type, "Fuse")) {
        op.kind = TOK_DEC_FUSE;
        *fused = true;
    } else if (!strcmp(type, "Strip")) {
        op.kind = TOK_DEC_STRIP;
        json_t *start = json_object_get(d, "start"), *stop = json_object_get(d, "stop");
        if (dup_json_string(json_object_get(d, "content"), &op.a, &op.a_len) ||
            utf8_chars(op.a, op.a_len) != 1 || !json_is_integer(start) || !json_is_integer(stop) ||
            json_integer_value(start) < 0 || json_integer_value(stop) < 0) {
            free(op.a);
            snprintf(err, errlen, "decoder: Strip needs a one-character content, start and stop");
            return -1;
        }
        op.start = (size_t)json_integer_value(start);
        op.stop = (size_t)json_integer_value(stop);
    } else if (!strcmp(type, "ByteLevel")) {
        /* After Fuse too: ByteLevel joins its input into one string either way. */
        op.kind = TOK_DEC_BYTE_LEVEL;
    } else if (!strcmp(type, "Metaspace")) {
        op.kind = TOK_DEC_METASPACE;
        if (dup_json_string(json_object_get(d, "replacement"), &op.a, &op.a_len) ||
            utf8_chars(op.a, op.a_len) != 1) {
            free(op.a);
            snprintf(err, errlen, "decoder: Metaspace needs a one-character replacement");
            return -1;
        }
        const char *scheme = json_string_value(json_object_get(d, "prepend_scheme"));
        json_t *aps = json_object_get(d, "add_prefix_space");
        op.metaspace_strips = true;
        if ((scheme && !strcmp(scheme, "never")) || json_is_false(aps))
            op.metaspace_strips = false;
    } else {
        snprintf(err, errlen, "decoder: type \"%s\" is not supported", type);
        return -1;
    }
    if (add_op(t, op)) {
        free(op.a);
        free(op.b);
        snprintf(err, errlen, "decoder: out of memory");
        return -1;
    }
    return 0;
}

int tok_decoder_parse(struct folio_tokenizer *t, const void *json_decoder, char *err, size_t errlen)
{
    json_t *d = (json_t *)json_decoder;
    bool fused = false;
    if (!d || json_is_null(d))
        return add_op(t, (struct tok_dec_op){.kind = TOK_DEC_JOIN_SPACE}) ? -1 : 0;
    if (!json_is_object(d)) {
        snprintf(err, errlen, "decoder: not an object");
        return -1;
    }
    return parse_one(t, d, &fused, err, errlen);
}

/* ---- the stream */

struct piece {
    size_t off, len;
    bool cont;
};

struct piece_list {
    struct piece *p;
    size_t n, cap;
    char *text;
    size_t len, text_cap;
};

struct stage_state {
    unsigned char *bytes; /* ByteFallback: the pending run; ByteLevel: an unfinished character */
    size_t n_bytes, bytes_cap;
    size_t tokens_seen; /* Fuse, Metaspace, join */
    size_t start_seen;  /* Strip: leading characters looked at */
    bool in_start;
    size_t held; /* Strip: trailing content characters held back */
};

struct folio_detok {
    const struct folio_tokenizer *t;
    bool skip_special;
    struct stage_state *st;
    struct piece_list a, b; /* ping-pong between stages */
    char *out;              /* what this push emits */
    size_t out_len, out_cap;
};

static int list_add(struct piece_list *l, const char *s, size_t len, bool cont)
{
    if (tok_grow((void **)&l->p, &l->cap, l->n + 1, sizeof *l->p) ||
        tok_grow((void **)&l->text, &l->text_cap, l->len + len + 1, 1))
        return -1;
    memcpy(l->text + l->len, s, len);
    l->p[l->n++] = (struct piece){l->len, len, cont};
    l->len += len;
    return 0;
}

/* Appends to the last piece (same token) or adds one. */
static int list_append(struct piece_list *l, const char *s, size_t len, bool new_piece, bool cont)
{
    if (new_piece || !l->n)
        return list_add(l, s, len, cont);
    if (tok_grow((void **)&l->text, &l->text_cap, l->len + len + 1, 1))
        return -1;
    memcpy(l->text + l->len, s, len);
    l->len += len;
    l->p[l->n - 1].len += len;
    return 0;
}

static void list_clear(struct piece_list *l)
{
    l->n = 0;
    l->len = 0;
}

int folio_tok_byte_token(const char *s, size_t len, unsigned char *byte)
{
    if (len != 6 || memcmp(s, "<0x", 3) || s[5] != '>')
        return 0;
    /* Rust's u8::from_str_radix(.., 16): two hex digits, or '+' and one. */
    unsigned v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else if (c == '+' && i == 3)
            continue;
        else
            return 0;
        v = v * 16 + d;
    }
    *byte = (unsigned char)v;
    return 1;
}

static bool utf8_valid(const unsigned char *b, size_t n)
{
    char *fixed;
    size_t fixed_len;
    if (tok_utf8_lossy((const char *)b, n, &fixed, &fixed_len))
        return false;
    free(fixed);
    return fixed == NULL;
}

static int flush_bytes(struct stage_state *st, struct piece_list *out)
{
    if (!st->n_bytes)
        return 0;
    int rc = 0;
    if (utf8_valid(st->bytes, st->n_bytes))
        rc = list_add(out, (const char *)st->bytes, st->n_bytes, false);
    else
        for (size_t i = 0; i < st->n_bytes && !rc; i++)
            rc = list_add(out, "\xEF\xBF\xBD", 3, false);
    st->n_bytes = 0;
    return rc;
}

static int strip_end_token(const struct tok_dec_op *op, struct stage_state *st,
                           struct piece_list *out)
{
    int rc = 0;
    for (size_t i = op->stop; i < st->held && !rc; i++)
        rc = list_append(out, op->a, op->a_len, false, true);
    st->held = 0;
    st->start_seen = 0;
    st->in_start = true;
    return rc;
}

/* ByteLevel: a token's characters back to bytes, which come out as text
 * once they make whole characters. Hugging Face makes one string of all the
 * bytes with from_utf8_lossy; holding only an unfinished tail gives the same
 * text piece by piece, since a maximal invalid subsequence ends where a byte
 * breaks it. */
static int byte_level_piece(const struct folio_tokenizer *t, struct stage_state *st, const char *s,
                            size_t len, bool finishing, struct piece_list *out)
{
    if (tok_grow((void **)&st->bytes, &st->bytes_cap, st->n_bytes + len + 1, 1))
        return -1;
    st->n_bytes += tok_byte_level_unmap(t, s, len, (char *)st->bytes + st->n_bytes);
    size_t keep = finishing ? 0 : tok_utf8_unfinished_tail(st->bytes, st->n_bytes);
    size_t emit = st->n_bytes - keep;
    if (!emit)
        return 0;
    char *fixed;
    size_t fixed_len;
    if (tok_utf8_lossy((const char *)st->bytes, emit, &fixed, &fixed_len))
        return -1;
    /* One string, as Hugging Face's decode_chain returns: later stages see one token. */
    int rc =
        list_add(out, fixed ? fixed : (const char *)st->bytes, fixed_len, st->tokens_seen++ > 0);
    free(fixed);
    memmove(st->bytes, st->bytes + emit, keep);
    st->n_bytes = keep;
    return rc;
}

static int stage_piece(const struct folio_tokenizer *t, const struct tok_dec_op *op,
                       struct stage_state *st, const char *s, size_t len, bool cont,
                       struct piece_list *out)
{
    switch (op->kind) {
    case TOK_DEC_BYTE_LEVEL:
        return byte_level_piece(t, st, s, len, false, out);
    case TOK_DEC_REPLACE: {
        if (list_add(out, "", 0, cont))
            return -1;
        size_t i = 0, from = 0;
        while (i + op->a_len <= len) {
            if (!memcmp(s + i, op->a, op->a_len)) {
                if (list_append(out, s + from, i - from, false, cont) ||
                    list_append(out, op->b, op->b_len, false, cont))
                    return -1;
                i += op->a_len;
                from = i;
            } else {
                i++;
            }
        }
        return list_append(out, s + from, len - from, false, cont);
    }
    case TOK_DEC_BYTE_FALLBACK: {
        unsigned char byte;
        if (!cont && folio_tok_byte_token(s, len, &byte)) {
            if (st->n_bytes == st->bytes_cap &&
                tok_grow((void **)&st->bytes, &st->bytes_cap, st->n_bytes + 1, 1))
                return -1;
            st->bytes[st->n_bytes++] = byte;
            return 0;
        }
        if (flush_bytes(st, out))
            return -1;
        return list_add(out, s, len, cont);
    }
    case TOK_DEC_FUSE:
        cont = st->tokens_seen++ > 0;
        return list_add(out, s, len, cont);
    case TOK_DEC_STRIP: {
        if (!cont && strip_end_token(op, st, out))
            return -1;
        if (list_add(out, "", 0, cont))
            return -1;
        for (size_t i = 0; i < len;) {
            size_t cl = tok_utf8_len((unsigned char)s[i]);
            bool is_content = cl == op->a_len && !memcmp(s + i, op->a, cl);
            if (st->in_start && st->start_seen < op->start) {
                st->start_seen++;
                if (is_content) {
                    i += cl;
                    continue;
                }
            }
            st->in_start = false;
            if (op->stop && is_content) {
                st->held++;
            } else {
                for (; st->held; st->held--)
                    if (list_append(out, op->a, op->a_len, false, cont))
                        return -1;
                if (list_append(out, s + i, cl, false, cont))
                    return -1;
            }
            i += cl;
        }
        return 0;
    }
    case TOK_DEC_METASPACE: {
        if (!cont)
            st->tokens_seen++;
        bool first = st->tokens_seen == 1;
        if (list_add(out, "", 0, cont))
            return -1;
        for (size_t i = 0; i < len;) {
            size_t cl = tok_utf8_len((unsigned char)s[i]);
            if (cl == op->a_len && !memcmp(s + i, op->a, cl)) {
                if (!(first && op->metaspace_strips) && list_append(out, " ", 1, false, cont))
                    return -1;
            } else if (list_append(out, s + i, cl, false, cont)) {
                return -1;
            }
            i += cl;
        }
        return 0;
    }
    case TOK_DEC_JOIN_SPACE:
        if (!cont && st->tokens_seen++ > 0 && list_add(out, " ", 1, true))
            return -1;
        return list_add(out, s, len, true);
    }
    return -1;
}

static int stage_finish(const struct folio_tokenizer *t, const struct tok_dec_op *op,
                        struct stage_state *st, struct piece_list *out)
{
    if (op->kind == TOK_DEC_BYTE_LEVEL)
        return byte_level_piece(t, st, "", 0, true, out);
    if (op->kind == TOK_DEC_BYTE_FALLBACK)
        return flush_bytes(st, out);
    if (op->kind == TOK_DEC_STRIP)
        return strip_end_token(op, st, out);
    return 0;
}

/* Runs the pieces in d->a (or a finish when finishing) through every stage
 * and appends the text that comes out of the last one to d->out. */
static int run_stages(struct folio_detok *d, bool finishing)
{
    const struct folio_tokenizer *t = d->t;
    struct piece_list *in = &d->a, *out = &d->b;
    for (size_t k = 0; k < t->n_dec; k++) {
        list_clear(out);
        for (size_t i = 0; i < in->n; i++)
            if (stage_piece(t, &t->dec[k], &d->st[k], in->text + in->p[i].off, in->p[i].len,
                            in->p[i].cont, out))
                return -1;
        if (finishing && stage_finish(t, &t->dec[k], &d->st[k], out))
            return -1;
        struct piece_list *tmp = in;
        in = out;
        out = tmp;
    }
    if (tok_grow((void **)&d->out, &d->out_cap, d->out_len + in->len + 1, 1))
        return -1;
    for (size_t i = 0; i < in->n; i++) {
        memcpy(d->out + d->out_len, in->text + in->p[i].off, in->p[i].len);
        d->out_len += in->p[i].len;
    }
    d->out[d->out_len] = 0;
    list_clear(&d->a);
    list_clear(&d->b);
    return 0;
}

struct folio_detok *folio_detok_new(const struct folio_tokenizer *t, bool skip_special)
{
    struct folio_detok *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->t = t;
    d->skip_special = skip_special;
    d->st = calloc(t->n_dec ? t->n_dec : 1, sizeof *d->st);
    if (!d->st) {
        free(d);
        return NULL;
    }
    for (size_t k = 0; k < t->n_dec; k++)
        d->st[k].in_start = true;
    return d;
}

void folio_detok_free(struct folio_detok *d)
{
    if (!d)
        return;
    for (size_t k = 0; k < d->t->n_dec; k++)
        free(d->st[k].bytes);
    free(d->st);
    free(d->a.p);
    free(d->a.text);
    free(d->b.p);
    free(d->b.text);
    free(d->out);
    free(d);
}

/* Feeds one id; the text it completes is appended to d->out. */
static int detok_feed(struct folio_detok *d, int32_t id)
{
    const struct folio_tokenizer *t = d->t;
    if (id < 0 || id >= t->n_ids)
        return -1;
    /* Hugging Face drops ids without a token, and special ones when asked. */
    if (!t->id_str[id] || (d->skip_special && t->id_special[id]))
        return 0;
    if (list_add(&d->a, t->id_str[id], t->id_len[id], false))
        return -1;
    return run_stages(d, false);
}

static int take_out(struct folio_detok *d, char **out, size_t *len)
{
    char *s = malloc(d->out_len + 1);
    if (!s)
        return -1;
    memcpy(s, d->out ? d->out : "", d->out_len);
    s[d->out_len] = 0;
    *out = s;
    if (len)
        *len = d->out_len;
    d->out_len = 0;
    return 0;
}

int folio_detok_push(struct folio_detok *d, int32_t id, char **out, size_t *len)
{
    *out = NULL;
    if (detok_feed(d, id)) {
        d->out_len = 0;
        return -1;
    }
    return take_out(d, out, len);
}

int folio_detok_finish(struct folio_detok *d, char **out, size_t *len)
{
    *out = NULL;
    if (run_stages(d, true))
        return -1;
    return take_out(d, out, len);
}

char *folio_tokenizer_decode(const struct folio_tokenizer *t, const int32_t *ids, size_t n,
                             bool skip_special, size_t *len)
{
    struct folio_detok *d = folio_detok_new(t, skip_special);
    char *s = NULL;
    if (!d)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (detok_feed(d, ids[i])) {
            folio_detok_free(d);
            return NULL;
        }
    if (run_stages(d, true) == 0)
        take_out(d, &s, len);
    folio_detok_free(d);
    return s;
}
