/* Safetensors reader: each file is mapped read-only and its JSON header is
 * checked entry by entry before any tensor is handed out. A file is 8 bytes of
 * little-endian header length, the header ({name: {dtype, shape,
 * data_offsets}}, "__metadata__" aside), then the data section that the
 * offsets index. Nothing in the file is trusted: lengths, offsets, shapes and
 * dtypes are all checked against the file's real size. */
#include "safetensors.h"
#include "checkpoint_impl.h"
#include "error.h"
#include "fp8.h"
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A header larger than this is not a real checkpoint's (TinyLlama's is 25 KB,
 * a 400-shard 405B model's largest about 100 KB); refusing it bounds the
 * memory that a hostile file can make the JSON parser use. */
#define MAX_HEADER_BYTES (100u * 1024 * 1024)

size_t folio_dtype_size(enum folio_dtype dt)
{
    switch (dt) {
    case FOLIO_DTYPE_F8_E4M3:
        return 1;
    case FOLIO_DTYPE_BF16:
    case FOLIO_DTYPE_F16:
        return 2;
    case FOLIO_DTYPE_F32:
        return 4;
    }
    return 0;
}

const char *folio_dtype_name(enum folio_dtype dt)
{
    switch (dt) {
    case FOLIO_DTYPE_BF16:
        return "BF16";
    case FOLIO_DTYPE_F16:
        return "F16";
    case FOLIO_DTYPE_F32:
        return "F32";
    case FOLIO_DTYPE_F8_E4M3:
        return "F8_E4M3";
    }
    return "?";
}

static int parse_dtype(const char *s, enum folio_dtype *dt)
{
    if (strcmp(s, "BF16") == 0)
        *dt = FOLIO_DTYPE_BF16;
    else if (strcmp(s, "F16") == 0)
        *dt = FOLIO_DTYPE_F16;
    else if (strcmp(s, "F32") == 0)
        *dt = FOLIO_DTYPE_F32;
    else if (strcmp(s, "F8_E4M3") == 0)
        *dt = FOLIO_DTYPE_F8_E4M3;
    else
        return -1;
    return 0;
}

/* ---- conversions ---- */

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float folio_bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t folio_f32_to_bf16(float f)
{
    uint32_t u = bits_from_f32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN, never round to inf */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Round to nearest, ties to even: add 0x7fff plus the lowest kept bit. A
     * carry into the exponent is right (it rounds up to the next binade or to
     * inf), exactly as torch and the hardware convert. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float folio_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf, or NaN with its payload kept */
        return f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0)
            return f32_from_bits(sign);
        /* Subnormal: mant * 2^-24, exact in f32. Normalize the mantissa. */
        int e = -1;
        do {
            mant <<= 1;
            e++;
        } while (!(mant & 0x400u));
        mant &= 0x3ffu;
        return f32_from_bits(sign | ((uint32_t)(127 - 15 - e) << 23) | (mant << 13));
    }
    return f32_from_bits(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

uint16_t folio_f32_to_f16(float f)
{
    uint32_t u = bits_from_f32(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) /* >= 65520 rounds to inf (65504 is the largest finite) */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) {   /* below 2^-14: subnormal or zero */
        if (abs < 0x33000000u) /* below 2^-25: rounds to zero */
            return sign;
        uint32_t exp = abs >> 23;
        uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - exp; /* value = mant * 2^(exp-150); f16 unit is 2^-24 */
        uint32_t q = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* Normal: rebias the exponent, round the 13 dropped bits to nearest even. */
    uint32_t v = abs - ((127u - 15u) << 23);
    v += 0xfffu + ((v >> 13) & 1u);
    return (uint16_t)(sign | (v >> 13));
}

size_t folio_tensor_row_len(const struct folio_tensor *t)
{
    size_t n = 1;
    for (int d = 1; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return n;
}

float folio_tensor_row_scale(const struct folio_tensor *t, size_t r)
{
    if (t->dtype != FOLIO_DTYPE_F8_E4M3 || !t->scale)
        return 1.0f;
    return t->scale[t->num_scales == 1 ? 0 : r];
}

float folio_tensor_get_f32(const struct folio_tensor *t, size_t i)
{
    if (!t->data) {
        float v;
        folio_tensor_gguf_read_f32(t, i, 1, &v);
        return v;
    }
    const unsigned char *p = (const unsigned char *)t->data;
    switch (t->dtype) {
    case FOLIO_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return folio_bf16_to_f32(h);
    }
    case FOLIO_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return folio_f16_to_f32(h);
    }
    case FOLIO_DTYPE_F32: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    case FOLIO_DTYPE_F8_E4M3: {
        size_t len = folio_tensor_row_len(t);
        return folio_e4m3_to_f32(p[i]) * folio_tensor_row_scale(t, len ? i / len : 0);
    }
    }
    return 0.0f;
}

