/* y[m, n] = x[m, k] . w[n, k]^T for a handful of rows m (decode at small
 * batch), where cuBLAS pays a fixed cost per small GEMM whatever it reads
 * (shared/FLOORS.md). One warp per output column n: a lane issues all of its
 * 16-byte weight loads of a stretch of the row before any arithmetic (what
 * streams weights nearest the copy bandwidth), then multiplies them with the m
 * input rows in f32 and the warp sums. (Loading the next stretch before
 * multiplying the current one would cost registers, so fewer warps fit.)
 *
 * Each launch costs a ramp of a few microseconds that the small projections
 * (QKV, O: 8-10 MB) cannot amortise, so the kernel removes launches instead:
 * - norm: the residual add + RMSNorm in front of QKV, gate/up and the LM head
 *   is computed once by every CTA into shared memory (k = hidden: a few KB
 *   from L2), rounded exactly as folio_k_add_rmsnorm rounds it; CTA 0 writes
 *   the residual sum to res_out (another buffer: the other CTAs still read x).
 * - gate_up_silu: w is the fused [gate; up] weight [2n, k], and the output is
 *   SwiGLU's activation rounded as GEMM + folio_k_silu_mul rounds it.
 * - pdl: the weight loads, which no kernel of the step writes, are issued
 *   before griddepcontrol.wait, so they overlap the previous kernel's tail.
 * - persistent: no more CTAs than fit at once, each looping over column
 *   groups (see gemv_kernel), so that the norm prologue, the launch and the
 *   first load latency are paid once per CTA and not once per wave.
 * - WF, the weights' format (struct folio_k_weight), so that quantized
 *   weights keep these fusions:
 *   E4M3 (--quantization fp8): e4m3 codes with a scale a row, 16 to a load,
 *   half the bytes; the input rows, once in shared memory, are quantized there
 *   per token (W8A8, common/fp8.h's rule: the codes of
 *   folio_k_fp8_quantize_rows) and kept as the codes' values in bf16 (every
 *   e4m3 value is one), and each sum is scaled by its row's and its token's
 *   scale before the epilogue. Each CTA quantizes the few KB itself rather
 *   than a kernel in front doing it once: a launch costs more.
 *   Q4_0X8 (a GGUF's Q4_0): a load is one block's 32 nibbles, with its f16
 *   scale beside; the input rows are permuted in shared memory, block by
 *   block, into the order the nibbles come out of a word two at a time
 *   (bf16 pairs by a mask and an or, exact), so no element is moved per
 *   product. */
#include <atomic>

#include "common.cuh"
#include "fp8.cuh"
#include "gguf_blocks.h"
#include "mma_helpers.cuh"

#define GEMV_WARPS 8
#define GEMV_UNROLL 8 /* 16-byte weight loads in flight per lane (per weight row) */

/* The loads a stretch for a format: a Q4_0X8 load and its scale hold 32
 * weights, and eight with their decode would not fit the registers. */
__host__ __device__ constexpr int gemv_unroll(int format)
{
    return format == FOLIO_K_W_Q4_0X8 ? 4 : GEMV_UNROLL;
}

