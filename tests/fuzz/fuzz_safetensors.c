/* Fuzzes common/safetensors.h: arbitrary bytes as DIR/model.safetensors. An
 * open either fails with a message naming the file, or every tensor it hands
 * out lies inside the mapping (or its aligned copy), is aligned to its element
 * size, has nbytes = numel * element size, and reads back through
 * folio_tensor_read_f32; find() finds each tensor by its name. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_tmpdir.h"
#include "safetensors.h"

#define MAX_INPUT (1 << 20)

static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    const char *dir = fuzz_tmpdir_write("model.safetensors", data, size);
    struct folio_checkpoint *ck = NULL;
    char err[1024] = "";
    if (folio_checkpoint_open(dir, &ck, err, sizeof err) != 0) {
        if (!strstr(err, "model.safetensors"))
            abort(); /* the message names the file */
        return 0;
    }
    size_t n = folio_checkpoint_num_tensors(ck);
    for (size_t i = 0; i < n; i++) {
        const struct folio_tensor *t = folio_checkpoint_tensor(ck, i);
        size_t esize = folio_dtype_size(t->dtype);
        if (t->ndim < 0 || t->ndim > FOLIO_MAX_DIMS || esize == 0 ||
            (uintptr_t)t->data % esize != 0 || folio_tensor_numel(t) * esize != t->nbytes ||
            t->nbytes > size || folio_checkpoint_find(ck, t->name) != t)
            abort();
        if (i > 0 && strcmp(folio_checkpoint_tensor(ck, i - 1)->name, t->name) >= 0)
            abort(); /* sorted by name, no duplicates */
        float buf[64], acc = 0;
        size_t numel = folio_tensor_numel(t);
        for (size_t first = 0; first < numel; first += 64) {
            size_t count = numel - first < 64 ? numel - first : 64;
            folio_tensor_read_f32(t, first, count, buf);
            for (size_t k = 0; k < count; k++)
                acc += buf[k];
        }
        if (numel)
            acc += folio_tensor_get_f32(t, numel - 1);
        sink = acc;
    }
    folio_checkpoint_close(ck);
    return 0;
}
