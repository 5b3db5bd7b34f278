/* The insides of an open GGUF file, shared by the parser (gguf.c) and the
 * metadata accessors (gguf_kv.c); nothing else includes this. */
#ifndef FOLIO_GGUF_IMPL_H
#define FOLIO_GGUF_IMPL_H

#include "gguf.h"

struct folio_gguf_kv {
    char *key;
    uint32_t type;
    const unsigned char *val; /* the value's first byte in the mapping */
    /* arrays */
    uint32_t elem_type;
    uint64_t count;
    const unsigned char *elems; /* first element */
    uint64_t *str_offsets;      /* string arrays: each element's offset from elems */
};

struct folio_gguf {
    char *path;
    const unsigned char *map;
    size_t size;
    uint32_t version;
    struct folio_gguf_kv *kvs;
    size_t num_kvs;
    struct folio_gguf_tensor *tensors;
    size_t num_tensors;
    /* Sorted by name, for lookups and to find a name given twice. */
    const struct folio_gguf_kv **kv_by_key;
    const struct folio_gguf_tensor **tensor_by_name;
};

static inline uint64_t folio_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int b = 7; b >= 0; b--)
        v = (v << 8) | p[b];
    return v;
}

static inline uint32_t folio_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Bytes of a fixed-size value type; 0 for string, array and unknown types. */
size_t folio_gguf_vtype_size(uint32_t t);

#endif
