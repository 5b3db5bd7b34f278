/* The GEMV of decode's few rows on GGUF weights kept packed: y[m, n] = x[m, k] . w[n, k]^T,
 * each weight read once from its block and decoded in registers (gguf_blocks.h), so that a
 * decode step reads the file's 4.5 to 8.5 bits a weight instead of a bf16 copy's 16.
 *
 * One warp an output column; a lane takes the row's 32-weight chunks lane, lane + 32, ...,
 * gathering GEMV_UNROLL of them before decoding any (their loads in flight together). For each
 * of the m rows the chunk meets x's 32 values (4 16-byte loads, L1/L2 resident: every warp reads
 * them) as two sums of 16 products, scaled once by the chunk's scales, plus the sum of x times
 * the chunk's offset for the types with a min; the warp sums its lanes. */
#include "common.cuh"
#include "folio_gguf.h"
#include "gguf_load.cuh"

#define GEMV_WARPS 4
#define GEMV_UNROLL 2

template <int T, int M>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    gguf_gemv_kernel(folio_bf16_bits *y, int ldy, const folio_bf16_bits *x, const uint8_t *w,
                     int64_t stride, int m, int n, int k)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int col = blockIdx.x * GEMV_WARPS + warp;
    if (col >= n)
        return;
    const uint8_t *wr = w + (int64_t)col * stride;
    const int chunks = k >> 5;
    constexpr bool has_min = T == FOLIO_GGML_Q4_1 || T == FOLIO_GGML_Q4_K;
    float acc[M];
#pragma unroll
    for (int t = 0; t < M; t++)
        acc[t] = 0.0f;
    for (int c0 = lane; c0 < chunks; c0 += 32 * GEMV_UNROLL) {
        uint32_t r[GEMV_UNROLL][GGUF_CHUNK_WORDS];
        int sub[GEMV_UNROLL];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++)
            if (c0 + 32 * u < chunks)
                sub[u] = gguf_gather<T>(wr, c0 + 32 * u, r[u]);
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            const int c = c0 + 32 * u;
            if (c >= chunks)
                break;
            float q[32], a[2], b;
            gguf_decode_chunk(T, r[u], sub[u], q, a, &b);
#pragma unroll
            for (int t = 0; t < M; t++) {
                if (t >= m)
                    break;
                const uint4 *xv = (const uint4 *)(x + (int64_t)t * k + 32 * (int64_t)c);
                float s[2] = {0.0f, 0.0f}, sx = 0.0f;
#pragma unroll
                for (int v = 0; v < 4; v++) {
                    const uint4 xx = __ldg(xv + v);
                    const uint32_t xw[4] = {xx.x, xx.y, xx.z, xx.w};
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const float lo = __uint_as_float(xw[e] << 16);
                        const float hi = __uint_as_float(xw[e] & 0xffff0000u);
                        const int j = 8 * v + 2 * e;
                        s[v >> 1] = fmaf(q[j], lo, s[v >> 1]);
                        s[v >> 1] = fmaf(q[j + 1], hi, s[v >> 1]);
                        if (has_min)
                            sx += lo + hi;
                    }
                }
                const float base = has_min ? fmaf(b, sx, acc[t]) : acc[t];
                acc[t] = fmaf(a[0], s[0], fmaf(a[1], s[1], base));
            }
        }
    }
#pragma unroll
    for (int t = 0; t < M; t++) {
        if (t >= m)
            break;
        const float sum = warp_sum(acc[t]);
        if (lane == 0)
            y[(int64_t)t * ldy + col] = f32_to_bf16(sum);
    }
}

template <int T, int M>
static cudaError_t launch(folio_bf16_bits *y, int ldy, const folio_bf16_bits *x, const void *w,
                          int64_t stride, int m, int n, int k, cudaStream_t s)
{
    const unsigned grid = (unsigned)((n + GEMV_WARPS - 1) / GEMV_WARPS);
    gguf_gemv_kernel<T, M>
        <<<grid, GEMV_WARPS * 32, 0, s>>>(y, ldy, x, (const uint8_t *)w, stride, m, n, k);
    return cudaGetLastError();
}

template <int T>
static cudaError_t launch_rows(folio_bf16_bits *y, int ldy, const folio_bf16_bits *x, const void *w,
                               int64_t stride, int m, int n, int k, cudaStream_t s)
{
    if (m <= 1)
        return launch<T, 1>(y, ldy, x, w, stride, m, n, k, s);
    if (m <= 2)
        return launch<T, 2>(y, ldy, x, w, stride, m, n, k, s);
    if (m <= 4)
        return launch<T, 4>(y, ldy, x, w, stride, m, n, k, s);
    return launch<T, 8>(y, ldy, x, w, stride, m, n, k, s);
}

extern "C" cudaError_t folio_k_gguf_gemv(folio_bf16_bits *y, int ldy, const folio_bf16_bits *x,
                                         const void *w, int type, int64_t stride, int m, int n,
                                         int k, cudaStream_t s)
{
    if (m <= 0 || n <= 0)
        return cudaSuccess;
    if (m > FOLIO_K_GGUF_GEMV_MAX_ROWS || k % gguf_block_elems((uint32_t)type) || k % 32 ||
        stride % 16)
        return cudaErrorInvalidValue;
    switch (type) {
    case FOLIO_GGML_Q4_0:
        return launch_rows<FOLIO_GGML_Q4_0>(y, ldy, x, w, stride, m, n, k, s);
    case FOLIO_GGML_Q4_0X8:
        return launch_rows<FOLIO_GGML_Q4_0X8>(y, ldy, x, w, stride, m, n, k, s);
    case FOLIO_GGML_Q4_1:
        return launch_rows<FOLIO_GGML_Q4_1>(y, ldy, x, w, stride, m, n, k, s);
    case FOLIO_GGML_Q8_0:
        return launch_rows<FOLIO_GGML_Q8_0>(y, ldy, x, w, stride, m, n, k, s);
    case FOLIO_GGML_Q4_K:
        return launch_rows<FOLIO_GGML_Q4_K>(y, ldy, x, w, stride, m, n, k, s);
    case FOLIO_GGML_Q6_K:
        return launch_rows<FOLIO_GGML_Q6_K>(y, ldy, x, w, stride, m, n, k, s);
    case FOLIO_GGML_BF16:
        return launch_rows<FOLIO_GGML_BF16>(y, ldy, x, w, stride, m, n, k, s);
    }
    return cudaErrorInvalidValue;
}
