/* GGUF model files (llama.cpp's format), mapped with mmap and checked, never
 * trusted: the header, every metadata key and value, every tensor's type,
 * dimensions and data range are validated against the file's size before
 * anything is handed out. Versions 2 and 3, little-endian. */
#ifndef FOLIO_GGUF_H
#define FOLIO_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Metadata value types, numbered as in the file. */
enum folio_gguf_vtype {
    FOLIO_GGUF_UINT8 = 0,
    FOLIO_GGUF_INT8 = 1,
    FOLIO_GGUF_UINT16 = 2,
    FOLIO_GGUF_INT16 = 3,
    FOLIO_GGUF_UINT32 = 4,
    FOLIO_GGUF_INT32 = 5,
    FOLIO_GGUF_FLOAT32 = 6,
    FOLIO_GGUF_BOOL = 7,
    FOLIO_GGUF_STRING = 8,
    FOLIO_GGUF_ARRAY = 9,
    FOLIO_GGUF_UINT64 = 10,
    FOLIO_GGUF_INT64 = 11,
    FOLIO_GGUF_FLOAT64 = 12,
};

/* ggml tensor types, numbered as in the file (the ones Folio names). */
enum folio_ggml_type {
    FOLIO_GGML_F32 = 0,
    FOLIO_GGML_F16 = 1,
    FOLIO_GGML_Q4_0 = 2,
    FOLIO_GGML_Q4_1 = 3,
    FOLIO_GGML_Q5_0 = 6,
    FOLIO_GGML_Q5_1 = 7,
    FOLIO_GGML_Q8_0 = 8,
    FOLIO_GGML_Q2_K = 10,
    FOLIO_GGML_Q3_K = 11,
    FOLIO_GGML_Q4_K = 12,
    FOLIO_GGML_Q5_K = 13,
    FOLIO_GGML_Q6_K = 14,
    FOLIO_GGML_BF16 = 30,
};

#define FOLIO_GGUF_MAX_DIMS 4

struct folio_gguf_tensor {
    const char *name; /* NUL-terminated, owned by the file handle */
    const char *file; /* the file's path, for error messages */
    uint32_t type;    /* enum folio_ggml_type, or another ggml type */
    int ndim;
    int64_t ne[FOLIO_GGUF_MAX_DIMS]; /* ggml order: ne[0] is the innermost (a row's length) */
    const void *data;                /* inside the mapping; valid while the file is open */
    size_t nbytes;
};

struct folio_gguf;    /* an open file */
struct folio_gguf_kv; /* one metadata key/value, owned by the file */

int folio_gguf_open(const char *path, struct folio_gguf **out, char *err, size_t errlen);
void folio_gguf_close(struct folio_gguf *g);
const char *folio_gguf_path(const struct folio_gguf *g);
uint32_t folio_gguf_version(const struct folio_gguf *g);

/* Decides what a --model path is. 1: a GGUF, its file path in out (PATH itself
 * when it is a file ending in .gguf, or the one .gguf in the folder PATH when
 * that folder has no config.json). 0: not a GGUF (a Hugging Face folder, or a
 * path that is neither; the caller reports it). -1: ambiguous (a folder with
 * several .gguf files and no config.json) or unreadable, with err set. */
int folio_gguf_resolve(const char *path, char *out, size_t outlen, char *err, size_t errlen);

/* ---- metadata ---- */

size_t folio_gguf_num_kv(const struct folio_gguf *g);
const struct folio_gguf_kv *folio_gguf_kv_at(const struct folio_gguf *g, size_t i);
/* NULL when absent. */
const struct folio_gguf_kv *folio_gguf_find(const struct folio_gguf *g, const char *key);

const char *folio_gguf_kv_key(const struct folio_gguf_kv *kv); /* NUL-terminated */
enum folio_gguf_vtype folio_gguf_kv_type(const struct folio_gguf_kv *kv);
const char *folio_gguf_vtype_name(enum folio_gguf_vtype t);

/* Scalars. Each returns 0, or -1 when the value is not of that kind. Strings
 * are not NUL-terminated in the file: use len. An integer reads any integer
 * type (a uint64 above INT64_MAX is -1); a float reads float32/float64 and
 * the integer types. */
int folio_gguf_kv_string(const struct folio_gguf_kv *kv, const char **s, size_t *len);
int folio_gguf_kv_int(const struct folio_gguf_kv *kv, int64_t *out);
int folio_gguf_kv_float(const struct folio_gguf_kv *kv, double *out);
int folio_gguf_kv_bool(const struct folio_gguf_kv *kv, bool *out);

/* Arrays: the element type and count (0 and -1 for a value that is not an
 * array), then element i in the same kinds as the scalars (-1 when i is out of
 * range or the element is not of that kind; an array of arrays has no
 * element accessors). */
int folio_gguf_kv_array(const struct folio_gguf_kv *kv, enum folio_gguf_vtype *elem_type,
                        uint64_t *count);
int folio_gguf_kv_array_string(const struct folio_gguf_kv *kv, uint64_t i, const char **s,
                               size_t *len);
int folio_gguf_kv_array_int(const struct folio_gguf_kv *kv, uint64_t i, int64_t *out);
int folio_gguf_kv_array_float(const struct folio_gguf_kv *kv, uint64_t i, double *out);

/* The same scalars by key, with a message naming the file and the key when the
 * key is missing or of another type. */
int folio_gguf_get_string(const struct folio_gguf *g, const char *key, const char **s, size_t *len,
                          char *err, size_t errlen);
int folio_gguf_get_int(const struct folio_gguf *g, const char *key, int64_t *out, char *err,
                       size_t errlen);
int folio_gguf_get_float(const struct folio_gguf *g, const char *key, double *out, char *err,
                         size_t errlen);
int folio_gguf_get_bool(const struct folio_gguf *g, const char *key, bool *out, char *err,
                        size_t errlen);

/* ---- tensors ---- */

size_t folio_gguf_num_tensors(const struct folio_gguf *g);
const struct folio_gguf_tensor *folio_gguf_tensor_at(const struct folio_gguf *g, size_t i);
/* NULL when absent. */
const struct folio_gguf_tensor *folio_gguf_find_tensor(const struct folio_gguf *g,
                                                       const char *name);
uint64_t folio_gguf_tensor_numel(const struct folio_gguf_tensor *t);

/* "Q4_1", ...; "type N" for a number Folio does not know. */
const char *folio_ggml_type_name(uint32_t type);
/* Elements per block and bytes per block; 0 for a type Folio does not know. */
int folio_ggml_block_size(uint32_t type);
int folio_ggml_type_size(uint32_t type);
/* Whether folio_gguf_dequantize handles the type. */
bool folio_ggml_can_dequantize(uint32_t type);

/* Elements [first, first+count) of the tensor (flat, row-major in ggml order)
 * as f32 into out. -1 with a message naming the tensor and its type when the
 * type cannot be dequantized, or naming the range when it runs past the end. */
int folio_gguf_dequantize(const struct folio_gguf_tensor *t, uint64_t first, uint64_t count,
                          float *out, char *err, size_t errlen);

#endif