__device__ __forceinline__ void unpack8(const uint4 &v, float f[8])
{
    const uint32_t *w = (const uint32_t *)&v;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

struct gemv_args {
    void *y;
    const folio_bf16_bits *x, *add, *norm_w;
    float eps;
    const int32_t *rows;
    folio_bf16_bits *res_out;
    const void *w;
    const float *w_scale; /* E4M3: each weight row's scale */
    int row_vecs;         /* 16-byte vectors a weight row */
    int n, k;
    int groups; /* column groups: GEMV_WARPS / ks columns each (ROPE: 4 pairs) */
    int ks;     /* warps per output column, each over its own 1/ks of k (1, 2, 4 or 8) */
    int kc;     /* 16-byte weight loads a row: k / 8 (BF16), k / 16 (E4M3), k / 32 (Q4_0X8) */
    bool out_f32;
    /* ROPE (the QKV projection): RoPE of q and k and the K/V cache write of
     * rope_kv.cu in the epilogue, for the tokens of b. */
    struct folio_k_batch b;
    folio_bf16_bits *k_cache, *v_cache;
    const float *inv_freq;
    int num_heads, num_kv_heads, head_dim;
};

/* Residual add + RMSNorm of the M input rows into xs [M][k/8] (shared). */
template <int M> __device__ __forceinline__ void norm_rows(const gemv_args &a, uint4 *xs)
{
    __shared__ float ss_part[GEMV_WARPS][M];
    __shared__ float inv_s[M];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, k8 = a.k / 8;
    const bool write_res = a.res_out && !a.rows && blockIdx.x == 0;
#pragma unroll
    for (int t = 0; t < M; t++) {
        const int src = a.rows ? a.rows[t] : t;
        const uint4 *rp = (const uint4 *)(a.x + (int64_t)src * a.k);
        const uint4 *ap = a.add ? (const uint4 *)(a.add + (int64_t)src * a.k) : NULL;
        float ss = 0.0f;
        for (int v = threadIdx.x; v < k8; v += GEMV_WARPS * 32) {
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
                ((uint4 *)(a.res_out + (int64_t)src * a.k))[v] = rv;
            xs[t * k8 + v] = rv;
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
    cp_async_wait<0>(); /* this thread's copies of the norm weight */
    __syncthreads();
    if (threadIdx.x < M) { /* a fixed order: every CTA gets the same bits */
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < GEMV_WARPS; i++)
            s += ss_part[i][threadIdx.x];
        inv_s[threadIdx.x] = rsqrtf(s / (float)a.k + a.eps);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < M * k8; i += GEMV_WARPS * 32) {
        const int t = i / k8, v = i - t * k8;
        const float inv = inv_s[t];
        uint4 rv = xs[i], wv = xs[M * k8 + v], ov; /* the norm weight, copied before the wait */
        const folio_bf16_bits *re = (const folio_bf16_bits *)&rv,
                              *we = (const folio_bf16_bits *)&wv;
        folio_bf16_bits *oe = (folio_bf16_bits *)&ov;
#pragma unroll
        for (int e = 0; e < 8; e++)
            oe[e] = f32_to_bf16(bf16_to_f32(we[e]) * round_bf16(bf16_to_f32(re[e]) * inv));
        xs[i] = ov;
    }
    __syncthreads();
}

/* Q4_0X8: each 32-value block of the M input rows in xs [M][k/8] permuted so
 * that its word 4j + p holds the two values that pair p of the block's weight
 * word j multiplies (gguf_q4_pair). A block is one thread's: it reads and
 * writes only its own 64 bytes. */
template <int M> __device__ __forceinline__ void permute_blocks(const gemv_args &a, uint4 *xs)
{
    for (int i = threadIdx.x; i < M * (a.k / 32); i += GEMV_WARPS * 32) {
        uint32_t w[16], o[16];
#pragma unroll
        for (int v = 0; v < 4; v++) {
            const uint4 x = xs[4 * i + v];
            w[4 * v] = x.x, w[4 * v + 1] = x.y, w[4 * v + 2] = x.z, w[4 * v + 3] = x.w;
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int p = 0; p < 4; p++) {
                const int e = gguf_q4_pair_elem(j, p); /* value e: half e & 1 of word e / 2 */
                o[4 * j + p] = (w[e >> 1] >> (16 * (e & 1)) & 0xffffu) |
                               (w[(e + 2) >> 1] >> (16 * (e & 1)) & 0xffffu) << 16;
            }
#pragma unroll
        for (int v = 0; v < 4; v++)
            xs[4 * i + v] = make_uint4(o[4 * v], o[4 * v + 1], o[4 * v + 2], o[4 * v + 3]);
    }
    __syncthreads();
}

/* A Q4_0X8 block's 32 nibbles q (a 16-byte load) as the weights (q - 8) in
 * the permuted order of permute_blocks: each pair gguf_q4_pair's bf16 128 + q
 * less 136, exact, then widened. */
__device__ __forceinline__ void q4_decode(const uint4 &q, float f[32])
{
    const uint32_t qw[4] = {q.x, q.y, q.z, q.w};
    const __nv_bfloat162 bias =
        __halves2bfloat162(__ushort_as_bfloat16(0x4308), __ushort_as_bfloat16(0x4308)); /* 136 */
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int p = 0; p < 4; p++) {
            uint32_t h = gguf_q4_pair(qw[j], p);
            const __nv_bfloat162 d = __hsub2(*(const __nv_bfloat162 *)&h, bias);
            h = *(const uint32_t *)&d;
            f[8 * j + 2 * p] = __uint_as_float(h << 16);
            f[8 * j + 2 * p + 1] = __uint_as_float(h & 0xffff0000u);
        }
}

/* E4M3: the M input rows in xs [M][k/8] replaced by the values of their e4m3
 * codes (each row's scale by common/fp8.h's rule into x_scale), exact in bf16.
 * The largest magnitudes are combined in a fixed order, though max is exact
 * in any order: every CTA gets the same codes. */
template <int M>
__device__ __forceinline__ void quantize_rows(const gemv_args &a, uint4 *xs, float *x_scale)
{
    __shared__ float amax_part[GEMV_WARPS][M];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, k8 = a.k / 8;
#pragma unroll
    for (int t = 0; t < M; t++) {
        float amax = 0.0f;
        for (int v = threadIdx.x; v < k8; v += GEMV_WARPS * 32) {
            float f[8];
            unpack8(xs[t * k8 + v], f);
#pragma unroll
            for (int e = 0; e < 8; e++)
                amax = fmaxf(amax, fabsf(f[e]));
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        if (lane == 0)
            amax_part[warp][t] = amax;
    }
    __syncthreads();
    if (threadIdx.x < M) {
        float amax = 0.0f;
#pragma unroll
        for (int i = 0; i < GEMV_WARPS; i++)
            amax = fmaxf(amax, amax_part[i][threadIdx.x]);
        x_scale[threadIdx.x] = fp8_scale(amax);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < M * k8; i += GEMV_WARPS * 32) {
        const float s = x_scale[i / k8];
        uint4 v = xs[i];
        folio_bf16_bits *e = (folio_bf16_bits *)&v;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const __half h =
                __half(__nv_cvt_fp8_to_halfraw(fp8_code(bf16_to_f32(e[j]), s), __NV_E4M3));
            e[j] = f32_to_bf16(__half2float(h));
        }
        xs[i] = v;
    }
    __syncthreads();
}

/* Token t's position and the offset of its row in KV head 0 of its cache
 * block, read before the PDL wait (the step's metadata: no kernel writes it),
 * so that the epilogue's stores wait on no load. */
struct rope_slot {
    int pos;
    int64_t cache_off;
};

__device__ __forceinline__ rope_slot rope_slot_of(const gemv_args &a, int t)
{
    rope_slot r = {a.b.token_pos[t], 0};
    if (r.pos >= 0) {
        const int block = a.b.block_tables[(int64_t)a.b.token_seq[t] * a.b.block_stride +
                                           r.pos / FOLIO_KV_BLOCK_SIZE];
        r.cache_off = (int64_t)block * a.num_kv_heads * FOLIO_KV_BLOCK_SIZE * a.head_dim +
                      (int64_t)(r.pos % FOLIO_KV_BLOCK_SIZE) * a.head_dim;
    }
    return r;
}

/* The ROPE epilogue for the pair of q/k/v columns (c1, c1 + D/2) of head h at
 * dim i, token t: rounded and rotated as rope_kv_write_kernel does it, then
 * written to y (qkv) and, for k and v heads, to the paged caches. */
__device__ __forceinline__ void rope_pair_out(const gemv_args &a, int t, int h, int i, float s1,
                                              float s2, rope_slot slot, float freq)
{
    const int D = a.head_dim, half = D / 2;
    folio_bf16_bits *row = (folio_bf16_bits *)a.y + (int64_t)t * a.n + (int64_t)h * D;
    folio_bf16_bits x1 = f32_to_bf16(s1), x2 = f32_to_bf16(s2);
    if (slot.pos >= 0 && h < a.num_heads + a.num_kv_heads)
        rope_rotate(x1, x2, slot.pos, freq);
    row[i] = x1;
    row[i + half] = x2;
    if (slot.pos < 0 || h < a.num_heads) /* padding row, or a q head */
        return;
    const bool is_k = h < a.num_heads + a.num_kv_heads;
    const int kh = h - a.num_heads - (is_k ? 0 : a.num_kv_heads);
    folio_bf16_bits *dst =
        (is_k ? a.k_cache : a.v_cache) + slot.cache_off + (int64_t)kh * FOLIO_KV_BLOCK_SIZE * D;
    dst[i] = x1;
    dst[i + half] = x2;
}

/* The output column of warp `warp` in column group g (GEMV_WARPS / ks columns,
 * ROPE: 4 rotation pairs); n for a warp past the end (a dead warp). ROPE also
 * gives the pair's head h and dim i. Columns grow with g, so a warp dead in
 * one group is dead in every later one. */
template <bool ROPE>
__device__ __forceinline__ int group_col(const gemv_args &a, int g, int warp, int &h, int &i)
{
    if (ROPE) { /* ks == 1 */
        const int half = a.head_dim / 2, pair = g * (GEMV_WARPS / 2) + (warp & 3);
        h = pair / half;
        i = pair - h * half;
        return pair < a.n / 2 ? h * a.head_dim + i + (warp >= 4 ? half : 0) : a.n;
    }
    h = i = 0;
    return g * (GEMV_WARPS / a.ks) + warp / a.ks;
}

/* The lane's 16-byte loads of one stretch (from chunk base) of the R weight
 * rows of column col (none for a dead warp), zeros past the warp's share;
 * Q4_0X8: each chunk's f16 scale into ds. */
template <int R, int WF>
__device__ __forceinline__ void load_stretch(const gemv_args &a, uint4 wv[R][GEMV_UNROLL],
                                             uint32_t ds[R][GEMV_UNROLL], int col, int base,
                                             int chunks, int lane)
{
    const bool live = col < a.n;
    const uint4 *wr[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        wr[r] = (const uint4 *)a.w + (int64_t)((live ? col : 0) + r * a.n) * a.row_vecs;
#pragma unroll
    for (int u = 0; u < gemv_unroll(WF); u++) {
        const int c = base + u * 32 + lane;
        const bool in = live && c < chunks;
#pragma unroll
        for (int r = 0; r < R; r++) {     /* read once: streaming loads */
            if (WF == FOLIO_K_W_Q4_0X8) { /* groups of 9 vectors: scales, 8 blocks */
                const uint4 *g = wr[r] + 9 * (c >> 3);
                wv[r][u] = in ? __ldcs(g + 1 + (c & 7)) : make_uint4(0, 0, 0, 0);
                ds[r][u] = in ? __ldcs((const unsigned short *)g + (c & 7)) : 0u;
            } else {
                wv[r][u] = in ? __ldcs(wr[r] + c) : make_uint4(0, 0, 0, 0);
            }
        }
    }
}

/* E4M3: the scales of the R weight rows of column col (none for a dead warp). */
template <int R, int WF>
__device__ __forceinline__ void load_w_scales(const gemv_args &a, int col, float ws[R])
{
#pragma unroll
    for (int r = 0; r < R; r++)
        ws[r] = WF == FOLIO_K_W_E4M3 && col < a.n ? __ldg(a.w_scale + col + r * a.n) : 1.0f;
}

/* CTAs per SM that the registers must allow: about what the one-group-per-CTA
 * kernel had (batch 1 and 2: 64 registers a thread, 128 for GLU's two rows).
 * The loop and the early loads of the next group would otherwise take a few
 * more registers and lose a CTA per SM. The quantized formats' widening and
 * scales need more than 64 (spills otherwise; Q4_0X8's gate/up more than 128
 * from 3 rows); their 16-byte loads hold more weights, so fewer warps keep as
 * many in flight. */
template <int M, bool GLU, int WF> constexpr int gemv_min_ctas()
{
    return GLU                    ? (M <= (WF == FOLIO_K_W_Q4_0X8 ? 2 : 6) ? 2 : 1)
           : WF != FOLIO_K_W_BF16 ? (M <= 2 ? 3 : 2)
           : M <= 2               ? 4
           : M <= 4               ? 3
                                  : 2;
}

/* Persistent: the grid is at most as many CTAs as fit resident at once, and
 * CTA b computes the column groups b, b + gridDim.x, ... With one CTA per group
 * the large projections run several waves, each later one paying its launch,
 * the norm prologue and its first load latency without overlap. Here the norm runs once per
 * CTA, and a warp issues its next group's first stretch before this group's
 * reduction and epilogue. Each output value is computed by the same float
 * operations in the same order whichever CTA computes it.
 * GLU: the warp reads weight rows col (gate) and n + col (up) and writes
 * bf16(bf16(silu(bf16(gate))) * bf16(up)) for its column.
 * ROPE: the CTA's warps w and w + 4 compute the columns c1 and c1 + D/2 of
 * one rotation pair, meet in shared memory, and warp w writes the pair. */
template <int M, bool GLU, bool NORM, bool ROPE, int WF>
__global__ void __launch_bounds__(GEMV_WARPS * 32, (gemv_min_ctas<M, GLU, WF>()))
    gemv_kernel(gemv_args a)
{
    constexpr int R = GLU ? 2 : 1; /* weight rows per warp */
    constexpr bool W8 = WF == FOLIO_K_W_E4M3, Q4 = WF == FOLIO_K_W_Q4_0X8;
    /* The input rows [M][k/8] (NORM: normalized), then (NORM) the norm weight [k/8]. */
    extern __shared__ uint4 xs[];
    /* ks > 1: each warp's share; ROPE: the pair's second column. Two buffers,
     * by group parity: a warp may write the next group's values while others
     * still read this group's (the next group's barrier separates the reuse). */
    __shared__ float part_sum[2][GEMV_WARPS][R][M];
    __shared__ float pair_hi[2][GEMV_WARPS / 2][M];
    __shared__ rope_slot slots[ROPE ? M : 1]; /* ROPE: each token's, from before the wait */
    __shared__ float x_scale[W8 ? M : 1];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int ks = ROPE ? 1 : a.ks, part = warp & (ks - 1);
    const int k8 = a.k / 8, per = (a.kc + ks - 1) / ks;
    const int c_begin = min(part * per, a.kc), chunks = min(c_begin + per, a.kc);
    int g = blockIdx.x, rope_h, rope_i;
    int col = group_col<ROPE>(a, g, warp, rope_h, rope_i);
    uint4 wv[R][GEMV_UNROLL];
    uint32_t ds[R][GEMV_UNROLL]; /* Q4: the chunks' scales */
    load_stretch<R, WF>(a, wv, ds, col, c_begin, chunks, lane);
    float w_scale[R]; /* E4M3: the column's rows' scales, weights too: before the wait */
    load_w_scales<R, WF>(a, col, w_scale);
    pdl_trigger();
    /* ROPE: the tokens' positions and cache rows, and the pair's frequency
     * (this group's), before the wait (rope_slot). */
    float freq = 0.0f;
    if (ROPE) {
        if (threadIdx.x < M)
            slots[threadIdx.x] = rope_slot_of(a, threadIdx.x);
        if (col < a.n)
            freq = a.inv_freq[rope_i];
    }
    /* The norm weight, which no kernel of the step writes, is read before the
     * wait: after it, the norm's chain of loads is one round trip shorter. */
    if (NORM) { /* cp.async: no register waits on it */
        for (int v = threadIdx.x; v < k8; v += GEMV_WARPS * 32)
            cp_async_16((folio_bf16_bits *)(xs + M * k8 + v), a.norm_w + 8 * v, 16);
        cp_async_commit();
    }
    pdl_wait();
    if (NORM) {
        norm_rows<M>(a, xs);
    } else {
        /* The input rows (written by the kernel before) into shared memory,
         * all at once: read in the loop below, each stretch's loads waited
         * one after the other behind its branch (up to 8 round trips a
         * stretch for the O and down projections). */
        for (int i = threadIdx.x; i < M * k8; i += GEMV_WARPS * 32) {
            const int t = i / k8, v = i - t * k8;
            cp_async_16((folio_bf16_bits *)(xs + i), a.x + (int64_t)t * a.k + 8 * v, 16);
        }
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
    }
    if (W8)
        quantize_rows<M>(a, xs, x_scale);
    if (Q4)
        permute_blocks<M>(a, xs);
    /* Every warp runs the same groups: the barriers below are reached by all,
     * dead warps (past n, only in the last group) included. */
    for (int buf = 0;; buf ^= 1) {
        const bool live = col < a.n;
        if (!live && ks == 1 && !ROPE)
            return; /* no barrier ahead, and no later group of this CTA is live */
        float acc[R][M];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int t = 0; t < M; t++)
                acc[r][t] = 0.0f;
        for (int base = c_begin; live;) {
#pragma unroll
            for (int u = 0; u < gemv_unroll(WF); u++) {
                int c = base + u * 32 + lane;
                if (c >= chunks)
                    break;
                if (Q4) { /* a block a load: 32 weights, four of x's vectors */
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        float wf[32];
                        q4_decode(wv[r][u], wf);
                        const float d = __half2float(__ushort_as_half((unsigned short)ds[r][u]));
#pragma unroll
                        for (int t = 0; t < M; t++) {
                            float s = 0.0f;
#pragma unroll
                            for (int j = 0; j < 4; j++) {
                                float xf[8];
                                unpack8(xs[t * k8 + 4 * c + j], xf);
#pragma unroll
                                for (int e = 0; e < 8; e++)
                                    s = fmaf(wf[8 * j + e], xf[e], s);
                            }
                            acc[r][t] = fmaf(d, s, acc[r][t]);
                        }
                    }
                } else if (W8) { /* 16 weights a load: each half meets one of x's vectors */
#pragma unroll
                    for (int h = 0; h < 2; h++)
#pragma unroll
                        for (int r = 0; r < R; r++) {
                            float wf[8];
                            fp8_unpack8(wv[r][u], h, wf);
#pragma unroll
                            for (int t = 0; t < M; t++) {
                                float xf[8];
                                unpack8(xs[t * k8 + 2 * c + h], xf);
#pragma unroll
                                for (int e = 0; e < 8; e++)
                                    acc[r][t] = fmaf(wf[e], xf[e], acc[r][t]);
                            }
                        }
                } else {
#pragma unroll
                    for (int t = 0; t < M; t++) {
                        float xf[8];
                        unpack8(xs[t * k8 + c], xf);
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
            base += 32 * gemv_unroll(WF);
            if (base >= chunks)
                break;
            load_stretch<R, WF>(a, wv, ds, col, base, chunks, lane);
        }
        /* The next group's first stretch, in flight during this group's
         * reduction and epilogue (wv is free again). ROPE loads it after the
         * epilogue: wv live across the rotation would need more than 64
         * registers. */
        const int g_next = g + gridDim.x;
        int next_h = 0, next_i = 0;
        const int next_col =
            g_next < a.groups ? group_col<ROPE>(a, g_next, warp, next_h, next_i) : a.n;
        if (!ROPE)
            load_stretch<R, WF>(a, wv, ds, next_col, c_begin, chunks, lane);
        float next_scale[R];
        load_w_scales<R, WF>(a, next_col, next_scale);
        float sum[R][M];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int t = 0; t < M; t++)
                sum[r][t] = warp_sum(acc[r][t]);
        bool writes = live;
        if (ks > 1) { /* the column's first warp adds the parts in order */
            if (lane == 0)
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int t = 0; t < M; t++)
                        part_sum[buf][warp][r][t] = sum[r][t];
            __syncthreads();
            writes = live && part == 0;
            if (writes)
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int t = 0; t < M; t++)
                        for (int p = 1; p < ks; p++)
                            sum[r][t] += part_sum[buf][warp + p][r][t];
        }
        if (W8) /* as the FP8 GEMM's epilogue: the whole sum times its two scales */
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int t = 0; t < M; t++)
                    sum[r][t] = sum[r][t] * w_scale[r] * x_scale[t];
        if (ROPE) {
            if (warp >= GEMV_WARPS / 2 && lane == 0)
#pragma unroll
                for (int t = 0; t < M; t++)
                    pair_hi[buf][warp - GEMV_WARPS / 2][t] = sum[0][t];
            __syncthreads();
            if (warp < GEMV_WARPS / 2 && live)
#pragma unroll
                for (int t = 0; t < M; t++)
                    if (lane == t)
                        rope_pair_out(a, t, rope_h, rope_i, sum[0][t], pair_hi[buf][warp][t],
                                      slots[t], freq);
        } else if (writes) {
#pragma unroll
            for (int t = 0; t < M; t++) {
                float v = sum[0][t];
                if (GLU) {
                    v = silu_bf16(round_bf16(v)) * round_bf16(sum[R - 1][t]);
                }
                if (lane == t) {
                    if (a.out_f32)
                        ((float *)a.y)[(int64_t)t * a.n + col] = v;
                    else
                        ((folio_bf16_bits *)a.y)[(int64_t)t * a.n + col] = f32_to_bf16(v);
                }
            }
        }
        if (g_next >= a.groups)
            return;
        if (ROPE) {
            load_stretch<R, WF>(a, wv, ds, next_col, c_begin, chunks, lane);
            freq = next_col < a.n ? a.inv_freq[next_i] : 0.0f;
        }
        g = g_next;
        col = next_col;
#pragma unroll
        for (int r = 0; r < R; r++)
            w_scale[r] = next_scale[r];
        rope_h = next_h;
        rope_i = next_i;
    }
}

