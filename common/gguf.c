/* GGUF reader. The file is mapped read-only and walked once, front to back,
 * with every read bounded by the file's size:
 *   "GGUF", u32 version, u64 tensor count, u64 key/value count,
 *   key/values: string key, u32 value type, value (arrays: u32 element type,
 *     u64 count, elements; strings: u64 length, bytes),
 *   tensor infos: string name, u32 n_dims, u64 dims[n_dims], u32 ggml type,
 *     u64 offset into the data section,
 *   padding to general.alignment (default 32), the data section.
 * Counts are checked against the bytes left before anything is allocated, so
 * a hostile count cannot make the reader allocate more than the file's size. */
#include "gguf.h"
#include "error.h"
#include "gguf_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_ALIGNMENT 32
/* Longer names are not llama.cpp's (it caps them at 63 bytes); the cap keeps
 * error messages and copies small. */
#define MAX_NAME_BYTES 1024
/* Arrays of arrays are legal; deeper nesting than this is not a real file's. */
#define MAX_ARRAY_DEPTH 3

struct cursor {
    const unsigned char *base;
    size_t size, off;
    const char *path;
    char *err;
    size_t errlen;
    char what[MAX_NAME_BYTES + 64]; /* "key 'x'" or "tensor 'y'", for messages */
};

static int need(struct cursor *c, uint64_t n, const char *field)
{
    if (n > c->size - c->off) {
        folio_set_err(c->err, c->errlen,
                      "%s: %s: %s needs %llu bytes at offset %zu but the file ends at %zu; "
                      "truncated?",
                      c->path, c->what, field, (unsigned long long)n, c->off, c->size);
        return -1;
    }
    return 0;
}

static int read_u32(struct cursor *c, const char *field, uint32_t *v)
{
    if (need(c, 4, field) != 0)
        return -1;
    *v = folio_le32(c->base + c->off);
    c->off += 4;
    return 0;
}

static int read_u64(struct cursor *c, const char *field, uint64_t *v)
{
    if (need(c, 8, field) != 0)
        return -1;
    *v = folio_le64(c->base + c->off);
    c->off += 8;
    return 0;
}

/* A length-prefixed string; s points into the mapping. */
static int read_string(struct cursor *c, const char *field, const unsigned char **s, uint64_t *len)
{
    if (read_u64(c, field, len) != 0)
        return -1;
    if (*len > c->size - c->off) {
        folio_set_err(c->err, c->errlen,
                      "%s: %s: %s claims %llu bytes at offset %zu but the file ends at %zu; "
                      "bad string length or truncated file",
                      c->path, c->what, field, (unsigned long long)*len, c->off, c->size);
        return -1;
    }
    *s = c->base + c->off;
    c->off += *len;
    return 0;
}

/* A key or tensor name: non-empty, no NUL, bounded; copied NUL-terminated. */
static char *read_name(struct cursor *c, const char *field)
{
    const unsigned char *s;
    uint64_t len;
    if (read_string(c, field, &s, &len) != 0)
        return NULL;
    if (len == 0 || len > MAX_NAME_BYTES || memchr(s, '\0', len)) {
        folio_set_err(c->err, c->errlen,
                      "%s: %s: %s is %llu bytes%s; names must be 1 to %d bytes without NUL",
                      c->path, c->what, field, (unsigned long long)len,
                      len && len <= MAX_NAME_BYTES ? " with a NUL byte" : "", MAX_NAME_BYTES);
        return NULL;
    }
    char *name = malloc(len + 1);
    if (!name) {
        folio_set_err(c->err, c->errlen, "%s: %s: out of memory", c->path, c->what);
        return NULL;
    }
    memcpy(name, s, len);
    name[len] = '\0';
    return name;
}

static int skip_value(struct cursor *c, uint32_t type, int depth);

/* An array's header and elements; when kv is given, fills its array fields
 * (and the offsets of string elements). */
