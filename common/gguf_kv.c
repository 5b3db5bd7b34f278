/* Metadata of an open GGUF file: each value read as the kind asked for, from
 * the bytes the parser (gguf.c) has already bounds-checked, and the same by
 * key with messages that name the file and the key. */
#include "error.h"
#include "gguf.h"
#include "gguf_impl.h"

#include <string.h>

size_t folio_gguf_vtype_size(uint32_t t)
{
    switch (t) {
    case FOLIO_GGUF_UINT8:
    case FOLIO_GGUF_INT8:
    case FOLIO_GGUF_BOOL:
        return 1;
    case FOLIO_GGUF_UINT16:
    case FOLIO_GGUF_INT16:
        return 2;
    case FOLIO_GGUF_UINT32:
    case FOLIO_GGUF_INT32:
    case FOLIO_GGUF_FLOAT32:
        return 4;
    case FOLIO_GGUF_UINT64:
    case FOLIO_GGUF_INT64:
    case FOLIO_GGUF_FLOAT64:
        return 8;
    }
    return 0;
}

const char *folio_gguf_vtype_name(enum folio_gguf_vtype t)
{
    static const char *const names[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                        "int32",  "float32", "bool",   "string", "array",
                                        "uint64", "int64",   "float64"};
    return (unsigned)t < sizeof names / sizeof *names ? names[t] : "unknown";
}

const char *folio_gguf_kv_key(const struct folio_gguf_kv *kv)
{
    return kv->key;
}

enum folio_gguf_vtype folio_gguf_kv_type(const struct folio_gguf_kv *kv)
{
    return (enum folio_gguf_vtype)kv->type;
}

/* A value of type t at p as an integer; -1 when t is not an integer type. */
static int decode_int(uint32_t t, const unsigned char *p, int64_t *out)
{
    switch (t) {
    case FOLIO_GGUF_UINT8:
        *out = p[0];
        return 0;
    case FOLIO_GGUF_INT8:
        *out = (int8_t)p[0];
        return 0;
    case FOLIO_GGUF_UINT16:
        *out = (uint16_t)(p[0] | p[1] << 8);
        return 0;
    case FOLIO_GGUF_INT16:
        *out = (int16_t)(uint16_t)(p[0] | p[1] << 8);
        return 0;
    case FOLIO_GGUF_UINT32:
        *out = folio_le32(p);
        return 0;
    case FOLIO_GGUF_INT32:
        *out = (int32_t)folio_le32(p);
        return 0;
    case FOLIO_GGUF_UINT64:
        if (folio_le64(p) > INT64_MAX)
            return -1;
        *out = (int64_t)folio_le64(p);
        return 0;
    case FOLIO_GGUF_INT64:
        *out = (int64_t)folio_le64(p);
        return 0;
    }
    return -1;
}

static int decode_float(uint32_t t, const unsigned char *p, double *out)
{
    if (t == FOLIO_GGUF_FLOAT32) {
        uint32_t u = folio_le32(p);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
        return 0;
    }
    if (t == FOLIO_GGUF_FLOAT64) {
        uint64_t u = folio_le64(p);
        memcpy(out, &u, 8);
        return 0;
    }
    int64_t i;
    if (decode_int(t, p, &i) != 0)
        return -1;
    *out = (double)i;
    return 0;
}

int folio_gguf_kv_string(const struct folio_gguf_kv *kv, const char **s, size_t *len)
{
    if (kv->type != FOLIO_GGUF_STRING)
        return -1;
    *len = (size_t)folio_le64(kv->val);
    *s = (const char *)kv->val + 8;
    return 0;
}

int folio_gguf_kv_int(const struct folio_gguf_kv *kv, int64_t *out)
{
    return decode_int(kv->type, kv->val, out);
}

int folio_gguf_kv_float(const struct folio_gguf_kv *kv, double *out)
{
    return decode_float(kv->type, kv->val, out);
}

int folio_gguf_kv_bool(const struct folio_gguf_kv *kv, bool *out)
{
    if (kv->type != FOLIO_GGUF_BOOL)
        return -1;
    *out = kv->val[0] != 0;
    return 0;
}