/* *ctas: the CTAs of this instantiation that fit on the device at once with
 * smem bytes of dynamic shared memory (registers decide for gate/up: 2 per
 * SM). Asked once per instantiation and shared-memory size, then cached. */
template <int M, bool GLU, bool NORM, bool ROPE, int WF>
static cudaError_t resident_ctas(size_t smem, unsigned *ctas)
{
    /* (smem + 1) << 32 | CTAs; 0: not asked yet. A few entries: the projections
     * that share an instantiation differ in k, so in smem (O and down). */
    static std::atomic<uint64_t> cache[4];
    for (auto &slot : cache) {
        const uint64_t c = slot.load(std::memory_order_relaxed);
        if (c >> 32 == smem + 1) {
            *ctas = (unsigned)c;
            return cudaSuccess;
        }
    }
    int dev = 0, sms = 0, per_sm = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, gemv_kernel<M, GLU, NORM, ROPE, WF>, GEMV_WARPS * 32, smem);
    if (e != cudaSuccess)
        return e;
    *ctas = (unsigned)(sms * per_sm);
    const uint64_t entry = (uint64_t)(smem + 1) << 32 | *ctas;
    for (auto &slot : cache) { /* the first free entry; all taken: the answer is not kept */
        uint64_t expected = 0;
        if (slot.compare_exchange_strong(expected, entry, std::memory_order_relaxed))
            break;
    }
    return cudaSuccess;
}

