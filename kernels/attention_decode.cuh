/* What attention_decode.cu's kernels share: the launch arguments, the split
 * partials' layout, the K/V tile math (decode_tile), the RoPE prologue
 * (rope_inputs) and the small helpers of the decode kernels. Included by
 * attention_decode.cu alone. */
#ifndef FOLIO_ATTENTION_DECODE_CUH
#define FOLIO_ATTENTION_DECODE_CUH

#include "kv_fp8.cuh"

#define KT 32 /* keys per tile */
static_assert(KT % FOLIO_KV_BLOCK_SIZE == 0, "a tile is whole KV cache blocks");
#define MAX_SPLITS 32 /* splits a CTA of the last-CTA merge can take */
#define SMEM_LIMIT (227 * 1024)

/* cp.async stages per warp, each a K/V tile, all issued before the PDL wait:
 * three in 4-warp CTAs, two in one-warp CTAs, where a third stage costs more
 * occupancy than the extra bytes in flight bring. */
template <int NW> __host__ __device__ constexpr int decode_stages()
{
    return NW == 1 ? 2 : 3;
}

/* The stages' rows: unpadded and swizzled (tile_layout), in 128-byte aligned
 * shared memory, so that the copies write whole lines without bank conflicts
 * (swizzled rows that begin past a line boundary lose that). */
template <int D> using decode_layout = tile_layout<D, true>;

/* F8 (--kv-cache-dtype fp8): a warp's stages of e4m3 codes ([K, V][KT][D] bytes each) and the
 * one bf16 tile they widen into (kv_fp8.cuh), its share of shared memory. */
template <int D, int NW> __host__ __device__ constexpr size_t decode_warp_bytes8()
{
    return (size_t)decode_stages<NW>() * 2 * KT * D +
           sizeof(folio_bf16_bits) * 2 * KT * decode_layout<D>::LD;
}

template <int D, int NW, bool F8 = false> constexpr size_t decode_smem_bytes()
{
    constexpr size_t stages =
        F8 ? NW * decode_warp_bytes8<D, NW>()
           : sizeof(folio_bf16_bits) * NW * decode_stages<NW>() * 2 * KT * decode_layout<D>::LD;
    constexpr size_t merge = sizeof(float) * NW * 16 * (D + 2);
    return stages > merge ? stages : merge;
}

struct decode_args {
    folio_bf16_bits *out;
    const folio_bf16_bits *qkv;
    const folio_bf16_bits *k_cache, *v_cache; /* written only by write_new_kv; the F8 kernels'
                                                 hold e4m3 codes (uint8_t) here */
    struct folio_k_batch b;
    int num_heads, num_kv_heads;
    float *part_o;   /* [token * heads + head][split][D] */
    float2 *part_ml; /* [token * heads + head][split]: (max, sum) */
    int *counters;   /* [token][KV head]: CTAs done, 0 between launches; NULL:
                        combine_kernel merges */
};

/* What the kernel does with q, k and v as QKV wrote them (its ROPE parameter):
 * nothing (the RoPE kernel rotated them and wrote the new key and value), RoPE
 * (rotates q, writes the new key and value), or RoPE after scaling all three
 * by their token's 1 / rms (the norm folded into the QKV weights: the kernel's
 * norm parameter). Like the rope table, the norm is a kernel parameter of its
 * own rather than a field of decode_args (see above). */
enum { QKV_ROTATED = 0, QKV_ROPE = 1, QKV_ROPE_NORM = 2 };

/* The split layout every CTA of a (token, KV head), and combine_kernel,
 * derive alike from the token's position. */
struct split_layout {
    int tiles, per, active;

    __device__ __forceinline__ split_layout(int pos, int splits, int nw)
    {
        tiles = (pos + 1 + KT - 1) / KT;              /* pos -1 (padding): none */
        per = max(nw, (tiles + splits - 1) / splits); /* tiles per split */
        active = (tiles + per - 1) / per;             /* splits with keys */
    }
};