int folio_gguf_kv_array(const struct folio_gguf_kv *kv, enum folio_gguf_vtype *elem_type,
                        uint64_t *count)
{
    if (kv->type != FOLIO_GGUF_ARRAY) {
        *count = 0;
        return -1;
    }
    *elem_type = (enum folio_gguf_vtype)kv->elem_type;
    *count = kv->count;
    return 0;
}

int folio_gguf_kv_array_string(const struct folio_gguf_kv *kv, uint64_t i, const char **s,
                               size_t *len)
{
    if (kv->type != FOLIO_GGUF_ARRAY || kv->elem_type != FOLIO_GGUF_STRING || i >= kv->count)
        return -1;
    const unsigned char *p = kv->elems + kv->str_offsets[i];
    *len = (size_t)folio_le64(p);
    *s = (const char *)p + 8;
    return 0;
}

int folio_gguf_kv_array_int(const struct folio_gguf_kv *kv, uint64_t i, int64_t *out)
{
    if (kv->type != FOLIO_GGUF_ARRAY || i >= kv->count || !folio_gguf_vtype_size(kv->elem_type))
        return -1;
    return decode_int(kv->elem_type, kv->elems + i * folio_gguf_vtype_size(kv->elem_type), out);
}

int folio_gguf_kv_array_float(const struct folio_gguf_kv *kv, uint64_t i, double *out)
{
    if (kv->type != FOLIO_GGUF_ARRAY || i >= kv->count || !folio_gguf_vtype_size(kv->elem_type))
        return -1;
    return decode_float(kv->elem_type, kv->elems + i * folio_gguf_vtype_size(kv->elem_type), out);
}

/* The key, or an error naming it. */
static const struct folio_gguf_kv *find_or_err(const struct folio_gguf *g, const char *key,
                                               char *err, size_t errlen)
{
    const struct folio_gguf_kv *kv = folio_gguf_find(g, key);
    if (!kv)
        folio_set_err(err, errlen, "%s: missing key '%s'", g->path, key);
    return kv;
}

static int wrong_type(const struct folio_gguf *g, const struct folio_gguf_kv *kv, const char *want,
                      char *err, size_t errlen)
{
    folio_set_err(err, errlen, "%s: key '%s' has type %s, expected %s", g->path, kv->key,
                  folio_gguf_vtype_name(kv->type), want);
    return -1;
}

int folio_gguf_get_string(const struct folio_gguf *g, const char *key, const char **s, size_t *len,
                          char *err, size_t errlen)
{
    const struct folio_gguf_kv *kv = find_or_err(g, key, err, errlen);
    if (!kv)
        return -1;
    return folio_gguf_kv_string(kv, s, len) == 0 ? 0 : wrong_type(g, kv, "a string", err, errlen);
}

int folio_gguf_get_int(const struct folio_gguf *g, const char *key, int64_t *out, char *err,
                       size_t errlen)
{
    const struct folio_gguf_kv *kv = find_or_err(g, key, err, errlen);
    if (!kv)
        return -1;
    return folio_gguf_kv_int(kv, out) == 0 ? 0 : wrong_type(g, kv, "an integer", err, errlen);
}

int folio_gguf_get_float(const struct folio_gguf *g, const char *key, double *out, char *err,
                         size_t errlen)
{
    const struct folio_gguf_kv *kv = find_or_err(g, key, err, errlen);
    if (!kv)
        return -1;
    return folio_gguf_kv_float(kv, out) == 0 ? 0 : wrong_type(g, kv, "a number", err, errlen);
}

int folio_gguf_get_bool(const struct folio_gguf *g, const char *key, bool *out, char *err,
                        size_t errlen)
{
    const struct folio_gguf_kv *kv = find_or_err(g, key, err, errlen);
    if (!kv)
        return -1;
    return folio_gguf_kv_bool(kv, out) == 0 ? 0 : wrong_type(g, kv, "a bool", err, errlen);
}