template <int M, int WF, bool GLU, bool NORM, bool ROPE = false>
static cudaError_t launch3(gemv_args a, bool pdl, cudaStream_t s)
{
    const int cols = GEMV_WARPS / a.ks; /* output columns per CTA (ROPE: 4 pairs) */
    a.groups = (a.n + cols - 1) / cols;
    size_t smem = sizeof(folio_bf16_bits) * (size_t)(M + (NORM ? 1 : 0)) * a.k;
    if (smem > 48 * 1024) {
        cudaError_t e =
            cudaFuncSetAttribute(gemv_kernel<M, GLU, NORM, ROPE, WF>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess)
            return e;
    }
    static std::atomic<bool> carveout_set(false);
    if (!carveout_set.load() && folio_k_smem_carveout() >= 0) { /* before the occupancy query */
        cudaError_t e = cudaFuncSetAttribute(gemv_kernel<M, GLU, NORM, ROPE, WF>,
                                             cudaFuncAttributePreferredSharedMemoryCarveout,
                                             folio_k_smem_carveout());
        if (e != cudaSuccess)
            return e;
        carveout_set.store(true);
    }
    /* At most the CTAs that fit at once, each looping over its groups. */
    unsigned blocks = (unsigned)a.groups, resident = 0;
    cudaError_t e = resident_ctas<M, GLU, NORM, ROPE, WF>(smem, &resident);
    if (e != cudaSuccess)
        return e;
    if (resident > 0 && resident < blocks)
        blocks = resident;
    return launch_pdl(gemv_kernel<M, GLU, NORM, ROPE, WF>, dim3(blocks), dim3(GEMV_WARPS * 32),
                      smem, s, pdl, a);
}