/* One K/V tile against a warp's query heads, transposed: S^T = K Q^T with
 * the tile's keys as the rows (two m16 tiles of 16) and the heads as the
 * columns (NQ n-tiles of 8), the online softmax per head column in the log2
 * domain, then O^T += V^T P^T with the head dims as the rows. P^T goes from
 * the accumulator layout to the B operand by movmatrix.
 *
 * Fragments (lane = 4 g + tq): qb[nq][s] is the B operand of head dims
 * 16 s .. 16 s + 15 of head 8 nq + g; o[dt][nq] holds dims 16 dt + g (0, 1)
 * and 16 dt + g + 8 (2, 3) of heads 8 nq + 2 tq (0, 2) and 8 nq + 2 tq + 1
 * (1, 3); m and l are those two heads' running max and sum (l summed over
 * the lane's keys only: the caller adds up the eight lanes of a tq). Keys
 * at or past k_end are masked (a decode token sees every key before it). */
template <int D, int NQ>
__device__ __forceinline__ void
decode_tile(const folio_bf16_bits *ks, const folio_bf16_bits *vs,
            const uint32_t (&qb)[NQ][D / 16][2], float (&o)[D / 16][NQ][4], float (&m)[NQ][2],
            float (&l)[NQ][2], int kbase, int k_end, float scale_log2)
{
    using layout = decode_layout<D>;
    constexpr int MT = KT / 16; /* m-tiles of keys */
    constexpr int KS = D / 16;  /* k-steps over head dims, and m-tiles of output dims */
    const int lane = threadIdx.x & 31, g = lane >> 2;

    /* S^T = K Q^T: K rows are the A operand as they lie (ldmatrix). */
    float sc[MT][NQ][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nq = 0; nq < NQ; nq++)
            sc[mt][nq][0] = sc[mt][nq][1] = sc[mt][nq][2] = sc[mt][nq][3] = 0.0f;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int s = 0; s < KS; s++) {
            uint32_t ka[4];
            ldmatrix_x4(ka, ks + layout::at(16 * mt + (lane & 7) + ((lane >> 3) & 1) * 8,
                                            2 * s + (lane >> 4)));
#pragma unroll
            for (int nq = 0; nq < NQ; nq++)
                mma_16816(sc[mt][nq], ka, qb[nq][s][0], qb[nq][s][1]);
        }
    }

    /* Mask (only a tile reaching past the context needs one), online softmax
     * per head column: element e of a fragment is head column e & 1, key row
     * g + 8 (e >> 1). */
    float tile_max[NQ][2];
#pragma unroll
    for (int nq = 0; nq < NQ; nq++)
        tile_max[nq][0] = tile_max[nq][1] = -INFINITY;
    const bool whole = kbase + KT <= k_end;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nq = 0; nq < NQ; nq++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = kbase + 16 * mt + g + 8 * (e >> 1);
                float v = sc[mt][nq][e] * scale_log2;
                if (!whole && key >= k_end)
                    v = -INFINITY;
                sc[mt][nq][e] = v;
                tile_max[nq][e & 1] = fmaxf(tile_max[nq][e & 1], v);
            }
    float m_use[NQ][2];
#pragma unroll
    for (int nq = 0; nq < NQ; nq++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            float tm = tile_max[nq][c];
            tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 4));
            tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 8));
            tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 16));
            const float m_new = fmaxf(m[nq][c], tm);
            m_use[nq][c] = m_new == -INFINITY ? 0.0f : m_new; /* no -inf - -inf */
            const float alpha = exp2f(m[nq][c] - m_use[nq][c]);
            m[nq][c] = m_new;
            l[nq][c] *= alpha;