static int skip_array(struct cursor *c, int depth, struct folio_gguf_kv *kv)
{
    uint32_t et;
    uint64_t n;
    if (read_u32(c, "array element type", &et) != 0 || read_u64(c, "array count", &n) != 0)
        return -1;
    if (et > FOLIO_GGUF_FLOAT64) {
        folio_set_err(c->err, c->errlen, "%s: %s: array element type %u is not a GGUF type",
                      c->path, c->what, et);
        return -1;
    }
    if (depth >= MAX_ARRAY_DEPTH && et == FOLIO_GGUF_ARRAY) {
        folio_set_err(c->err, c->errlen, "%s: %s: arrays nested deeper than %d", c->path, c->what,
                      MAX_ARRAY_DEPTH);
        return -1;
    }
    /* Every element takes at least 8 bytes (a string's length, an array's
     * header) or its fixed size: a count the file cannot hold is refused
     * before anything is allocated for it. */
    size_t min = folio_gguf_vtype_size(et) ? folio_gguf_vtype_size(et) : 8;
    if (n > (c->size - c->off) / min) {
        folio_set_err(c->err, c->errlen,
                      "%s: %s: array of %llu %s elements does not fit in the %zu bytes left; "
                      "bad count or truncated file",
                      c->path, c->what, (unsigned long long)n, folio_gguf_vtype_name(et),
                      c->size - c->off);
        return -1;
    }
    if (kv) {
        kv->elem_type = et;
        kv->count = n;
        kv->elems = c->base + c->off;
        if (et == FOLIO_GGUF_STRING) {
            kv->str_offsets = malloc((n ? n : 1) * sizeof *kv->str_offsets);
            if (!kv->str_offsets) {
                folio_set_err(c->err, c->errlen, "%s: %s: out of memory", c->path, c->what);
                return -1;
            }
        }
    }
    if (folio_gguf_vtype_size(et)) {
        c->off += n * folio_gguf_vtype_size(et);
        return 0;
    }
    size_t start = c->off;
    for (uint64_t i = 0; i < n; i++) {
        if (kv && kv->str_offsets)
            kv->str_offsets[i] = c->off - start;
        if (skip_value(c, et, depth + 1) != 0)
            return -1;
    }
    return 0;
}

static int skip_value(struct cursor *c, uint32_t type, int depth)
{
    if (type == FOLIO_GGUF_STRING) {
        const unsigned char *s;
        uint64_t len;
        return read_string(c, "string value", &s, &len);
    }
    if (type == FOLIO_GGUF_ARRAY)
        return skip_array(c, depth, NULL);
    size_t n = folio_gguf_vtype_size(type);
    if (n == 0) {
        folio_set_err(c->err, c->errlen, "%s: %s: value type %u is not a GGUF type", c->path,
                      c->what, type);
        return -1;
    }
    if (need(c, n, folio_gguf_vtype_name(type)) != 0)
        return -1;
    if (type == FOLIO_GGUF_BOOL && c->base[c->off] > 1) {
        folio_set_err(c->err, c->errlen, "%s: %s: bool value is %u, not 0 or 1", c->path, c->what,
                      c->base[c->off]);
        return -1;
    }
    c->off += n;
    return 0;
}

static int read_kv(struct cursor *c, struct folio_gguf *g, size_t i)
{
    struct folio_gguf_kv *kv = &g->kvs[i];
    snprintf(c->what, sizeof c->what, "metadata entry %zu", i);
    kv->key = read_name(c, "key");
    if (!kv->key)
        return -1;
    snprintf(c->what, sizeof c->what, "key '%s'", kv->key);
    if (read_u32(c, "value type", &kv->type) != 0)
        return -1;
    kv->val = c->base + c->off;
    if (kv->type == FOLIO_GGUF_ARRAY)
        return skip_array(c, 1, kv);
    return skip_value(c, kv->type, 0);
}

static int read_alignment(struct folio_gguf *g, const char *path, uint64_t *align, char *err,
                          size_t errlen)
{
    *align = DEFAULT_ALIGNMENT;
    const struct folio_gguf_kv *kv = folio_gguf_find(g, "general.alignment");
    if (!kv)
        return 0;
    int64_t a;
    if (folio_gguf_kv_int(kv, &a) != 0 || a <= 0 || a > (1 << 30) || (a & (a - 1)) != 0) {
        folio_set_err(err, errlen,
                      "%s: key 'general.alignment' must be a power-of-two integer up to 2^30",
                      path);
        return -1;
    }
    *align = (uint64_t)a;
    return 0;
}