template <int M, int WF>
static cudaError_t launch_w(const gemv_args &a, bool glu, bool rope, bool pdl, cudaStream_t s)
{
    if (rope)
        return launch3<M, WF, false, true, true>(a, pdl, s);
    if (a.norm_w)
        return glu ? launch3<M, WF, true, true>(a, pdl, s) : launch3<M, WF, false, true>(a, pdl, s);
    return glu ? launch3<M, WF, true, false>(a, pdl, s) : launch3<M, WF, false, false>(a, pdl, s);
}

template <int M>
static cudaError_t launch_m(const gemv_args &a, int format, bool glu, bool rope, bool pdl,
                            cudaStream_t s)
{
    /* Quantized formats up to FOLIO_K_GEMV_QUANT_MAX_ROWS (checked by the caller): their
     * instantiations above it would only grow every binary's fatbin. */
    constexpr int QM = M <= FOLIO_K_GEMV_QUANT_MAX_ROWS ? M : FOLIO_K_GEMV_QUANT_MAX_ROWS;
    switch (format) {
    case FOLIO_K_W_E4M3:
        return launch_w<QM, FOLIO_K_W_E4M3>(a, glu, rope, pdl, s);
    case FOLIO_K_W_Q4_0X8:
        return launch_w<QM, FOLIO_K_W_Q4_0X8>(a, glu, rope, pdl, s);
    }
    return launch_w<M, FOLIO_K_W_BF16>(a, glu, rope, pdl, s);
}