void folio_tensor_read_f32(const struct folio_tensor *t, size_t first, size_t count, float *out)
{
    if (!t->data) { /* a GGUF tensor kept as its blocks */
        folio_tensor_gguf_read_f32(t, first, count, out);
        return;
    }
    if (t->dtype == FOLIO_DTYPE_F8_E4M3) { /* the table and one division a row, not an element */
        const unsigned char *p = (const unsigned char *)t->data;
        const float *lut = folio_e4m3_table();
        size_t len = folio_tensor_row_len(t);
        for (size_t k = 0; k < count;) {
            size_t r = len ? (first + k) / len : 0, end = len ? (r + 1) * len - first : count;
            float s = folio_tensor_row_scale(t, r);
            for (; k < count && k < end; k++)
                out[k] = lut[p[first + k]] * s;
        }
        return;
    }
    for (size_t k = 0; k < count; k++)
        out[k] = folio_tensor_get_f32(t, first + k);
}

size_t folio_tensor_numel(const struct folio_tensor *t)
{
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return n;
}

/* ---- files ---- */

static int map_file(const char *path, struct shard *sh, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        folio_set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        folio_set_err(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        folio_set_err(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_size < 8) {
        folio_set_err(
            err, errlen,
            "%s: file is %lld bytes, too short for a safetensors header length (8 bytes); "
            "truncated?",
            path, (long long)st.st_size);
        close(fd);
        return -1;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        folio_set_err(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
        return -1;
    }
    sh->map = map;
    sh->size = (size_t)st.st_size;
    return 0;
}

int folio_checkpoint_push(struct folio_checkpoint *ck, const struct folio_tensor *t)
{
    if (ck->num_tensors == ck->cap_tensors) {
        size_t cap = ck->cap_tensors ? 2 * ck->cap_tensors : 64;
        struct folio_tensor *n = realloc(ck->tensors, cap * sizeof *n);
        if (!n)
            return -1;
        ck->tensors = n;
        ck->cap_tensors = cap;
    }
    ck->tensors[ck->num_tensors++] = *t;
    return 0;
}

/* A JSON integer in [0, max], or -1. */
static long long json_nonneg(const json_t *v, long long max)
{
    if (!json_is_integer(v))
        return -1;
    long long x = json_integer_value(v);
    return (x < 0 || x > max) ? -1 : x;
}

/* Checks one header entry and fills t from it. */
static int parse_entry(const struct shard *sh, const char *name, const json_t *info,
                       const unsigned char *data, size_t data_size, struct folio_tensor *t,
                       char *err, size_t errlen)
{
    const char *path = sh->path;
    if (!json_is_object(info)) {
        folio_set_err(err, errlen, "%s: tensor '%s': header entry is not a JSON object", path,
                      name);
        return -1;
    }
    const json_t *jdtype = json_object_get(info, "dtype");
    const json_t *jshape = json_object_get(info, "shape");
    const json_t *joffs = json_object_get(info, "data_offsets");
    if (!json_is_string(jdtype)) {
        folio_set_err(err, errlen, "%s: tensor '%s': missing or non-string \"dtype\"", path, name);
        return -1;
    }
    if (parse_dtype(json_string_value(jdtype), &t->dtype) != 0) {
        folio_set_err(
            err, errlen,
            "%s: tensor '%s': unsupported dtype '%s' (supported: BF16, F16, F32, F8_E4M3)", path,
            name, json_string_value(jdtype));
        return -1;
    }
    if (!json_is_array(jshape)) {
        folio_set_err(err, errlen, "%s: tensor '%s': missing or non-array \"shape\"", path, name);
        return -1;
    }
    size_t ndim = json_array_size(jshape);
    if (ndim > FOLIO_MAX_DIMS) {
        folio_set_err(err, errlen, "%s: tensor '%s': %zu dimensions, at most %d supported", path,
                      name, ndim, FOLIO_MAX_DIMS);
        return -1;
    }
    uint64_t numel = 1;
    bool overflow = false;
    t->ndim = (int)ndim;
    for (size_t d = 0; d < ndim; d++) {
        long long n = json_nonneg(json_array_get(jshape, d), INT64_MAX);
        if (n < 0) {
            folio_set_err(err, errlen, "%s: tensor '%s': shape[%zu] is not a non-negative integer",
                          path, name, d);
            return -1;
        }
        t->shape[d] = n;
        if (__builtin_mul_overflow(numel, (uint64_t)n, &numel))
            overflow = true;
    }
    for (size_t d = ndim; d < FOLIO_MAX_DIMS; d++)
        t->shape[d] = 0;
    if (!json_is_array(joffs) || json_array_size(joffs) != 2) {
        folio_set_err(err, errlen,
                      "%s: tensor '%s': \"data_offsets\" is not an array of two integers", path,
                      name);
        return -1;
    }
    long long begin = json_nonneg(json_array_get(joffs, 0), INT64_MAX);
    long long end = json_nonneg(json_array_get(joffs, 1), INT64_MAX);
    if (begin < 0 || end < 0) {
        folio_set_err(err, errlen,
                      "%s: tensor '%s': \"data_offsets\" are not non-negative integers", path,
                      name);
        return -1;
    }
    if (begin > end) {
        folio_set_err(err, errlen, "%s: tensor '%s': data_offsets [%lld, %lld] begin after end",
                      path, name, begin, end);
        return -1;
    }
    if ((unsigned long long)end > data_size) {
        folio_set_err(
            err, errlen,
            "%s: tensor '%s': data_offsets [%lld, %lld] run past the end of the data section "
            "(%zu bytes); file truncated?",
            path, name, begin, end, data_size);
        return -1;
    }
    uint64_t want;
    if (overflow || __builtin_mul_overflow(numel, (uint64_t)folio_dtype_size(t->dtype), &want) ||
        want != (uint64_t)(end - begin)) {
        char shape[128];
        size_t off = 0;
        shape[0] = '\0';
        for (int d = 0; d < t->ndim && off < sizeof shape; d++)
            off += (size_t)snprintf(shape + off, sizeof shape - off, "%s%lld", d ? ", " : "",
                                    (long long)t->shape[d]);
        folio_set_err(
            err, errlen,
            "%s: tensor '%s': data_offsets span %lld bytes but shape [%s] of %s needs %s%llu", path,
            name, end - begin, shape, folio_dtype_name(t->dtype), overflow ? "more than " : "",
            overflow ? (unsigned long long)UINT64_MAX : (unsigned long long)want);
        return -1;
    }
    t->data = data + begin;
    t->nbytes = (size_t)(end - begin);
    t->file = sh->path;
    return 0;
}

/* Maps one file and appends its tensors to ck. */
static int load_file(struct folio_checkpoint *ck, struct shard *sh, char *err, size_t errlen)
{
    if (map_file(sh->path, sh, err, errlen) != 0)
        return -1;
    uint64_t hlen = 0;
    for (int b = 7; b >= 0; b--)
        hlen = (hlen << 8) | sh->map[b];
    if (hlen > sh->size - 8) {
        folio_set_err(
            err, errlen,
            "%s: header length %llu runs past the end of the file (%zu bytes); truncated or "
            "not a safetensors file",
            sh->path, (unsigned long long)hlen, sh->size);
        return -1;
    }
    if (hlen > MAX_HEADER_BYTES) {
        folio_set_err(err, errlen, "%s: header length %llu is over the %u-byte limit", sh->path,
                      (unsigned long long)hlen, MAX_HEADER_BYTES);
        return -1;
    }
    json_error_t jerr;
    json_t *root =
        json_loadb((const char *)sh->map + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        folio_set_err(err, errlen, "%s: header is not valid JSON: %s (header byte %d)", sh->path,
                      jerr.text, jerr.position);
        return -1;
    }
    if (!json_is_object(root)) {
        folio_set_err(err, errlen, "%s: header is not a JSON object", sh->path);
        json_decref(root);
        return -1;
    }
    const unsigned char *data = sh->map + 8 + hlen;
    size_t data_size = sh->size - 8 - (size_t)hlen;
    const char *name;
    json_t *info;
    json_object_foreach(root, name, info)
    {
        if (strcmp(name, "__metadata__") == 0)
            continue;
        struct folio_tensor t = {0};
        if (parse_entry(sh, name, info, data, data_size, &t, err, errlen) != 0) {
            json_decref(root);
            return -1;
        }
        t.name = strdup(name);
        if (!t.name || folio_checkpoint_push(ck, &t) != 0) {
            free((char *)t.name);
            folio_set_err(err, errlen, "%s: out of memory", sh->path);
            json_decref(root);
            return -1;
        }
    }
    json_decref(root);
    return 0;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(((const struct folio_tensor *)a)->name, ((const struct folio_tensor *)b)->name);
}

int folio_checkpoint_own(struct folio_checkpoint *ck, void *buf)
{
    void **grown = realloc(ck->owned, (ck->num_owned + 1) * sizeof *grown);
    if (!grown) {
        free(buf);
        return -1;
    }
    ck->owned = grown;
    ck->owned[ck->num_owned++] = buf;
    return 0;
}

/* Backends read elements through typed pointers, so every tensor's data is
 * made aligned to its element size. Files from the reference writer always
 * are (it pads the header to 8 bytes and orders tensors by alignment); a file
 * that is not gets its misaligned tensors copied once, rather than refused. */
static int align_tensors(struct folio_checkpoint *ck, char *err, size_t errlen)
{
    for (size_t i = 0; i < ck->num_tensors; i++) {
        struct folio_tensor *t = &ck->tensors[i];
        if ((uintptr_t)t->data % folio_dtype_size(t->dtype) == 0)
            continue;
        void *copy = malloc(t->nbytes ? t->nbytes : 1);
        if (!copy || folio_checkpoint_own(ck, copy) != 0) {
            folio_set_err(err, errlen, "%s: tensor '%s': out of memory", t->file, t->name);
            return -1;
        }
        memcpy(copy, t->data, t->nbytes);
        t->data = copy;
    }
    return 0;
}

/* Sorts the tensors by name for bsearch. The same name in two files would make
 * the weights ambiguous, so it is an error. */
static int sort_and_check_unique(struct folio_checkpoint *ck, char *err, size_t errlen)
{
    if (ck->num_tensors > 1)
        qsort(ck->tensors, ck->num_tensors, sizeof *ck->tensors, cmp_tensor_name);
    for (size_t i = 1; i < ck->num_tensors; i++) {
        if (strcmp(ck->tensors[i - 1].name, ck->tensors[i].name) == 0) {
            folio_set_err(err, errlen, "tensor '%s' appears in both %s and %s", ck->tensors[i].name,
                          ck->tensors[i - 1].file, ck->tensors[i].file);
            return -1;
        }
    }
    return 0;
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static struct shard *add_shard(struct folio_checkpoint *ck, char *path)
{
    struct shard *n = realloc(ck->shards, (ck->num_shards + 1) * sizeof *n);
    if (!n)
        return NULL;
    ck->shards = n;
    struct shard *sh = &ck->shards[ck->num_shards++];
    memset(sh, 0, sizeof *sh);
    sh->path = path;
    return sh;
}

/* A shard name from the index must stay inside the model directory. */
static bool safe_shard_name(const char *s)
{
    return s[0] != '\0' && s[0] != '.' && strchr(s, '/') == NULL;
}

static int open_sharded(struct folio_checkpoint *ck, const char *dir, char *err, size_t errlen)
{
    const char *index_path = ck->source;
    json_error_t jerr;
    json_t *root = json_load_file(index_path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        folio_set_err(err, errlen, "%s: cannot read: %s (line %d)", index_path, jerr.text,
                      jerr.line);
        return -1;
    }
    int rc = -1;
    json_t *wmap = json_object_get(root, "weight_map");
    if (!json_is_object(wmap) || json_object_size(wmap) == 0) {
        folio_set_err(err, errlen, "%s: missing or empty \"weight_map\" object", index_path);
        goto out;
    }
    const char *name;
    json_t *jfile;
    /* Open each distinct file once, in the order the index first names it. */
    json_object_foreach(wmap, name, jfile)
    {
        if (!json_is_string(jfile) || !safe_shard_name(json_string_value(jfile))) {
            folio_set_err(err, errlen, "%s: tensor '%s': shard file name is not a plain file name",
                          index_path, name);
            goto out;
        }
        const char *fname = json_string_value(jfile);
        bool seen = false;
        for (size_t s = 0; s < ck->num_shards && !seen; s++) {
            const char *base = strrchr(ck->shards[s].path, '/');
            seen = strcmp(base ? base + 1 : ck->shards[s].path, fname) == 0;
        }
        if (seen)
            continue;
        char *path = join_path(dir, fname);
        struct shard *sh = path ? add_shard(ck, path) : NULL;
        if (!sh) {
            free(path);
            folio_set_err(err, errlen, "%s: out of memory", index_path);
            goto out;
        }
        if (load_file(ck, sh, err, errlen) != 0) {
            /* Say which tensor needed the file, then why it failed. */
            char why[768];
            snprintf(why, sizeof why, "%s", err ? err : "");
            folio_set_err(err, errlen, "%s: shard '%s' (needed for tensor '%s'): %s", index_path,
                          fname, name, why);
            goto out;
        }
    }
    if (sort_and_check_unique(ck, err, errlen) != 0)
        goto out;
    /* Every tensor the index maps must be in the file it names. */
    json_object_foreach(wmap, name, jfile)
    {
        const struct folio_tensor *t = folio_checkpoint_find(ck, name);
        const char *fname = json_string_value(jfile);
        if (!t) {
            folio_set_err(err, errlen,
                          "%s: tensor '%s' is mapped to '%s', but that file has no such tensor",
                          index_path, name, fname);
            goto out;
        }
        const char *base = strrchr(t->file, '/');
        if (strcmp(base ? base + 1 : t->file, fname) != 0) {
            folio_set_err(err, errlen, "%s: tensor '%s' is mapped to '%s', but %s holds it",
                          index_path, name, fname, t->file);
            goto out;
        }
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int folio_checkpoint_open(const char *model_dir, struct folio_checkpoint **out, char *err,
                          size_t errlen)
{
    return folio_checkpoint_open_flags(model_dir, 0, out, err, errlen);
}

int folio_checkpoint_open_flags(const char *model_dir, unsigned flags,
                                struct folio_checkpoint **out, char *err, size_t errlen)
{
    *out = NULL;
    struct folio_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck) {
        folio_set_err(err, errlen, "%s: out of memory", model_dir);
        return -1;
    }
    ck->flags = flags;
    /* A single model.safetensors wins over an index, as in transformers. */
    char *single = join_path(model_dir, "model.safetensors");
    char *index = join_path(model_dir, "model.safetensors.index.json");
    if (!single || !index) {
        free(single);
        free(index);
        free(ck);
        folio_set_err(err, errlen, "%s: out of memory", model_dir);
        return -1;
    }
    char gguf_path[4096];
    int rc = folio_gguf_resolve(model_dir, gguf_path, sizeof gguf_path, err, errlen);
    if (rc == 1) {
        free(single);
        free(index);
        ck->source = strdup(gguf_path);
        rc = ck->source ? folio_checkpoint_load_gguf(ck, err, errlen) : -1;
        if (!ck->source)
            folio_set_err(err, errlen, "%s: out of memory", gguf_path);
        if (rc == 0)
            rc = sort_and_check_unique(ck, err, errlen);
    } else if (rc < 0) {
        free(single);
        free(index);
    } else if (access(single, F_OK) == 0) {
        ck->source = single;
        free(index);
        struct shard *sh = add_shard(ck, strdup(single));
        if (!sh || !sh->path) {
            folio_set_err(err, errlen, "%s: out of memory", single);
            rc = -1;
        } else {
            rc = load_file(ck, sh, err, errlen);
        }
        if (rc == 0)
            rc = sort_and_check_unique(ck, err, errlen);
    } else if (access(index, F_OK) == 0) {
        ck->source = index;
        free(single);
        rc = open_sharded(ck, model_dir, err, errlen);
    } else {
        folio_set_err(err, errlen,
                      "%s: no model.safetensors, model.safetensors.index.json or .gguf file",
                      model_dir);
        free(single);
        free(index);
        folio_checkpoint_close(ck);
        return -1;
    }
    if (rc == 0)
        rc = align_tensors(ck, err, errlen);
    if (rc == 0)
        rc = folio_checkpoint_bind_fp8_scales(ck, err, errlen);
    if (rc != 0) {
        folio_checkpoint_close(ck);
        return -1;
    }
    *out = ck;
    return 0;
}

void folio_checkpoint_close(struct folio_checkpoint *ck)
{
    if (!ck)
        return;
    for (size_t i = 0; i < ck->num_tensors; i++)
        free((char *)ck->tensors[i].name);
    free(ck->tensors);
    for (size_t i = 0; i < ck->num_owned; i++)
        free(ck->owned[i]);
    free(ck->owned);
    folio_gguf_close(ck->gguf);
    for (size_t s = 0; s < ck->num_shards; s++) {
        if (ck->shards[s].map)
            munmap((void *)ck->shards[s].map, ck->shards[s].size);
        free(ck->shards[s].path);
    }
    free(ck->shards);
    free(ck->source);
    free(ck);
}

const struct folio_tensor *folio_checkpoint_find(const struct folio_checkpoint *ck,
                                                 const char *name)
{
    if (ck->num_tensors == 0)
        return NULL;
    struct folio_tensor key = {.name = name};
    return bsearch(&key, ck->tensors, ck->num_tensors, sizeof *ck->tensors, cmp_tensor_name);
}

size_t folio_checkpoint_num_tensors(const struct folio_checkpoint *ck)
{
    return ck->num_tensors;
}

const struct folio_tensor *folio_checkpoint_tensor(const struct folio_checkpoint *ck, size_t i)
{
    return i < ck->num_tensors ? &ck->tensors[i] : NULL;
}

const char *folio_checkpoint_source(const struct folio_checkpoint *ck)
{
    return ck->source;
}
