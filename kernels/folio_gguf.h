/* The kernels that compute on GGUF weights kept packed on the GPU (gguf_blocks.h: a row is its
 * file's blocks, its stride padded to 16 bytes), behind C launch functions like
 * folio_kernels.h's: the GEMV of decode's few rows and the widening of a matrix to bf16 for
 * the larger products. `type` is a ggml type number of gguf_blocks.h (Q4_0, Q4_1, Q8_0, Q4_K,
 * Q6_K, or BF16 for a tensor of another type widened at load) or Folio's Q4_0X8; k a multiple
 * of 32 (256 for the K-quants and Q4_0X8). */
#ifndef FOLIO_GGUF_KERNELS_H
#define FOLIO_GGUF_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "folio_kernels.h" /* folio_bf16_bits */
#include "gguf_blocks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most rows folio_k_gguf_gemv takes. */
#define FOLIO_K_GGUF_GEMV_MAX_ROWS 8

/* y[t * ldy + j] = bf16(sum_i x[t][i] * w[j][i]) for t < m <= FOLIO_K_GGUF_GEMV_MAX_ROWS rows
 * of x (bf16 [m][k]), j < n rows of w (packed, row j at w + j * stride): each weight decoded in
 * registers, the products summed in f32. One warp an output column. */
cudaError_t folio_k_gguf_gemv(folio_bf16_bits *y, int ldy, const folio_bf16_bits *x, const void *w,
                              int type, int64_t stride, int m, int n, int k, cudaStream_t s);

/* out[j][i] = bf16(w[j][i]) for j < n, i < k: the packed matrix widened (out row-major, k a
 * row), for a bf16 GEMM to read. */
cudaError_t folio_k_gguf_dequantize(folio_bf16_bits *out, const void *w, int type, int64_t stride,
                                    int n, int k, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