static cudaError_t dispatch(const gemv_args &a, int m, int format, bool glu, bool rope, bool pdl,
                            cudaStream_t s)
{
    cudaError_t e;
    switch (m) {
    case 1:
        e = launch_m<1>(a, format, glu, rope, pdl, s);
        break;
    case 2:
        e = launch_m<2>(a, format, glu, rope, pdl, s);
        break;
    case 3:
        e = launch_m<3>(a, format, glu, rope, pdl, s);
        break;
    case 4:
        e = launch_m<4>(a, format, glu, rope, pdl, s);
        break;
    case 5:
        e = launch_m<5>(a, format, glu, rope, pdl, s);
        break;
    case 6:
        e = launch_m<6>(a, format, glu, rope, pdl, s);
        break;
    case 7:
        e = launch_m<7>(a, format, glu, rope, pdl, s);
        break;
    default:
        e = launch_m<8>(a, format, glu, rope, pdl, s);
        break;
    }
    return e != cudaSuccess ? e : cudaGetLastError();
}

static int max_rows(const struct folio_k_weight &w)
{
    return w.format == FOLIO_K_W_BF16 ? FOLIO_K_GEMV_MAX_ROWS : FOLIO_K_GEMV_QUANT_MAX_ROWS;
}

/* Sets a's weight fields from w; false if k does not suit its format. */
static bool set_weight(gemv_args &a, const struct folio_k_weight &w, int k)
{
    a.w = w.w;
    a.w_scale = w.scale;
    switch (w.format) {
    case FOLIO_K_W_BF16:
        a.kc = a.row_vecs = k / 8;
        return k % 8 == 0;
    case FOLIO_K_W_E4M3:
        a.kc = a.row_vecs = k / 16;
        return k % 16 == 0 && w.scale;
    case FOLIO_K_W_Q4_0X8:
        a.kc = k / 32;
        a.row_vecs = (int)(gguf_row_bytes(FOLIO_GGML_Q4_0X8, k) / 16);
        return k % 256 == 0;
    }
    return false;
}

