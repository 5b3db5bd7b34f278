/* Fuzzes common/gguf.h: arbitrary bytes as a .gguf file. Opening either fails
 * with a message naming the file, or every accessor may then be used on every
 * key, array element and tensor without reading outside the mapping (ASan
 * checks), and each tensor's first and last elements dequantize or give an
 * error naming the tensor. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_tmpdir.h"
#include "gguf.h"

#define MAX_INPUT (64 << 10)

static void touch_kv(const struct folio_gguf_kv *kv)
{
    const char *s;
    size_t len;
    int64_t i;
    double f;
    bool b;
    volatile size_t sink = 0;
    if (folio_gguf_kv_string(kv, &s, &len) == 0 && len)
        sink += (unsigned char)s[0] + (unsigned char)s[len - 1];
    sink += folio_gguf_kv_int(kv, &i) == 0;
    sink += folio_gguf_kv_float(kv, &f) == 0;
    sink += folio_gguf_kv_bool(kv, &b) == 0;
    enum folio_gguf_vtype et;
    uint64_t n;
    if (folio_gguf_kv_array(kv, &et, &n) != 0)
        return;
    for (uint64_t k = 0; k < n && k < 4096; k++) {
        if (folio_gguf_kv_array_string(kv, k, &s, &len) == 0 && len)
            sink += (unsigned char)s[0] + (unsigned char)s[len - 1];
        sink += folio_gguf_kv_array_int(kv, k, &i) == 0;
        sink += folio_gguf_kv_array_float(kv, k, &f) == 0;
    }
    if (folio_gguf_kv_array_string(kv, n, &s, &len) == 0 ||
        folio_gguf_kv_array_int(kv, n, &i) == 0 || folio_gguf_kv_array_float(kv, n, &f) == 0)
        abort(); /* one past the end must be refused */
}

static void touch_tensor(const struct folio_gguf_tensor *t)
{
    char err[512];
    float out[512];
    uint64_t n = folio_gguf_tensor_numel(t);
    if (t->ndim < 1 || t->ndim > FOLIO_GGUF_MAX_DIMS || !t->name[0])
        abort();
    uint64_t take = n < 300 ? n : 300;
    for (int end = 0; end < 2; end++) {
        uint64_t first = end ? n - take : 0;
        err[0] = '\0';
        if (folio_gguf_dequantize(t, first, take, out, err, sizeof err) != 0 &&
            !strstr(err, t->name))
            abort();
    }
    if (folio_gguf_dequantize(t, n, 1, out, err, sizeof err) == 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    const char *dir = fuzz_tmpdir_write("model.gguf", data, size);
    (void)dir;
    struct folio_gguf *g;
    char err[512] = "";
    if (folio_gguf_open(fuzz_tmpdir_file("model.gguf"), &g, err, sizeof err) != 0) {
        if (!err[0] || !strstr(err, "model.gguf"))
            abort(); /* an error must say what and where */
        return 0;
    }
    for (size_t i = 0; i < folio_gguf_num_kv(g); i++) {
        const struct folio_gguf_kv *kv = folio_gguf_kv_at(g, i);
        if (folio_gguf_find(g, folio_gguf_kv_key(kv)) != kv)
            abort();
        touch_kv(kv);
    }
    for (size_t i = 0; i < folio_gguf_num_tensors(g); i++) {
        const struct folio_gguf_tensor *t = folio_gguf_tensor_at(g, i);
        if (folio_gguf_find_tensor(g, t->name) != t)
            abort();
        touch_tensor(t);
    }
    folio_gguf_close(g);
    return 0;
}
