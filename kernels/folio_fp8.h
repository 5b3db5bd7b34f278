/* The kernels of `--quantization fp8` (common/fp8.h's rule: a row's scale s = max(amax / 448,
 * FOLIO_FP8_MIN_SCALE), codes e4m3(x / s) rounded to nearest even and saturated), behind C
 * launch functions like folio_kernels.h's: weights quantized per output channel at load,
 * activations per token before each product, and the products' outer-product scaling where
 * cuBLASLt does not apply it. e4m3 codes travel as uint8_t; tensors are row-major. */
#ifndef FOLIO_FP8_KERNELS_H
#define FOLIO_FP8_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "folio_kernels.h" /* folio_bf16_bits */

#ifdef __cplusplus
extern "C" {
#endif

/* q[r][c] = e4m3(x[r][c] / scale[r]) for r < rows, c < cols, scale[r] the rule's scale of row
 * r: the same codes and scales as folio_fp8_quantize_row computes from the same values. One CTA
 * a row. */
cudaError_t folio_k_fp8_quantize_rows(uint8_t *q, float *scale, const folio_bf16_bits *x,
                                      int64_t rows, int cols, cudaStream_t s);

/* y[t][j] = bf16(acc[t][j] * w_scale[j] * x_scale[t]): the scaling of an FP8 GEMM that wrote
 * its raw f32 sums acc [m][n] (cuBLASLt without outer-vector scales). */
cudaError_t folio_k_fp8_scale_out(folio_bf16_bits *y, const float *acc, const float *x_scale,
                                  const float *w_scale, int m, int n, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
