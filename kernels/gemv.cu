/* y[m, n] = x[m, k] . w[n, k]^T for a handful of rows m (decode at small
 * batch), where cuBLAS spends ~5 us per small GEMM whatever it reads
 * (shared/FLOORS.md). One warp per output column n: a lane issues all of its
 * 16-byte weight loads of a stretch of the row before any arithmetic (that is
 * what reached 3.07 TB/s in the FLOORS.md probe), then multiplies them with
 * the m input rows (small; they stay in L1/L2) in f32 and the warp sums.
 *
 * With gate_up_silu, w is the fused [gate; up] weight [2n, k] and the output
 * is SwiGLU's activation, rounded at each step as the unfused path rounds it
 * (bf16 GEMM outputs, then folio_k_silu_mul): one launch and one round trip
 * through memory fewer per layer. */
#include "common.cuh"

#define GEMV_WARPS 8
#define GEMV_UNROLL 8 /* 16-byte weight loads in flight per lane (per weight row) */

__device__ __forceinline__ void unpack8(const uint4 &v, float f[8])
{
    const uint32_t *w = (const uint32_t *)&v;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

/* GLU: the warp reads weight rows col (gate) and n + col (up) and writes
 * bf16(bf16(silu(bf16(gate))) * bf16(up)) for its column. */
template <int M, bool GLU>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv_kernel(void *y, const folio_bf16_bits *x, const folio_bf16_bits *w, int n, int k,
                bool out_f32)
{
    constexpr int R = GLU ? 2 : 1; /* weight rows per warp */
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int col = blockIdx.x * GEMV_WARPS + warp;
    if (col >= n)
        return;
    const uint4 *wr[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        wr[r] = (const uint4 *)(w + (int64_t)(col + r * n) * k);
    const int chunks = k / 8;
    float acc[R][M];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < M; t++)
            acc[r][t] = 0.0f;
    for (int base = 0; base < chunks; base += 32 * GEMV_UNROLL) {
        uint4 wv[R][GEMV_UNROLL];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            int c = base + u * 32 + lane;
#pragma unroll
            for (int r = 0; r < R; r++) /* read once: streaming loads */
                wv[r][u] = c < chunks ? __ldcs(wr[r] + c) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            int c = base + u * 32 + lane;
            if (c >= chunks)
                break;
#pragma unroll
            for (int t = 0; t < M; t++) {
                float xf[8];
                unpack8(__ldg((const uint4 *)(x + (int64_t)t * k) + c), xf);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float wf[8];
                    unpack8(wv[r][u], wf);
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        acc[r][t] = fmaf(wf[e], xf[e], acc[r][t]);
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < M; t++) {
        float v = warp_sum(acc[0][t]);
        if (GLU) {
            float up = round_bf16(warp_sum(acc[R - 1][t]));
            float gate = round_bf16(v);
            float act = round_bf16(gate / (1.0f + expf(-gate)));
            v = act * up;
        }
        if (lane == t) {
            if (out_f32)
                ((float *)y)[(int64_t)t * n + col] = v;
            else
                ((folio_bf16_bits *)y)[(int64_t)t * n + col] = f32_to_bf16(v);
        }
    }
}

template <bool GLU>
static cudaError_t launch_m(void *y, const folio_bf16_bits *x, const folio_bf16_bits *w, int m,
                            int n, int k, bool out_f32, cudaStream_t s)
{
    unsigned blocks = (unsigned)((n + GEMV_WARPS - 1) / GEMV_WARPS);
    switch (m) {
#define CASE(M)                                                                                    \
    case M:                                                                                        \
        gemv_kernel<M, GLU><<<blocks, GEMV_WARPS * 32, 0, s>>>(y, x, w, n, k, out_f32);          \
        break;
        CASE(1)
        CASE(2)
        CASE(3)
        CASE(4)
        CASE(5)
        CASE(6)
        CASE(7)
        CASE(8)
#undef CASE
    default:
        return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

extern "C" cudaError_t folio_k_gemv(void *y, const folio_bf16_bits *x, const folio_bf16_bits *w,
                                    int m, int n, int k, int out_f32, int gate_up_silu, cudaStream_t s)
{
    if (m <= 0)
        return cudaSuccess;
    if (m > FOLIO_K_GEMV_MAX_ROWS || n <= 0 || k <= 0 || k % 8 != 0)
        return cudaErrorInvalidValue;
    return gate_up_silu ? launch_m<true>(y, x, w, m, n, k, out_f32 != 0, s)
                    : launch_m<false>(y, x, w, m, n, k, out_f32 != 0, s);
}
