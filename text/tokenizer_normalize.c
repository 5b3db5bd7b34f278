/* The normalizer of a tokenizer.json: Prepend, Replace (a String pattern),
 * NFC, and Sequences of these, in Hugging Face's order. NFC is utf8proc's
 * canonical composition (Debian's libutf8proc), the same normal form that
 * Hugging Face computes with Rust's unicode-normalization. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer_internal.h"

static int parse_op(struct folio_tokenizer *t, json_t *n, const char *type, char *err,
                    size_t errlen)
{
    struct tok_norm_op op = {0};
    json_t *a = NULL, *b = NULL;
    if (!strcmp(type, "Prepend")) {
        op.kind = TOK_NORM_PREPEND;
        a = json_object_get(n, "prepend");
        if (!json_is_string(a)) {
            snprintf(err, errlen, "tokenizer.json: normalizer Prepend needs a \"prepend\" string");
            return -1;
        }
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
    } else if (!strcmp(type, "NFC")) {
        op.kind = TOK_NORM_NFC;
    } else {
        snprintf(err, errlen, "tokenizer.json: normalizer type \"%s\" is not supported", type);
        return -1;
    }
    if (a) {
        op.a_len = json_string_length(a);
        op.a = tok_dup_bytes(json_string_value(a), op.a_len);
    }
    if (b) {
        op.b_len = json_string_length(b);
        op.b = tok_dup_bytes(json_string_value(b), op.b_len);
    }
    struct tok_norm_op *ops = realloc(t->norm, (t->n_norm + 1) * sizeof *ops);
    if ((a && !op.a) || (b && !op.b) || !ops) {
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

int tok_normalizer_parse(struct folio_tokenizer *t, const void *json_normalizer, char *err,
                         size_t errlen)
{
    json_t *n = (json_t *)json_normalizer;
    if (!n || json_is_null(n))
        return 0;
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!type) {
        snprintf(err, errlen, "tokenizer.json: normalizer has no \"type\"");
        return -1;
    }
    if (strcmp(type, "Sequence"))
        return parse_op(t, n, type, err, errlen);
    size_t i;
    json_t *v;
    json_t *list = json_object_get(n, "normalizers");
    if (!json_is_array(list)) {
        snprintf(err, errlen, "tokenizer.json: normalizer Sequence has no \"normalizers\"");
        return -1;
    }
    json_array_foreach(list, i, v)
    {
        if (tok_normalizer_parse(t, v, err, errlen))
            return -1;
    }
    return 0;
}

static void swap_buffers(char **buf, size_t *cap, char **tmp, size_t *tmp_cap)
{
    char *p = *buf;
    size_t c = *cap;
    *buf = *tmp;
    *cap = *tmp_cap;
    *tmp = p;
    *tmp_cap = c;
}

/* Every non-overlapping occurrence of op->a, left to right, becomes op->b. */
static int replace_all(const struct tok_norm_op *op, char **buf, size_t *cap, char **tmp,
                       size_t *tmp_cap, size_t *n)
{
    size_t count = 0;
    for (size_t i = 0; i + op->a_len <= *n;) {
        /* memchr finds candidates fast; most patterns are one byte. */
        const char *hit = memchr(*buf + i, op->a[0], *n - i);
        if (!hit || (size_t)(hit - *buf) + op->a_len > *n)
            break;
        i = (size_t)(hit - *buf);
        if (!memcmp(hit, op->a, op->a_len)) {
            count++;
            i += op->a_len;
        } else {
            i++;
        }
    }
    if (!count)
        return 0;
    size_t nn = *n - count * op->a_len + count * op->b_len;
    if (tok_grow((void **)tmp, tmp_cap, nn + 1, 1))
        return -1;
    size_t o = 0;
    const char *s = *buf;
    for (size_t i = 0; i < *n;)
        if (s[i] == op->a[0] && i + op->a_len <= *n && !memcmp(s + i, op->a, op->a_len)) {
            memcpy(*tmp + o, op->b, op->b_len);
            o += op->b_len;
            i += op->a_len;
        } else {
            (*tmp)[o++] = s[i++];
        }
    swap_buffers(buf, cap, tmp, tmp_cap);
    *n = nn;
    return 0;
}

/* Canonical composition; ASCII text is its own NFC and skips the library. */
static int nfc(char **buf, size_t *cap, char **tmp, size_t *tmp_cap, size_t *n)
{
    size_t i = 0;
    while (i < *n && !((unsigned char)(*buf)[i] & 0x80))
        i++;
    if (i == *n)
        return 0;
    utf8proc_uint8_t *out = NULL;
    utf8proc_ssize_t len = utf8proc_map((const utf8proc_uint8_t *)*buf, (utf8proc_ssize_t)*n, &out,
                                        UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (len < 0)
        return -1; /* only out of memory: the text is valid UTF-8 */
    if (tok_grow((void **)tmp, tmp_cap, (size_t)len + 1, 1)) {
        free(out);
        return -1;
    }
    memcpy(*tmp, out, (size_t)len);
    free(out);
    swap_buffers(buf, cap, tmp, tmp_cap);
    *n = (size_t)len;
    return 0;
}

int tok_normalize(const struct folio_tokenizer *t, const char *s, size_t len, char **buf,
                  size_t *cap, char **tmp, size_t *tmp_cap, size_t *out_len)
{
    if (tok_grow((void **)buf, cap, len + 1, 1))
        return -1;
    memcpy(*buf, s, len);
    size_t n = len;
    for (size_t k = 0; k < t->n_norm; k++) {
        const struct tok_norm_op *op = &t->norm[k];
        if (op->kind == TOK_NORM_PREPEND) {
            if (!n)
                continue;
            if (tok_grow((void **)buf, cap, n + op->a_len + 1, 1))
                return -1;
            memmove(*buf + op->a_len, *buf, n);
            memcpy(*buf, op->a, op->a_len);
            n += op->a_len;
        } else if (op->kind == TOK_NORM_REPLACE) {
            if (replace_all(op, buf, cap, tmp, tmp_cap, &n))
                return -1;
        } else if (nfc(buf, cap, tmp, tmp_cap, &n)) {
            return -1;
        }
    }
    (*buf)[n] = 0;
    *out_len = n;
    return 0;
}