#pragma unroll
            for (int dt = 0; dt < KS; dt++) {
                o[dt][nq][c] *= alpha;
                o[dt][nq][c + 2] *= alpha;
            }
        }

    /* P^T in bf16 as the B operand of O^T += V^T P^T: each 8x8 half of an
     * accumulator fragment (keys x heads), transposed, is (heads x keys). */
    uint32_t pb[MT][NQ][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int nq = 0; nq < NQ; nq++) {
            float p[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                p[e] = exp2f(sc[mt][nq][e] - m_use[nq][e & 1]);
                l[nq][e & 1] += p[e];
            }
            pb[mt][nq][0] = movmatrix_trans(pack_bf16x2(p[0], p[1]));
            pb[mt][nq][1] = movmatrix_trans(pack_bf16x2(p[2], p[3]));
        }
    }

    /* O^T += V^T P^T, V^T as the A operand: ldmatrix.trans of the V rows. */
#pragma unroll
    for (int dt = 0; dt < KS; dt++) {
#pragma unroll
        for (int kk = 0; kk < MT; kk++) {
            uint32_t va[4];
            ldmatrix_x4_trans(va, vs + layout::at(16 * kk + (lane >> 4) * 8 + (lane & 7),
                                                  2 * dt + ((lane >> 3) & 1)));
#pragma unroll
            for (int nq = 0; nq < NQ; nq++)
                mma_16816(o[dt][nq], va, pb[kk][nq][0], pb[kk][nq][1]);
        }
    }
}

/* Columns col and col + 1 of token t's QKV projection (bf16), before RoPE. */
template <int D>
__device__ __forceinline__ void unrotated_pair(const decode_args &a, int t, int col,
                                               folio_bf16_bits &x0, folio_bf16_bits &x1)
{
    const int64_t off = (int64_t)t * (a.num_heads + 2 * a.num_kv_heads) * D + col;
    const uint32_t v = *(const uint32_t *)(a.qkv + off);
    x0 = (folio_bf16_bits)(v & 0xffffu);
    x1 = (folio_bf16_bits)(v >> 16);
}

/* x * inv rounded to bf16: a value of q, k or v scaled by its token's 1 / rms. */
__device__ __forceinline__ void scale_bf16(folio_bf16_bits &x, float inv)
{
    x = f32_to_bf16(bf16_to_f32(x) * inv);
}

/* What the kernels with ROPE read before they rotate: q of the lane's heads
 * unrotated, their cos/sin, the residual row for the norm, and for the warp
 * that writes them the new key and value with the key's cos/sin. load()
 * issues every one of those loads before the first tiles' copies go out and
 * the rest uses them after, so that they do not queue behind the copies (one
 * round trip for all of them, overlapping the copies' first). */
