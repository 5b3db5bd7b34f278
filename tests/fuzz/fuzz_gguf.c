/* Fuzzes common/gguf.h: arbitrary bytes as a .gguf file. Opening either fails
 * with a message naming the file, or every accessor may then be used on every
 * key, array element and tensor without reading outside the mapping (ASan
 * checks), and each tensor's first and last elements dequantize or give an
 * error naming the tensor. The same file as a model: its config and its
 * checkpoint (tensors renamed, dequantized, rows reordered) load or fail with a
 * message naming the file. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_tmpdir.h"
#include "gguf.h"
#include "model_config.h"
#include "safetensors.h"

#define MAX_INPUT (64 << 10)

/* Where the bytes read land, so that the reads are not optimized away. */
static volatile size_t sink;

static void touch_kv(const struct folio_gguf_kv *kv)
{
    const char *s;
    size_t len;
    int64_t i;
    double f;
    bool b;
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

/* The file as a --model: a config whose sizes backends may index with, and
 * tensors whose byte counts match their shapes. */
static void load_as_model(const char *path)
{
    struct folio_model_config cfg;
    char err[512] = "";
    if (folio_model_config_load(path, &cfg, err, sizeof err) != 0) {
        if (!strstr(err, "model.gguf"))
            abort();
    } else if (cfg.hidden_size < 1 || cfg.num_heads < 1 || cfg.num_kv_heads < 1 ||
               cfg.num_heads % cfg.num_kv_heads != 0 || cfg.head_dim % 2 != 0 ||
               cfg.vocab_size < 1 || cfg.bos_token_id >= cfg.vocab_size ||
               cfg.num_eos_token_ids > FOLIO_MAX_EOS_IDS) {
        abort();
    }
    struct folio_checkpoint *ck;
    err[0] = '\0';
    if (folio_checkpoint_open(path, &ck, err, sizeof err) != 0) {
        if (!strstr(err, "model.gguf"))
            abort();
        return;
    }
    for (size_t i = 0; i < folio_checkpoint_num_tensors(ck); i++) {
        const struct folio_tensor *t = folio_checkpoint_tensor(ck, i);
        if (t->nbytes != folio_tensor_numel(t) * folio_dtype_size(t->dtype))
            abort();
        if (t->nbytes)
            (void)folio_tensor_get_f32(t, folio_tensor_numel(t) - 1);
    }
    folio_checkpoint_close(ck);
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
    load_as_model(fuzz_tmpdir_file("model.gguf"));
    return 0;
}
