/* Per-row e4m3 quantization (weights at load, activations before a cuBLASLt FP8 GEMM) and the
 * outer-product scaling of raw FP8 GEMM sums. */
#include "fp8.cuh"
#include "folio_fp8.h"

#define QUANT_THREADS 256

/* One CTA a row: its largest magnitude, then each value's code. */
__global__ void __launch_bounds__(QUANT_THREADS)
    fp8_quantize_rows_kernel(uint8_t *q, float *scale, const folio_bf16_bits *x, int cols)
{
    __shared__ float scratch[32];
    const folio_bf16_bits *xr = x + (int64_t)blockIdx.x * cols;
    uint8_t *qr = q + (int64_t)blockIdx.x * cols;
    float amax = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        amax = fmaxf(amax, fabsf(bf16_to_f32(xr[i])));
    const float s = fp8_scale(block_max(amax, scratch));
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        qr[i] = fp8_code(bf16_to_f32(xr[i]), s);
    if (threadIdx.x == 0)
        scale[blockIdx.x] = s;
}

extern "C" cudaError_t folio_k_fp8_quantize_rows(uint8_t *q, float *scale, const folio_bf16_bits *x,
                                                 int64_t rows, int cols, cudaStream_t s)
{
    if (rows <= 0)
        return cudaSuccess;
    fp8_quantize_rows_kernel<<<(unsigned)rows, QUANT_THREADS, 0, s>>>(q, scale, x, cols);
    return cudaGetLastError();
}

__global__ void fp8_scale_out_kernel(folio_bf16_bits *y, const float *acc, const float *x_scale,
                                     const float *w_scale, int n, int64_t total)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= total)
        return;
    const int64_t t = i / n;
    const int j = (int)(i - t * n);
    y[i] = f32_to_bf16(acc[i] * w_scale[j] * x_scale[t]);
}

extern "C" cudaError_t folio_k_fp8_scale_out(folio_bf16_bits *y, const float *acc,
                                             const float *x_scale, const float *w_scale, int m,
                                             int n, cudaStream_t s)
{
    const int64_t total = (int64_t)m * n;
    if (total <= 0)
        return cudaSuccess;
    fp8_scale_out_kernel<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(y, acc, x_scale, w_scale,
                                                                         n, total);
    return cudaGetLastError();
}
