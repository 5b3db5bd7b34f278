/* gguf_dump: what common/gguf.h reads from a GGUF file, for the Python tests
 * to compare with the gguf package's reader.
 *
 *     gguf_dump FILE.gguf [OUT.bin]
 *
 * Prints one JSON object: {"version", "kv": {key: value}, "tensors": [{"name",
 * "type", "ne", "nbytes"}]}; arrays print as lists (of strings, integers or
 * floats; nested arrays as their element count). With OUT.bin, every tensor
 * dequantized to float32 is written there in tensor order, or, for a type Folio
 * cannot dequantize, nothing, and the tensor's entry gets "error". On a file
 * that does not open, prints the error to stderr and exits 1. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "gguf.h"

static json_t *scalar(const struct folio_gguf_kv *kv)
{
    const char *s;
    size_t len;
    int64_t i;
    double f;
    bool b;
    switch (folio_gguf_kv_type(kv)) {
    case FOLIO_GGUF_STRING:
        folio_gguf_kv_string(kv, &s, &len);
        return json_stringn_nocheck(s, len);
    case FOLIO_GGUF_BOOL:
        folio_gguf_kv_bool(kv, &b);
        return json_boolean(b);
    case FOLIO_GGUF_FLOAT32:
    case FOLIO_GGUF_FLOAT64:
        folio_gguf_kv_float(kv, &f);
        return json_real(f);
    default:
        if (folio_gguf_kv_int(kv, &i) == 0)
            return json_integer(i);
        folio_gguf_kv_float(kv, &f); /* a uint64 above INT64_MAX */
        return json_real(f);
    }
}

static json_t *array(const struct folio_gguf_kv *kv)
{
    enum folio_gguf_vtype et;
    uint64_t n;
    folio_gguf_kv_array(kv, &et, &n);
    if (et == FOLIO_GGUF_ARRAY)
        return json_integer((json_int_t)n);
    json_t *a = json_array();
    for (uint64_t k = 0; k < n; k++) {
        const char *s;
        size_t len;
        int64_t i;
        double f;
        if (et == FOLIO_GGUF_STRING && folio_gguf_kv_array_string(kv, k, &s, &len) == 0)
            json_array_append_new(a, json_stringn_nocheck(s, len));
        else if (et != FOLIO_GGUF_FLOAT32 && et != FOLIO_GGUF_FLOAT64 &&
                 folio_gguf_kv_array_int(kv, k, &i) == 0)
            json_array_append_new(a, et == FOLIO_GGUF_BOOL ? json_boolean(i) : json_integer(i));
        else if (folio_gguf_kv_array_float(kv, k, &f) == 0)
            json_array_append_new(a, json_real(f));
    }
    return a;
}

static int dump_tensor(const struct folio_gguf_tensor *t, FILE *bin, json_t *jt)
{
    uint64_t n = folio_gguf_tensor_numel(t);
    json_t *ne = json_array();
    for (int d = 0; d < t->ndim; d++)
        json_array_append_new(ne, json_integer(t->ne[d]));
    json_object_set_new(jt, "name", json_string(t->name));
    json_object_set_new(jt, "type", json_string(folio_ggml_type_name(t->type)));
    json_object_set_new(jt, "ne", ne);
    json_object_set_new(jt, "nbytes", json_integer((json_int_t)t->nbytes));
    if (!bin)
        return 0;
    char err[512];
    float *buf = malloc((n ? n : 1) * sizeof *buf);
    if (!buf)
        return -1;
    if (folio_gguf_dequantize(t, 0, n, buf, err, sizeof err) != 0) {
        json_object_set_new(jt, "error", json_string(err));
    } else if (fwrite(buf, sizeof *buf, n, bin) != n) {
        free(buf);
        return -1;
    }
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: gguf_dump FILE.gguf [OUT.bin]\n");
        return 2;
    }
    struct folio_gguf *g;
    char err[1024];
    if (folio_gguf_open(argv[1], &g, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    FILE *bin = argc > 2 ? fopen(argv[2], "wb") : NULL;
    if (argc > 2 && !bin) {
        perror(argv[2]);
        folio_gguf_close(g);
        return 1;
    }
    json_t *root = json_object(), *kvs = json_object(), *tensors = json_array();
    json_object_set_new(root, "version", json_integer(folio_gguf_version(g)));
    for (size_t i = 0; i < folio_gguf_num_kv(g); i++) {
        const struct folio_gguf_kv *kv = folio_gguf_kv_at(g, i);
        json_object_set_new(kvs, folio_gguf_kv_key(kv),
                            folio_gguf_kv_type(kv) == FOLIO_GGUF_ARRAY ? array(kv) : scalar(kv));
    }
    int rc = 0;
    for (size_t i = 0; i < folio_gguf_num_tensors(g) && rc == 0; i++) {
        json_t *jt = json_object();
        rc = dump_tensor(folio_gguf_tensor_at(g, i), bin, jt);
        json_array_append_new(tensors, jt);
    }
    json_object_set_new(root, "kv", kvs);
    json_object_set_new(root, "tensors", tensors);
    json_dumpf(root, stdout, JSON_COMPACT | JSON_ENSURE_ASCII);
    putchar('\n');
    json_decref(root);
    if (bin && fclose(bin) != 0)
        rc = -1;
    if (rc != 0)
        fprintf(stderr, "gguf_dump: writing %s failed\n", argv[2]);
    folio_gguf_close(g);
    return rc ? 1 : 0;
}