template <int D, int NQ, bool NORM> struct rope_inputs {
    static constexpr int KS = D / 16, HALF = D / 2;
    static constexpr int RV = 8; /* residual vectors a lane holds: rows up to 2048 wide */
    folio_bf16_bits q[NQ][KS][4];
    uint32_t q_cs[KS / 2][4];
    uint4 res[RV];
    folio_bf16_bits k1[2], k2[2], v[D / 64][2];
    uint32_t k_cs[2];

    /* q: the lane's dims of its head (16 s + 2 tq, + 1, + 8, + 9 for every
     * s) hold both halves of their rotation pairs, as s and s + KS / 2 lie
     * D / 2 apart; zeros for padding rows (pos -1) and heads past the group. */
    __device__ __forceinline__ void load(const decode_args &a, const uint32_t *cos_sin,
                                         const struct folio_k_row_norm &norm, int t, int kvh,
                                         int group, int pos, bool new_kv, int lane)
    {
        const int g = lane >> 2, tq = lane & 3;
#pragma unroll
        for (int nq = 0; nq < NQ; nq++) {
            const bool live = 8 * nq + g < group && pos >= 0;
            const int col = (kvh * group + 8 * nq + g) * D + 2 * tq;
#pragma unroll
            for (int s = 0; s < KS; s++) {
                q[nq][s][0] = q[nq][s][1] = q[nq][s][2] = q[nq][s][3] = 0;
                if (live) {
                    unrotated_pair<D>(a, t, col + 16 * s, q[nq][s][0], q[nq][s][1]);
                    unrotated_pair<D>(a, t, col + 16 * s + 8, q[nq][s][2], q[nq][s][3]);
                }
            }
        }
        if (pos < 0)
            return;
        const uint32_t *cs = cos_sin + (int64_t)pos * HALF + 2 * tq;
#pragma unroll
        for (int s = 0; s < KS / 2; s++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                q_cs[s][e] = cs[16 * s + (e & 1) + 8 * (e >> 1)];
        if (NORM) {
            const uint4 *x = (const uint4 *)(norm.x + (int64_t)t * norm.hidden);
#pragma unroll
            for (int j = 0; j < RV; j++)
                if (lane + 32 * j < norm.hidden / 8)
                    res[j] = x[lane + 32 * j];
        }
        if (new_kv) {
            const int kcol = (a.num_heads + kvh) * D,
                      vcol = (a.num_heads + a.num_kv_heads + kvh) * D;
            const int i = 2 * lane;
            if (i < HALF) {
                unrotated_pair<D>(a, t, kcol + i, k1[0], k1[1]);
                unrotated_pair<D>(a, t, kcol + i + HALF, k2[0], k2[1]);
                k_cs[0] = cos_sin[(int64_t)pos * HALF + i];
                k_cs[1] = cos_sin[(int64_t)pos * HALF + i + 1];
            }
#pragma unroll
            for (int it = 0; it < D / 64; it++)
                unrotated_pair<D>(a, t, vcol + i + 64 * it, v[it][0], v[it][1]);
        }
    }

    /* 1 / rms of token t's residual row by the warp, with the norm's eps, as
     * add_rmsnorm computes it (each lane sums its vectors lane, lane + 32, ...
     * in turn, then the warp adds the lanes' sums). */
    __device__ __forceinline__ float inv_rms(const struct folio_k_row_norm &norm, int t,
                                             int lane) const
    {
        const int nv = norm.hidden / 8;
        float ss = 0.0f;
#pragma unroll
        for (int j = 0; j < RV; j++) {
            if (lane + 32 * j >= nv)
                break;
            const folio_bf16_bits *qe = (const folio_bf16_bits *)&res[j];
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const float f = bf16_to_f32(qe[e]);
                ss += f * f;
            }
        }
        const uint4 *x = (const uint4 *)(norm.x + (int64_t)t * norm.hidden);
        for (int v = lane + 32 * RV; v < nv; v += 32) { /* rows wider than 2048 */
            const uint4 r = x[v];
            const folio_bf16_bits *qe = (const folio_bf16_bits *)&r;
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const float f = bf16_to_f32(qe[e]);
                ss += f * f;
            }
        }
        return rsqrtf(warp_sum(ss) / (float)norm.hidden + norm.eps);
    }

    /* The lane's q values scaled (NORM) and rotated: its B-operand words. */
    __device__ __forceinline__ void q_operand(int nq, bool live, float inv,
                                              uint32_t (&qb)[KS][2]) const
    {
        folio_bf16_bits x[KS][4];
#pragma unroll
        for (int s = 0; s < KS; s++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                x[s][e] = q[nq][s][e];
        if (live) {
            if (NORM)
#pragma unroll
                for (int s = 0; s < KS; s++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        scale_bf16(x[s][e], inv);
#pragma unroll
            for (int s = 0; s < KS / 2; s++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    rope_rotate_cs(x[s][e], x[s + KS / 2][e], q_cs[s][e]);
        }
#pragma unroll
        for (int s = 0; s < KS; s++) {
            qb[s][0] = (uint32_t)x[s][0] | (uint32_t)x[s][1] << 16;
            qb[s][1] = (uint32_t)x[s][2] | (uint32_t)x[s][3] << 16;
        }
    }

    /* Token t's new key, scaled (NORM) and rotated, and its value scaled, as
     * the cache holds them: bf16 pairs, two adjacent values a lane (k1: dims
     * 2 lane, + 1 of the first half, k2: those of the second; v[it]: dims
     * 2 lane + 64 it, + 1). Lanes past the first half hold no key pair. */
    struct new_kv {
        uint32_t k1, k2, v[D / 64];
    };
    __device__ __forceinline__ new_kv final_kv(int lane, float inv) const
    {
        new_kv r = {};
        const int i = 2 * lane;
        if (i < HALF) {
            folio_bf16_bits x1[2] = {k1[0], k1[1]}, x2[2] = {k2[0], k2[1]};
#pragma unroll
            for (int e = 0; e < 2; e++) {
                if (NORM) {
                    scale_bf16(x1[e], inv);
                    scale_bf16(x2[e], inv);
                }
                rope_rotate_cs(x1[e], x2[e], k_cs[e]);
            }
            r.k1 = (uint32_t)x1[0] | (uint32_t)x1[1] << 16;
            r.k2 = (uint32_t)x2[0] | (uint32_t)x2[1] << 16;
        }
#pragma unroll
        for (int it = 0; it < D / 64; it++) {
            folio_bf16_bits v0 = v[it][0], v1 = v[it][1];
            if (NORM) {
                scale_bf16(v0, inv);
                scale_bf16(v1, inv);
            }
            r.v[it] = (uint32_t)v0 | (uint32_t)v1 << 16;
        }
        return r;
    }

    /* That key and value into the cache, at row pos of cache block `block`,
     * as rope_kv_write_kernel would write them. */
    static __device__ __forceinline__ void write_new_kv(const decode_args &a, int kvh, int pos,
                                                        int32_t block, int lane, const new_kv &n)
    {
        const int64_t off = ((int64_t)block * a.num_kv_heads + kvh) * (FOLIO_KV_BLOCK_SIZE * D) +
                            (int64_t)(pos % FOLIO_KV_BLOCK_SIZE) * D;
        const int i = 2 * lane;
        if (i < HALF) {
            uint32_t *k = (uint32_t *)(a.k_cache + off); /* the cache is the kernel's to write */
            k[i / 2] = n.k1;
            k[(i + HALF) / 2] = n.k2;
        }
#pragma unroll
        for (int it = 0; it < D / 64; it++)
            ((uint32_t *)(a.v_cache + off))[(i + 64 * it) / 2] = n.v[it];
    }

    /* The online softmax's state after the new key alone (new_key_first):
     * each head's score against it is the running max (log2 domain), its
     * weight 1 the running sum (in the lanes of g 0: the caller adds the
     * eight lanes of a tq), the value the output. The layouts are
     * decode_tile's: qb[nq][s] holds dims 16 s + 2 tq, + 1 (word 0) and
     * + 8, + 9 (word 1) of head 8 nq + g; o[dt][nq] dims 16 dt + g (0, 1) and
     * + 8 (2, 3) of heads 8 nq + 2 tq (0, 2) and + 1 (1, 3). */
    static __device__ __forceinline__ void
    new_key_start(const new_kv &n, const uint32_t (&qb)[NQ][KS][2], float scale_log2,
                  float (&o)[KS][NQ][4], float (&m)[NQ][2], float (&l)[NQ][2], int lane)
    {
        const int g = lane >> 2, tq = lane & 3;
        constexpr int SH = HALF / 16; /* k-steps in a half: dims 16 s lie in k1 for s < SH */
        float dot[NQ];
#pragma unroll
        for (int nq = 0; nq < NQ; nq++)
            dot[nq] = 0.0f;
#pragma unroll
        for (int s = 0; s < KS; s++) {
            const uint32_t kw = s < SH ? n.k1 : n.k2;
            const int src = 8 * (s % SH) + tq; /* holds dims 16 s + 2 tq, + 1 of its half */
            const uint32_t k_lo = __shfl_sync(0xffffffffu, kw, src);
            const uint32_t k_hi = __shfl_sync(0xffffffffu, kw, src + 4); /* + 8, + 9 */
#pragma unroll
            for (int nq = 0; nq < NQ; nq++) {
                const uint32_t q2[2] = {qb[nq][s][0], qb[nq][s][1]}, k2w[2] = {k_lo, k_hi};
#pragma unroll
                for (int w = 0; w < 2; w++) {
                    dot[nq] += bf16_to_f32((folio_bf16_bits)(q2[w] & 0xffffu)) *
                               bf16_to_f32((folio_bf16_bits)(k2w[w] & 0xffffu));
                    dot[nq] += bf16_to_f32((folio_bf16_bits)(q2[w] >> 16)) *
                               bf16_to_f32((folio_bf16_bits)(k2w[w] >> 16));
                }
            }
        }
#pragma unroll
        for (int nq = 0; nq < NQ; nq++) {
            dot[nq] += __shfl_xor_sync(0xffffffffu, dot[nq], 1);
            dot[nq] += __shfl_xor_sync(0xffffffffu, dot[nq], 2); /* head 8 nq + g's score */
#pragma unroll
            for (int c = 0; c < 2; c++) {
                m[nq][c] = __shfl_sync(0xffffffffu, dot[nq], 4 * (2 * tq + c)) * scale_log2;
                l[nq][c] = g == 0 ? 1.0f : 0.0f;
            }
        }
#pragma unroll
        for (int dt = 0; dt < KS; dt++) {
            /* dims 16 dt + g and + 8: lanes 8 (dt % 4) + g / 2 and + 4, value g & 1 of v[dt / 4] */
            const int src = 8 * (dt % 4) + g / 2;
            const uint32_t lo = __shfl_sync(0xffffffffu, n.v[dt / 4], src);
            const uint32_t hi = __shfl_sync(0xffffffffu, n.v[dt / 4], src + 4);
            const float v_lo = bf16_to_f32((folio_bf16_bits)(g & 1 ? lo >> 16 : lo & 0xffffu));
            const float v_hi = bf16_to_f32((folio_bf16_bits)(g & 1 ? hi >> 16 : hi & 0xffffu));
#pragma unroll
            for (int nq = 0; nq < NQ; nq++) {
                o[dt][nq][0] = o[dt][nq][1] = v_lo;
                o[dt][nq][2] = o[dt][nq][3] = v_hi;
            }
        }
    }
};

/* Copies the K and V rows of one key (in cache block `block`) into row `row`
 * of a tile's stages (the row attention_load_blocks was told to skip), by the
 * warp's lanes. */
template <int D>
__device__ __forceinline__ void load_key_row(folio_bf16_bits *ks, folio_bf16_bits *vs,
                                             const decode_args &a, int32_t block, int kvh, int row,
                                             int key, int lane)
{
    constexpr int CHUNKS = D / 8;
    const int64_t off = ((int64_t)block * a.num_kv_heads + kvh) * (FOLIO_KV_BLOCK_SIZE * D) +
                        (int64_t)(key % FOLIO_KV_BLOCK_SIZE) * D;
    for (int c = lane; c < 2 * CHUNKS; c += 32) {
        const bool v = c >= CHUNKS;
        const int cc = v ? c - CHUNKS : c;
        cp_async_16((v ? vs : ks) + decode_layout<D>::at(row, cc),
                    (v ? a.v_cache : a.k_cache) + off + cc * 8, 16);
    }
}

/* The row of key pos into its stage, if it lies in one of the warp's first
 * tiles (j = pos_j, copied before the wait without it), as the group after
 * those tiles' groups. */
template <int D, int NW>
__device__ __forceinline__ void load_pos_row(folio_bf16_bits *stage0, int pos_j,
                                             const decode_args &a, int32_t pos_block, int kvh,
                                             int pos, int t_begin, int warp, int lane)
{
    constexpr int LD = decode_layout<D>::LD;
    if (pos_j >= 0) {
        folio_bf16_bits *ks = stage0 + (size_t)pos_j * 2 * KT * LD;
        load_key_row<D>(ks, ks + KT * LD, a, pos_block, kvh,
                        pos - (t_begin + warp + pos_j * NW) * KT, pos, lane);
    }
    cp_async_commit();
}

/* The online softmax's state before any key: no output, running max -inf,
 * running sum 0 (decode_tile's layouts). */
template <int D, int NQ>
__device__ __forceinline__ void decode_start(float (&o)[D / 16][NQ][4], float (&m)[NQ][2],
                                             float (&l)[NQ][2])
{
#pragma unroll
    for (int nq = 0; nq < NQ; nq++) {
        m[nq][0] = m[nq][1] = -INFINITY;
        l[nq][0] = l[nq][1] = 0.0f;
#pragma unroll
        for (int dt = 0; dt < D / 16; dt++)
            o[dt][nq][0] = o[dt][nq][1] = o[dt][nq][2] = o[dt][nq][3] = 0.0f;
    }
}

/* Each head's running sum, spread over the 8 lanes of a tq, added up. */
template <int NQ> __device__ __forceinline__ void sum_head_lanes(float (&l)[NQ][2])
{
#pragma unroll
    for (int nq = 0; nq < NQ; nq++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            l[nq][c] += __shfl_xor_sync(0xffffffffu, l[nq][c], 4);
            l[nq][c] += __shfl_xor_sync(0xffffffffu, l[nq][c], 8);
            l[nq][c] += __shfl_xor_sync(0xffffffffu, l[nq][c], 16);
        }
}

/* A one-split warp's output rows row0 + h (h < group): normalized, in bf16,
 * transposed back by movmatrix, so that the lane holds dims 2 tq, 2 tq + 1
 * (+ 8) of head 8 nq + g. */
template <int D, int NQ>
__device__ __forceinline__ void store_direct(folio_bf16_bits *out, int64_t row0, int group,
                                             const float (&o)[D / 16][NQ][4],
                                             const float (&l)[NQ][2], int lane)
{
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int nq = 0; nq < NQ; nq++) {
        const float inv0 = l[nq][0] > 0.0f ? 1.0f / l[nq][0] : 0.0f;
        const float inv1 = l[nq][1] > 0.0f ? 1.0f / l[nq][1] : 0.0f;
        const bool mine_head = 8 * nq + g < group;
        uint32_t *dst = (uint32_t *)(out + (row0 + 8 * nq + g) * D);
#pragma unroll
        for (int dt = 0; dt < D / 16; dt++) {
            const uint32_t lo =
                movmatrix_trans(pack_bf16x2(o[dt][nq][0] * inv0, o[dt][nq][1] * inv1));
            const uint32_t hi =
                movmatrix_trans(pack_bf16x2(o[dt][nq][2] * inv0, o[dt][nq][3] * inv1));
            if (mine_head) {
                dst[(16 * dt + 2 * tq) / 2] = lo;
                dst[(16 * dt + 8 + 2 * tq) / 2] = hi;
            }
        }
    }
}

/* Drops token t's q of the group's heads and k and v of KV head kvh from the
 * L2 (l2_discard): read by one warp alone (a one-warp CTA of one split), and
 * used by now. */
template <int D>
__device__ __forceinline__ void drop_qkv_lines(const decode_args &a, int t, int kvh, int group,
                                               int lane)
{
    constexpr int LPH = D / 64; /* 128-byte lines a head */
    const int nq_lines = group * LPH;
    __syncwarp();
    for (int i = lane; i < nq_lines + 2 * LPH; i += 32) {
        const int64_t col =
            i < nq_lines ? (int64_t)kvh * group * D + i * 64
            : i < nq_lines + LPH
                ? (int64_t)(a.num_heads + kvh) * D + (i - nq_lines) * 64
                : (int64_t)(a.num_heads + a.num_kv_heads + kvh) * D + (i - nq_lines - LPH) * 64;
        l2_discard(a.qkv + (int64_t)t * (a.num_heads + 2 * a.num_kv_heads) * D + col);
    }
}

#endif