/* One tensor info: name, dimensions, type and offset, checked except for the
 * data range (which needs the data section's start). */
static int read_tensor_info(struct cursor *c, struct folio_gguf *g, size_t i, uint64_t *offset)
{
    struct folio_gguf_tensor *t = &g->tensors[i];
    snprintf(c->what, sizeof c->what, "tensor info %zu", i);
    char *name = read_name(c, "tensor name");
    if (!name)
        return -1;
    t->name = name;
    t->file = g->path;
    snprintf(c->what, sizeof c->what, "tensor '%s'", name);
    uint32_t ndim;
    if (read_u32(c, "dimension count", &ndim) != 0)
        return -1;
    if (ndim < 1 || ndim > FOLIO_GGUF_MAX_DIMS) {
        folio_set_err(c->err, c->errlen, "%s: %s: %u dimensions, must be 1 to %d", c->path, c->what,
                      ndim, FOLIO_GGUF_MAX_DIMS);
        return -1;
    }
    t->ndim = (int)ndim;
    uint64_t numel = 1;
    for (uint32_t d = 0; d < FOLIO_GGUF_MAX_DIMS; d++) {
        uint64_t n = 1;
        if (d < ndim && read_u64(c, "dimension", &n) != 0)
            return -1;
        if (n > INT64_MAX || __builtin_mul_overflow(numel, n, &numel) || numel > INT64_MAX) {
            folio_set_err(c->err, c->errlen, "%s: %s: dimensions overflow (dimension %u is %llu)",
                          c->path, c->what, d, (unsigned long long)n);
            return -1;
        }
        t->ne[d] = (int64_t)n;
    }
    if (read_u32(c, "type", &t->type) != 0 || read_u64(c, "data offset", offset) != 0)
        return -1;
    int bs = folio_ggml_block_size(t->type);
    if (bs == 0) {
        folio_set_err(c->err, c->errlen, "%s: %s: ggml type %u is not one Folio knows", c->path,
                      c->what, t->type);
        return -1;
    }
    if (t->ne[0] % bs != 0) {
        folio_set_err(c->err, c->errlen,
                      "%s: %s: row length %lld is not a multiple of %s's block of %d", c->path,
                      c->what, (long long)t->ne[0], folio_ggml_type_name(t->type), bs);
        return -1;
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(numel / (uint64_t)bs, (uint64_t)folio_ggml_type_size(t->type),
                               &bytes) ||
        bytes > SIZE_MAX) {
        folio_set_err(c->err, c->errlen, "%s: %s: data size overflows", c->path, c->what);
        return -1;
    }
    t->nbytes = (size_t)bytes;
    return 0;
}