extern "C" cudaError_t folio_k_gemv(void *y, const folio_bf16_bits *x, const folio_bf16_bits *add,
                                    const folio_bf16_bits *norm_w, float eps, const int32_t *rows,
                                    folio_bf16_bits *res_out, struct folio_k_weight w, int m, int n,
                                    int k, int out_f32, int gate_up_silu, int pdl, cudaStream_t s)
{
    if (m <= 0)
        return cudaSuccess;
    gemv_args a = {};
    if (m > max_rows(w) || n <= 0 || k <= 0 || !set_weight(a, w, k) || (res_out && res_out == x))
        return cudaErrorInvalidValue;
    /* Enough warps per column that each loads its share of the row in one
     * stretch (long rows would otherwise take several dependent rounds). */
    int ks = 1;
    while (ks < GEMV_WARPS && a.kc > ks * 32 * gemv_unroll(w.format))
        ks *= 2;
    a.y = y;
    a.x = x;
    a.add = add;
    a.norm_w = norm_w;
    a.eps = eps;
    a.rows = rows;
    a.res_out = res_out;
    a.n = n;
    a.k = k;
    a.ks = ks;
    a.out_f32 = out_f32 != 0;
    return dispatch(a, m, w.format, gate_up_silu != 0, false, pdl != 0, s);
}

