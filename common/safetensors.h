/* Safetensors files mapped with mmap and checked, never trusted: every
 * header, offset, shape and dtype is validated before a pointer is handed out. */
#ifndef FOLIO_SAFETENSORS_H
#define FOLIO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* F8_E4M3: float8 e4m3 codes (common/fp8.h) of an FP8 checkpoint, each tensor with its f32
 * scales (struct folio_tensor's scale): a value is code x scale. */
enum folio_dtype { FOLIO_DTYPE_BF16 = 0, FOLIO_DTYPE_F16, FOLIO_DTYPE_F32, FOLIO_DTYPE_F8_E4M3 };

size_t folio_dtype_size(enum folio_dtype dt);
const char *folio_dtype_name(enum folio_dtype dt);

#define FOLIO_MAX_DIMS 4

struct folio_gguf_tensor;

struct folio_tensor {
    const char *name; /* owned by the checkpoint */
    const char *file; /* the file it lives in, for error messages */
    enum folio_dtype dtype;
    int ndim;
    int64_t shape[FOLIO_MAX_DIMS];
    const void *data; /* inside the mapping (or an aligned copy): aligned to the element
                         size; valid while the checkpoint is open */
    size_t nbytes;
    /* A GGUF tensor that was dequantized at load keeps its blocks as the file holds them, for a
     * backend that computes on them (folio_tensor_gguf_row); NULL for other tensors. */
    const struct folio_gguf_tensor *gguf;
    int gguf_head_dim; /* its rows are permuted within heads of this many (llama's q/k); 0: not */
    /* An F8_E4M3 tensor's scales, from the tensor NAME_scale beside it (compressed-tensors'
     * and vLLM's weight_scale), widened to f32 and owned by the checkpoint: num_scales 1 (one
     * per tensor) or shape[0] (one per output row). NULL and 0 for other dtypes. */
    const float *scale;
    size_t num_scales;
};

/* The scale of row r of an F8_E4M3 tensor (a per-tensor scale is every row's); 1 otherwise. */
float folio_tensor_row_scale(const struct folio_tensor *t, size_t r);
/* The elements of one row of a tensor (the product of its shape past the first; 1 for a
 * scalar or a vector). */
size_t folio_tensor_row_len(const struct folio_tensor *t);

/* Row r (in Hugging Face's order) of a tensor's GGUF blocks as the file holds them, and the
 * ggml type in *type where type is not NULL; NULL for a tensor that has none. */
const void *folio_tensor_gguf_row(const struct folio_tensor *t, size_t r, uint32_t *type);
/* Elements [first, first + count) (Hugging Face's row-major order) of a tensor with GGUF blocks,
 * dequantized. */
void folio_tensor_gguf_read_f32(const struct folio_tensor *t, size_t first, size_t count,
                                float *out);

/* One checkpoint: model.safetensors, or the shards listed in
 * model.safetensors.index.json. */
struct folio_checkpoint;

int folio_checkpoint_open(const char *model_dir, struct folio_checkpoint **out, char *err,
                          size_t errlen);
/* GGUF's Q4_0, Q4_1 and Q8_0 tensors are not dequantized at load: their data is NULL (their
 * dtype and size still say f32), their blocks are read with folio_tensor_gguf_row, and
 * folio_tensor_read_f32 dequantizes what it is asked for. For a backend that computes on the
 * blocks (the CPU's fast path), so that it starts without a copy of the model in f32. */
#define FOLIO_CHECKPOINT_KEEP_BLOCKS 1u
int folio_checkpoint_open_flags(const char *model_dir, unsigned flags,
                                struct folio_checkpoint **out, char *err, size_t errlen);
void folio_checkpoint_close(struct folio_checkpoint *ck);

/* NULL when absent. */
const struct folio_tensor *folio_checkpoint_find(const struct folio_checkpoint *ck,
                                                 const char *name);
/* The file the checkpoint was opened from (model.safetensors or the index),
 * for error messages. */
const char *folio_checkpoint_source(const struct folio_checkpoint *ck);
/* Tensors are sorted by name. */
size_t folio_checkpoint_num_tensors(const struct folio_checkpoint *ck);
const struct folio_tensor *folio_checkpoint_tensor(const struct folio_checkpoint *ck, size_t i);

/* Element i of a tensor as float, whatever its dtype (an F8_E4M3 code times its row's scale). */
float folio_tensor_get_f32(const struct folio_tensor *t, size_t i);
/* Elements [first, first+count) as floats into out. */
void folio_tensor_read_f32(const struct folio_tensor *t, size_t first, size_t count, float *out);
/* The product of the shape (1 for a scalar). */
size_t folio_tensor_numel(const struct folio_tensor *t);

/* bf16/f16 <-> f32 conversions shared by every backend. */
float folio_bf16_to_f32(uint16_t h);
uint16_t folio_f32_to_bf16(float f); /* round to nearest even */
float folio_f16_to_f32(uint16_t h);  /* subnormals, inf and NaN included */
uint16_t folio_f32_to_f16(float f);  /* round to nearest even; overflow to inf */

#endif
