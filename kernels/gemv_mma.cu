/* y[m, n] = x[m, k] . w[n, k]^T for m <= 8 rows on the tensor cores, with the
 * residual add + RMSNorm of the input and SwiGLU's activation fused in.
 *
 * Why: the CUDA-core GEMV (gemv.cu) does m multiply-adds per weight element
 * and re-reads the m input rows for every output column, so it lost to
 * cuBLASLt from 4 rows up (bench/results/2026-11-29-cuda-attention-gemv.md).
 * Here mma.sync m16n8k16 takes 16 weight rows as its A operand and the (up to
 * 8) input rows as its 8 columns: the arithmetic is free, and a warp reads each
 * input element once for 16 output columns.
 *
 * Layout: a CTA of GM_WARPS warps owns 16 output columns (32 weight rows for
 * SwiGLU: 16 of gate, the same 16 of up); its warps split k into contiguous
 * slices and sum through shared memory in warp order. A lane (g = lane / 4,
 * tq = lane % 4) loads 16 bytes of weight rows g and g + 8 and 16 bytes of
 * input row g at k = 32c + 8tq for each 32-wide chunk c. Any permutation of k
 * applied to both operands leaves the dot products unchanged, so those 8
 * consecutive k serve as the fragment's k {2tq, 2tq+1, 2tq+8, 2tq+9} of two
 * mma k-steps. A lane keeps GM_INFLIGHT chunks of weight loads in flight and
 * refills a slot as soon as it is used.
 *
 * Each output element depends only on its own input row (rows past m are
 * zeros), so a row's result is the same at every m: CUDA-graph buckets and
 * eager steps agree bitwise. */
#include "mma_helpers.cuh"

#define GM_WARPS 8
#define GM_MAX_M 8

__device__ __forceinline__ uint4 zero4()
{
    return make_uint4(0, 0, 0, 0);
}

/* bf16(w * bf16(bf16(r + a) * inv)) for 8 elements, as add_rmsnorm_kernel rounds. */
__device__ __forceinline__ uint4 norm8(uint4 rv, const uint4 *av, uint4 wv, float inv)
{
    folio_bf16_bits *re = (folio_bf16_bits *)&rv;
    if (av) {
        const folio_bf16_bits *ae = (const folio_bf16_bits *)av;
#pragma unroll
        for (int e = 0; e < 8; e++)
            re[e] = f32_to_bf16(bf16_to_f32(re[e]) + bf16_to_f32(ae[e]));
    }
    const folio_bf16_bits *we = (const folio_bf16_bits *)&wv;
    uint4 ov;
    folio_bf16_bits *oe = (folio_bf16_bits *)&ov;
#pragma unroll
    for (int e = 0; e < 8; e++)
        oe[e] = f32_to_bf16(bf16_to_f32(we[e]) * round_bf16(bf16_to_f32(re[e]) * inv));
    return ov;
}

template <bool GLU, bool NORM>
__global__ void __launch_bounds__(GM_WARPS * 32, 2)
    gemv_mma_kernel(void *y, const folio_bf16_bits *x, const folio_bf16_bits *add,
                    const folio_bf16_bits *norm_w, float eps, const int32_t *rows,
                    folio_bf16_bits *res_out, const folio_bf16_bits *w, int m, int n, int k,
                    bool out_f32)
{
    constexpr int R = GLU ? 2 : 1; /* weight matrices (gate, up) */
    constexpr int U = GLU ? 4 : 8; /* chunks of weight loads in flight per lane */
    __shared__ float red[GM_WARPS][R][32][4];
    __shared__ float ss_part[GM_WARPS][GM_MAX_M];
    __shared__ float inv_s[GM_MAX_M];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tq = lane & 3;
    const int col0 = blockIdx.x * 16;
    const int kc = k / 32;
    const int wc = (kc + GM_WARPS - 1) / GM_WARPS;
    const int c_begin = min(warp * wc, kc), c_end = min(c_begin + wc, kc);

    /* This lane's weight rows: g and g + 8 of the CTA's 16 (of gate and up). */
    const uint4 *wrow[R][2];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int f = min(col0 + g + 8 * h, n - 1); /* past n: a valid row, result unused */
            wrow[r][h] = (const uint4 *)(w + ((int64_t)r * n + f) * k) + tq;
        }
    uint4 wv[R][2][U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        int c = c_begin + u;
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                wv[r][h][u] = c < c_end ? __ldcs(wrow[r][h] + 4 * c) : zero4();
    }

    /* Weights do not depend on the kernel before this one; its outputs do. */
    pdl_trigger();
    pdl_wait();

    /* The input row this lane multiplies: row g (zeros past m). */
    const bool xlive = g < m;
    const int xr = xlive ? (NORM && rows ? rows[g] : g) : 0;
    const uint4 *xrow = (const uint4 *)(x + (int64_t)xr * k) + tq;
    const uint4 *arow = NORM && add ? (const uint4 *)(add + (int64_t)xr * k) + tq : NULL;
    const uint4 *nrow = NORM ? (const uint4 *)norm_w + tq : NULL;
    float inv = 0.0f;
    if (NORM) {
        /* Sum of squares of each input row over all of k, in a fixed order (every
         * CTA gets the same bits); CTA 0 writes the residual sum back. */
        const bool write_res = res_out && !rows && blockIdx.x == 0;
        for (int t = 0; t < m; t++) {
            int tr = rows ? rows[t] : t;
            const uint4 *rp = (const uint4 *)(x + (int64_t)tr * k);
            const uint4 *ap = add ? (const uint4 *)(add + (int64_t)tr * k) : NULL;
            float ss = 0.0f;
            for (int v = threadIdx.x; v < k / 8; v += GM_WARPS * 32) {
                uint4 rv = rp[v];
                folio_bf16_bits *re = (folio_bf16_bits *)&rv;
                if (ap) {
                    uint4 av = ap[v];
                    const folio_bf16_bits *ae = (const folio_bf16_bits *)&av;
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        re[e] = f32_to_bf16(bf16_to_f32(re[e]) + bf16_to_f32(ae[e]));
                }
                if (write_res)
                    ((uint4 *)(res_out + (int64_t)tr * k))[v] = rv;
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    float f = bf16_to_f32(re[e]);
                    ss += f * f;
                }
            }
            ss = warp_sum(ss);
            if (lane == 0)
                ss_part[warp][t] = ss;
        }
        __syncthreads();
        if (threadIdx.x < m) {
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < GM_WARPS; i++)
                s += ss_part[i][threadIdx.x];
            inv_s[threadIdx.x] = rsqrtf(s / (float)k + eps);
        }
        __syncthreads();
        inv = xlive ? inv_s[g] : 0.0f;
    }

    float acc[R][4];