static int map_file(struct folio_gguf *g, char *err, size_t errlen)
{
    int fd = open(g->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        folio_set_err(err, errlen, "%s: cannot open: %s", g->path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        folio_set_err(err, errlen, "%s: not a regular file", g->path);
        close(fd);
        return -1;
    }
    if (st.st_size < 24) {
        folio_set_err(err, errlen, "%s: file is %lld bytes, too short for a GGUF header (24)",
                      g->path, (long long)st.st_size);
        close(fd);
        return -1;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        folio_set_err(err, errlen, "%s: mmap failed: %s", g->path, strerror(errno));
        return -1;
    }
    g->map = map;
    g->size = (size_t)st.st_size;
    return 0;
}

static int read_header(struct folio_gguf *g, struct cursor *c, uint64_t *nt, uint64_t *nkv)
{
    if (memcmp(g->map, "GGUF", 4) != 0) {
        folio_set_err(c->err, c->errlen, "%s: not a GGUF file (no \"GGUF\" magic)", g->path);
        return -1;
    }
    c->off = 4;
    if (read_u32(c, "version", &g->version) != 0 || read_u64(c, "tensor count", nt) != 0 ||
        read_u64(c, "metadata count", nkv) != 0)
        return -1;
    if (g->version != 2 && g->version != 3) {
        folio_set_err(c->err, c->errlen,
                      "%s: GGUF version %u is not supported (2 and 3 are; a big-endian file "
                      "reads as a huge version)",
                      g->path, g->version);
        return -1;
    }
    /* A key/value takes at least 8 (key length) + 1 (key) + 4 (type) + 1 bytes, a
     * tensor info 8 + 1 + 4 + 8 + 4 + 8. */
    if (*nkv > (g->size - c->off) / 14 || *nt > (g->size - c->off) / 33) {
        folio_set_err(c->err, c->errlen,
                      "%s: header claims %llu tensors and %llu metadata entries, more than the "
                      "file's %zu bytes can hold",
                      g->path, (unsigned long long)*nt, (unsigned long long)*nkv, g->size);
        return -1;
    }
    return 0;
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp((*(const struct folio_gguf_kv *const *)a)->key,
                  (*(const struct folio_gguf_kv *const *)b)->key);
}

static int cmp_tensor(const void *a, const void *b)
{
    return strcmp((*(const struct folio_gguf_tensor *const *)a)->name,
                  (*(const struct folio_gguf_tensor *const *)b)->name);
}

/* Sorts the keys and the tensor names; a name given twice is an error, since
 * which of the two a reader would take is arbitrary. */
static int build_indexes(struct folio_gguf *g, char *err, size_t errlen)
{
    g->kv_by_key = malloc((g->num_kvs ? g->num_kvs : 1) * sizeof *g->kv_by_key);
    g->tensor_by_name = malloc((g->num_tensors ? g->num_tensors : 1) * sizeof *g->tensor_by_name);
    if (!g->kv_by_key || !g->tensor_by_name) {
        folio_set_err(err, errlen, "%s: out of memory", g->path);
        return -1;
    }
    for (size_t i = 0; i < g->num_kvs; i++)
        g->kv_by_key[i] = &g->kvs[i];
    for (size_t i = 0; i < g->num_tensors; i++)
        g->tensor_by_name[i] = &g->tensors[i];
    qsort(g->kv_by_key, g->num_kvs, sizeof *g->kv_by_key, cmp_kv);
    qsort(g->tensor_by_name, g->num_tensors, sizeof *g->tensor_by_name, cmp_tensor);
    for (size_t i = 1; i < g->num_kvs; i++) {
        if (strcmp(g->kv_by_key[i - 1]->key, g->kv_by_key[i]->key) == 0) {
            folio_set_err(err, errlen, "%s: key '%s' appears twice", g->path, g->kv_by_key[i]->key);
            return -1;
        }
    }
    for (size_t i = 1; i < g->num_tensors; i++) {
        if (strcmp(g->tensor_by_name[i - 1]->name, g->tensor_by_name[i]->name) == 0) {
            folio_set_err(err, errlen, "%s: tensor '%s' appears twice", g->path,
                          g->tensor_by_name[i]->name);
            return -1;
        }
    }
    return 0;
}

static int parse(struct folio_gguf *g, char *err, size_t errlen)
{
    struct cursor c = {
        .base = g->map, .size = g->size, .path = g->path, .err = err, .errlen = errlen};
    snprintf(c.what, sizeof c.what, "header");
    uint64_t nt, nkv;
    if (read_header(g, &c, &nt, &nkv) != 0)
        return -1;
    g->kvs = calloc(nkv ? nkv : 1, sizeof *g->kvs);
    g->tensors = calloc(nt ? nt : 1, sizeof *g->tensors);
    uint64_t *offsets = calloc(nt ? nt : 1, sizeof *offsets);
    if (!g->kvs || !g->tensors || !offsets) {
        free(offsets);
        folio_set_err(err, errlen, "%s: out of memory", g->path);
        return -1;
    }
    int rc = -1;
    for (; g->num_kvs < nkv; g->num_kvs++)
        if (read_kv(&c, g, g->num_kvs) != 0) {
            g->num_kvs++; /* its key may be allocated: freed on close */
            goto out;
        }
    for (; g->num_tensors < nt; g->num_tensors++)
        if (read_tensor_info(&c, g, g->num_tensors, &offsets[g->num_tensors]) != 0) {
            g->num_tensors++; /* its name is allocated: freed on close */
            goto out;
        }
    uint64_t align;
    if (build_indexes(g, err, errlen) != 0 || read_alignment(g, g->path, &align, err, errlen) != 0)
        goto out;
    uint64_t data_start = (c.off + align - 1) / align * align;
    uint64_t data_size = data_start <= g->size ? g->size - data_start : 0;
    for (size_t i = 0; i < g->num_tensors; i++) {
        struct folio_gguf_tensor *t = &g->tensors[i];
        if (offsets[i] % align != 0) {
            folio_set_err(err, errlen,
                          "%s: tensor '%s': data offset %llu is not a multiple of the alignment "
                          "%llu",
                          g->path, t->name, (unsigned long long)offsets[i],
                          (unsigned long long)align);
            goto out;
        }
        if (offsets[i] > data_size || t->nbytes > data_size - offsets[i]) {
            folio_set_err(err, errlen,
                          "%s: tensor '%s': data [%llu, +%zu) runs past the end of the data "
                          "section (%llu bytes from file offset %llu); file truncated?",
                          g->path, t->name, (unsigned long long)offsets[i], t->nbytes,
                          (unsigned long long)data_size, (unsigned long long)data_start);
            goto out;
        }
        t->data = g->map + data_start + offsets[i];
    }
    rc = 0;
out:
    free(offsets);
    return rc;
}

int folio_gguf_open(const char *path, struct folio_gguf **out, char *err, size_t errlen)
{
    *out = NULL;
    struct folio_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        free(g);
        folio_set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    if (map_file(g, err, errlen) != 0 || parse(g, err, errlen) != 0) {
        folio_gguf_close(g);
        return -1;
    }
    *out = g;
    return 0;
}

void folio_gguf_close(struct folio_gguf *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->num_kvs; i++) {
        free(g->kvs[i].key);
        free(g->kvs[i].str_offsets);
    }
    free(g->kvs);
    for (size_t i = 0; i < g->num_tensors; i++)
        free((char *)g->tensors[i].name);
    free(g->tensors);
    free(g->kv_by_key);
    free(g->tensor_by_name);
    if (g->map)
        munmap((void *)g->map, g->size);
    free(g->path);
    free(g);
}

