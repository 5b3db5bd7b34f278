/* W8A8 GEMV for decode's few rows under `--quantization fp8`: y[m, n] = x[m, k] . w[n, k]^T
 * with w in e4m3 (a scale per row) and x quantized per token inside the kernel, so that a
 * decode step's projections are one launch each, with no quantize kernel in front.
 *
 * Each CTA first issues its warps' first weight loads (no kernel of the step writes weights),
 * then reads the m bf16 rows of x (a few KB from L2), finds each row's largest magnitude and
 * writes its codes to shared memory: every CTA computes the same codes, those of
 * folio_k_fp8_quantize_rows. One warp per output column: a lane holds FP8_GEMV_UNROLL 16-byte
 * loads of its column's row in flight, widens them and x's codes to f32 and multiplies (each
 * product of two e4m3 values is exact in f32), the warp sums, and the sum is scaled by the
 * row's and the token's scales. */
#include "fp8.cuh"
#include "folio_fp8.h"

/* 16 columns a CTA: each CTA quantizes x before it streams past its first loads, and wider CTAs
 * pay that once for more columns (32 warps lose again to fewer CTAs in flight). */
#define FP8_GEMV_WARPS 16
#define FP8_GEMV_UNROLL 4

template <int M>
__global__ void __launch_bounds__(FP8_GEMV_WARPS * 32)
    fp8_gemv_kernel(folio_bf16_bits *y, const folio_bf16_bits *x, const uint8_t *w,
                    const float *w_scale, int n, int k)
{
    extern __shared__ uint4 xq[]; /* [M][k / 16]: the rows' codes */
    __shared__ float scratch[32], x_scale[M];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, k16 = k / 16;
    const int col = blockIdx.x * FP8_GEMV_WARPS + warp;
    const bool live = col < n;
    const uint4 *wr = (const uint4 *)(w + (int64_t)(live ? col : 0) * k);
    uint4 wv[FP8_GEMV_UNROLL];
#pragma unroll
    for (int u = 0; u < FP8_GEMV_UNROLL; u++) { /* read once: streaming loads */
        const int c = u * 32 + lane;
        wv[u] = live && c < k16 ? __ldcs(wr + c) : make_uint4(0, 0, 0, 0);
    }
    uint8_t *codes = (uint8_t *)xq;
#pragma unroll
    for (int t = 0; t < M; t++) {
        const folio_bf16_bits *xr = x + (int64_t)t * k;
        float amax = 0.0f;
        for (int i = threadIdx.x; i < k; i += blockDim.x)
            amax = fmaxf(amax, fabsf(bf16_to_f32(xr[i])));
        const float s = fp8_scale(block_max(amax, scratch));
        for (int i = threadIdx.x; i < k; i += blockDim.x)
            codes[(int64_t)t * k + i] = fp8_code(bf16_to_f32(xr[i]), s);
        if (threadIdx.x == 0)
            x_scale[t] = s;
    }
    __syncthreads();
    if (!live)
        return;
    float acc[M];
#pragma unroll
    for (int t = 0; t < M; t++)
        acc[t] = 0.0f;
    for (int base = 0;;) {
#pragma unroll
        for (int u = 0; u < FP8_GEMV_UNROLL; u++) {
            const int c = base + u * 32 + lane;
            if (c >= k16)
                break;
            float wf[16];
            fp8_unpack16(wv[u], wf);
#pragma unroll
            for (int t = 0; t < M; t++) {
                float xf[16];
                fp8_unpack16(xq[t * k16 + c], xf);
#pragma unroll
                for (int e = 0; e < 16; e++)
                    acc[t] = fmaf(wf[e], xf[e], acc[t]);
            }
        }
        base += 32 * FP8_GEMV_UNROLL;
        if (base >= k16)
            break;
#pragma unroll
        for (int u = 0; u < FP8_GEMV_UNROLL; u++) {
            const int c = base + u * 32 + lane;
            wv[u] = c < k16 ? __ldcs(wr + c) : make_uint4(0, 0, 0, 0);
        }
    }
    const float ws = w_scale[col];
#pragma unroll
    for (int t = 0; t < M; t++) {
        const float sum = warp_sum(acc[t]);
        if (lane == t)
            y[(int64_t)t * n + col] = f32_to_bf16(sum * ws * x_scale[t]);
    }
}

template <int M>
static cudaError_t launch(folio_bf16_bits *y, const folio_bf16_bits *x, const uint8_t *w,
                          const float *w_scale, int n, int k, cudaStream_t s)
{
    const unsigned grid = (unsigned)((n + FP8_GEMV_WARPS - 1) / FP8_GEMV_WARPS);
    fp8_gemv_kernel<M><<<grid, FP8_GEMV_WARPS * 32, (size_t)M * k, s>>>(y, x, w, w_scale, n, k);
    return cudaGetLastError();
}

template <int M> static cudaError_t allow(int bytes)
{
    return cudaFuncSetAttribute(fp8_gemv_kernel<M>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                bytes);
}

extern "C" cudaError_t folio_k_fp8_gemv_prepare(int k_max, int *max_rows)
{
    int dev = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    /* The static scratch and x_scale of the kernel take a little beside the rows. */
    optin -= 1024;
    int m = 0;
    cudaError_t (*const allows[FOLIO_K_FP8_GEMV_MAX_ROWS])(int) = {
        allow<1>, allow<2>, allow<3>, allow<4>, allow<5>, allow<6>, allow<7>, allow<8>};
    for (; e == cudaSuccess && m < FOLIO_K_FP8_GEMV_MAX_ROWS && (m + 1) * k_max <= optin; m++)
        e = allows[m]((m + 1) * k_max);
    *max_rows = m;
    return e;
}

extern "C" cudaError_t folio_k_fp8_gemv(folio_bf16_bits *y, const folio_bf16_bits *x,
                                        const uint8_t *w, const float *w_scale, int m, int n, int k,
                                        cudaStream_t s)
{
    if (k % 16 != 0)
        return cudaErrorInvalidValue;
    switch (m) {
    case 0:
        return cudaSuccess;
    case 1:
        return launch<1>(y, x, w, w_scale, n, k, s);
    case 2:
        return launch<2>(y, x, w, w_scale, n, k, s);
    case 3:
        return launch<3>(y, x, w, w_scale, n, k, s);
    case 4:
        return launch<4>(y, x, w, w_scale, n, k, s);
    case 5:
        return launch<5>(y, x, w, w_scale, n, k, s);
    case 6:
        return launch<6>(y, x, w, w_scale, n, k, s);
    case 7:
        return launch<7>(y, x, w, w_scale, n, k, s);
    case 8:
        return launch<8>(y, x, w, w_scale, n, k, s);
    default:
        return cudaErrorInvalidValue;
    }
}