#pragma unroll
    for (int r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = 0.0f;
    for (int cb = c_begin; cb < c_end; cb += U) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = cb + u;
            if (c < c_end) {
                uint4 xv = zero4();
                if (xlive) {
                    if (NORM) {
                        uint4 av;
                        if (arow)
                            av = __ldg(arow + 4 * c);
                        xv =
                            norm8(__ldg(xrow + 4 * c), arow ? &av : NULL, __ldg(nrow + 4 * c), inv);
                    } else {
                        xv = __ldg(xrow + 4 * c);
                    }
                }
#pragma unroll
                for (int r = 0; r < R; r++) {
                    uint32_t a0[4] = {wv[r][0][u].x, wv[r][1][u].x, wv[r][0][u].y, wv[r][1][u].y};
                    uint32_t a1[4] = {wv[r][0][u].z, wv[r][1][u].z, wv[r][0][u].w, wv[r][1][u].w};
                    mma_16816(acc[r], a0, xv.x, xv.y);
                    mma_16816(acc[r], a1, xv.z, xv.w);
                }
            }
            int cn = c + U; /* refill this slot */
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    if (cn < c_end)
                        wv[r][h][u] = __ldcs(wrow[r][h] + 4 * cn);
        }
    }

#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            red[warp][r][lane][e] = acc[r][e];
    __syncthreads();
    if (warp != 0)
        return;
    float sum[R][4];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < GM_WARPS; i++)
                s += red[i][r][lane][e];
            sum[r][e] = s;
        }
        /* C fragment: e = 0, 1: column g, rows (tokens) 2tq, 2tq + 1; e = 2, 3: column g + 8. */
#pragma unroll
    for (int e = 0; e < 4; e++) {
        int tok = 2 * tq + (e & 1), col = col0 + g + 8 * (e >> 1);
        if (tok >= m || col >= n)
            continue;
        float v = sum[0][e];
        if (GLU) {
            float gate = round_bf16(v), up = round_bf16(sum[R - 1][e]);
            float act = round_bf16(gate / (1.0f + expf(-gate)));
            v = act * up;
        }
        if (out_f32)
            ((float *)y)[(int64_t)tok * n + col] = v;
        else
            ((folio_bf16_bits *)y)[(int64_t)tok * n + col] = f32_to_bf16(v);
    }
}

template <bool GLU>
static cudaError_t launch_glu(void *y, const folio_bf16_bits *x, const folio_bf16_bits *add,
                              const folio_bf16_bits *norm_w, float eps, const int32_t *rows,
                              folio_bf16_bits *res_out, const folio_bf16_bits *w, int m, int n,
                              int k, bool out_f32, bool pdl, cudaStream_t s)
{
    dim3 grid((unsigned)((n + 15) / 16)), block(GM_WARPS * 32);
    const int32_t *no_rows = NULL;
    folio_bf16_bits *no_res = NULL;
    const folio_bf16_bits *none = NULL;
    if (norm_w)
        return launch_pdl(gemv_mma_kernel<GLU, true>, grid, block, 0, s, pdl, y, x, add, norm_w,
                          eps, rows, res_out, w, m, n, k, out_f32);
    return launch_pdl(gemv_mma_kernel<GLU, false>, grid, block, 0, s, pdl, y, x, none, none, eps,
                      no_rows, no_res, w, m, n, k, out_f32);
}

extern "C" cudaError_t folio_k_gemv_mma(void *y, const folio_bf16_bits *x,
                                        const folio_bf16_bits *add, const folio_bf16_bits *norm_w,
                                        float eps, const int32_t *rows, folio_bf16_bits *res_out,
                                        const folio_bf16_bits *w, int m, int n, int k, int out_f32,
                                        int gate_up_silu, int pdl, cudaStream_t s)
{
    if (m <= 0)
        return cudaSuccess;
    if (m > GM_MAX_M || n <= 0 || k <= 0 || k % 32 != 0 || (res_out && res_out == x))
        return cudaErrorInvalidValue;
    cudaError_t e = gate_up_silu ? launch_glu<true>(y, x, add, norm_w, eps, rows, res_out, w, m, n,
                                                    k, out_f32 != 0, pdl != 0, s)
                                 : launch_glu<false>(y, x, add, norm_w, eps, rows, res_out, w, m, n,
                                                     k, out_f32 != 0, pdl != 0, s);
    return e != cudaSuccess ? e : cudaGetLastError();
}