extern "C" cudaError_t
folio_k_gemv_qkv_rope(folio_bf16_bits *qkv, const folio_bf16_bits *x, const folio_bf16_bits *add,
                      const folio_bf16_bits *norm_w, float eps, folio_bf16_bits *res_out,
                      struct folio_k_weight w, int k, folio_bf16_bits *k_cache,
                      folio_bf16_bits *v_cache, const float *inv_freq, struct folio_k_batch b,
                      int num_heads, int num_kv_heads, int head_dim, int pdl, cudaStream_t s)
{
    const int m = b.num_tokens, n = (num_heads + 2 * num_kv_heads) * head_dim;
    if (m <= 0)
        return cudaSuccess;
    gemv_args a = {};
    /* ks 1: a pair's two columns are whole rows of two warps of one CTA. */
    if (m > max_rows(w) || !norm_w || k <= 0 || !set_weight(a, w, k) || head_dim % 2 != 0 ||
        (res_out && res_out == x))
        return cudaErrorInvalidValue;
    a.y = qkv;
    a.x = x;
    a.add = add;
    a.norm_w = norm_w;
    a.eps = eps;
    a.res_out = res_out;
    a.n = n;
    a.k = k;
    a.ks = 1;
    a.b = b;
    a.k_cache = k_cache;
    a.v_cache = v_cache;
    a.inv_freq = inv_freq;
    a.num_heads = num_heads;
    a.num_kv_heads = num_kv_heads;
    a.head_dim = head_dim;
    return dispatch(a, m, w.format, false, true, pdl != 0, s);
}