const char *folio_gguf_path(const struct folio_gguf *g)
{
    return g->path;
}

uint32_t folio_gguf_version(const struct folio_gguf *g)
{
    return g->version;
}

size_t folio_gguf_num_tensors(const struct folio_gguf *g)
{
    return g->num_tensors;
}

const struct folio_gguf_tensor *folio_gguf_tensor_at(const struct folio_gguf *g, size_t i)
{
    return i < g->num_tensors ? &g->tensors[i] : NULL;
}

const struct folio_gguf_tensor *folio_gguf_find_tensor(const struct folio_gguf *g, const char *name)
{
    struct folio_gguf_tensor key = {.name = name};
    const struct folio_gguf_tensor *pkey = &key;
    const struct folio_gguf_tensor **hit =
        bsearch(&pkey, g->tensor_by_name, g->num_tensors, sizeof *hit, cmp_tensor);
    return hit ? *hit : NULL;
}

uint64_t folio_gguf_tensor_numel(const struct folio_gguf_tensor *t)
{
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= (uint64_t)t->ne[d];
    return n;
}

/* ---- metadata access ---- */

size_t folio_gguf_num_kv(const struct folio_gguf *g)
{
    return g->num_kvs;
}

const struct folio_gguf_kv *folio_gguf_kv_at(const struct folio_gguf *g, size_t i)
{
    return i < g->num_kvs ? &g->kvs[i] : NULL;
}

const struct folio_gguf_kv *folio_gguf_find(const struct folio_gguf *g, const char *key)
{
    struct folio_gguf_kv k = {.key = (char *)key};
    const struct folio_gguf_kv *pk = &k;
    const struct folio_gguf_kv **hit = bsearch(&pk, g->kv_by_key, g->num_kvs, sizeof *hit, cmp_kv);
    return hit ? *hit : NULL;
}
