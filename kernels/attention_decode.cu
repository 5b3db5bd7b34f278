/* Paged attention of decode-only batches (token t is sequence t's one new
 * token) on the tensor cores. Grid: tokens x KV heads x splits; a CTA serves
 * the query heads of one token's group, so every K/V load serves all of them.
 * Split s takes a run of 32-key tiles; its NW warps take every NW-th tile, each
 * with its own cp.async stages (folio_k_attention_decode_plan picks the shape:
 * 4-warp CTAs while all fit on the chip, one-warp CTAs past that). Partials
 * merge in a fixed order, by the last CTA (an atomic counter) or by
 * combine_kernel, so the result never depends on timing. Under PDL a CTA
 * copies its first tiles before waiting for the previous kernel: only q and
 * the new key and value come from it. The products are transposed (keys as
 * the MMA's rows, heads as its columns) so a GQA group of 8 fills the MMA.
 * With the cos/sin table (ROPE) q, k and v come unrotated and the kernel does
 * RoPE and the cache write itself, saving a kernel on the cuBLASLt path; the
 * table is a parameter of its own because a larger decode_args made nvcc read
 * every kernel's parameters through memory. attention_decode_tma_kernel does
 * the same work with TMA tensor copies where one-warp CTAs crowd the SMs. */
#include <mutex>

#include "attention_tile.cuh"
#include "mbarrier.cuh"
#include "tensor_map.cuh"

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

template <int D, int NW> constexpr size_t decode_smem_bytes()
{
    constexpr size_t stages =
        sizeof(folio_bf16_bits) * NW * decode_stages<NW>() * 2 * KT * decode_layout<D>::LD;
    constexpr size_t merge = sizeof(float) * NW * 16 * (D + 2);
    return stages > merge ? stages : merge;
}

struct decode_args {
    folio_bf16_bits *out;
    const folio_bf16_bits *qkv;
    const folio_bf16_bits *k_cache, *v_cache; /* written only by write_new_kv */
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

template <int D, int NW, int NQ, int ROPE>
__global__ void __launch_bounds__(NW * 32)
    attention_decode_kernel(decode_args a, const uint32_t *rope_cos_sin,
                            struct folio_k_row_norm norm, struct folio_k_l2_drop drop)
{
    constexpr int LD = decode_layout<D>::LD;
    constexpr int KS = D / 16; /* k-steps over head dims, m-tiles of output dims */
    constexpr int ST = decode_stages<NW>();
    /* 128-byte aligned, so that every stage row is one line of shared memory:
     * with 16, the dynamic region began 16 bytes past a line (after is_last)
     * and every row straddled two, as padded rows do. */
    extern __shared__ __align__(128) folio_bf16_bits smem_kv[];
    __shared__ int is_last;

    /* Everything up to the wait reads only what no kernel of this step writes:
     * the step's metadata and the keys and values of earlier steps. */
    pdl_trigger();
    const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tq = lane & 3;
    const int group = a.num_heads / a.num_kv_heads;
    const int pos = a.b.token_pos[t]; /* -1: padding row, no keys, zeros out */
    /* With RoPE in one one-warp CTA (the cuBLASLt path's plan), the warp that
     * makes the new key and value scores that key from its registers
     * (new_key_start) and its tiles stop before it: no copy of row pos after
     * the cache write, and no tile for that key alone when pos is a multiple
     * of the tile (every step of a decode at 512 tokens of context). */
    const bool new_key_in_regs = ROPE && NW == 1 && splits == 1;
    const int n_keys = new_key_in_regs ? pos : pos + 1; /* keys the tiles take from the cache */
    const split_layout sl(n_keys - 1, splits, NW);
    const int tiles = sl.tiles, per = sl.per, active = sl.active;
    /* One split with keys (or none: a padding row) writes the output itself. */
    const bool direct = active <= 1;
    const int64_t row0 = (int64_t)t * a.num_heads + kvh * group;
    if (split >= max(active, 1))
        return; /* nothing to read, nothing to merge, nothing to wait for */
    {
        const int t_begin = split * per, t_end = min(t_begin + per, tiles);
        const int32_t *table = a.b.block_tables + (int64_t)a.b.token_seq[t] * a.b.block_stride;

        /* This warp's tiles: t_begin + warp, + NW, ... below t_end, through ST
         * stages. The first ST go out before the wait for the previous kernel
         * (programmatic dependent launch: the QKV GEMV or RoPE, which write q
         * and this token's key and value at pos), all but the row of key pos,
         * copied after the wait. */
        folio_bf16_bits *stage0 = smem_kv + (size_t)warp * ST * 2 * KT * LD;
        const int mine = t_end > t_begin + warp ? (t_end - t_begin - warp + NW - 1) / NW : 0;
        /* The cache blocks of the warp's tiles, read from the block table a
         * chunk of TPC tiles at a time, one block per lane (lane i: block
         * i % BPT of tile i / BPT of the chunk); the next chunk's half way
         * through this one. So no tile's copies wait on a table read, and the
         * row of key pos goes out right after the wait. */
        constexpr int BPT = KT / FOLIO_KV_BLOCK_SIZE, TPC = 32 / BPT;
        auto table_chunk = [&](int c) -> int32_t {
            const int j = c * TPC + lane / BPT;
            const int key = (t_begin + warp + j * NW) * KT + (lane % BPT) * FOLIO_KV_BLOCK_SIZE;
            return j < mine && key < n_keys ? table[key / FOLIO_KV_BLOCK_SIZE] : 0;
        };
        int32_t blk = table_chunk(0), blk_next = 0;
        auto load = [&](int j, int skip) {
            const int c = j / TPC, r = j % TPC;
            if (r == 0 && c > 0)
                blk = blk_next;
            if (r == TPC / 2 && (c + 1) * TPC < mine)
                blk_next = table_chunk(c + 1);
            int32_t blocks[BPT];
#pragma unroll
            for (int b = 0; b < BPT; b++)
                blocks[b] = __shfl_sync(0xffffffffu, blk, r * BPT + b);
            folio_bf16_bits *ks = stage0 + (size_t)(j % ST) * 2 * KT * LD;
            attention_load_blocks<D, KT, true>(ks, ks + KT * LD, a.k_cache, a.v_cache, blocks, kvh,
                                               a.num_kv_heads, (t_begin + warp + j * NW) * KT,
                                               n_keys, lane, 32, skip);
        };
        static_assert(ST <= TPC / 2, "the first ST tiles' blocks are in the first chunk");
        /* Groups: tiles 0 .. ST - 1 (one each, empty past mine), all but the
         * row of key pos (skip); then that row, if one of them holds it; then
         * tile j + ST once tile j is used. */
        auto load_first = [&](int skip) {
#pragma unroll
            for (int j = 0; j < ST; j++) {
                if (j < mine)
                    load(j, skip);
                cp_async_commit();
            }
        };
        /* Without ROPE before the wait for the previous kernel. With ROPE
         * (whose launch follows a cuBLASLt GEMM, which lets nothing start
         * early) after the wait and after the loads of rope_inputs, which
         * would otherwise queue behind every warp's first tiles. */
        if (!ROPE)
            load_first(pos);
        int pos_j = -1; /* which of the first ST tiles holds key pos (copied) */
#pragma unroll
        for (int j = 0; j < ST; j++) {
            const int kb = (t_begin + warp + j * NW) * KT;
            if (!new_key_in_regs && j < mine && kb <= pos && pos < kb + KT)
                pos_j = j;
        }
        const int32_t pos_block =
            __shfl_sync(0xffffffffu, blk, max(pos_j, 0) * BPT + (pos % KT) / FOLIO_KV_BLOCK_SIZE);
        /* RoPE here: the warp whose tiles hold key pos writes it into the cache
         * (its block id read before the wait), then reads it back as any key,
         * or (new_key_in_regs) the CTA's one warp writes it and scores it. */
        const int pos_tile = pos / KT;
        const bool writes_new_kv = ROPE && pos >= 0 &&
                                   (new_key_in_regs || (pos_tile >= t_begin && pos_tile < t_end &&
                                                        (pos_tile - t_begin) % NW == warp));
        const int32_t new_block = writes_new_kv ? table[pos / FOLIO_KV_BLOCK_SIZE] : 0;
        pdl_wait();
        /* A buffer the kernels before this one were the last to read (every
         * one of them has finished now, through the waits of the chain). */
        l2_discard_dead(drop,
                        blockIdx.x + (int64_t)gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z),
                        (int64_t)gridDim.x * gridDim.y * gridDim.z, threadIdx.x, NW * 32);
        constexpr bool NORM = ROPE == QKV_ROPE_NORM;
        rope_inputs<D, NQ, NORM> in;
        if (ROPE) {
            in.load(a, rope_cos_sin, norm, t, kvh, group, pos, writes_new_kv, lane);
            load_first(new_key_in_regs ? -1 : pos);
        } else { /* with ROPE, after q: this warp may write that row first */
            load_pos_row<D, NW>(stage0, pos_j, a, pos_block, kvh, pos, t_begin, warp, lane);
        }

        /* This lane's B-operand column is head kvh * group + 8 nq + g. A head
         * past the group (q zero) is a column of its own whose output is
         * never written. */
        uint32_t qb[NQ][KS][2];
        float inv = 1.0f;
        const folio_bf16_bits *qrow =
            a.qkv + (int64_t)t * (a.num_heads + 2 * a.num_kv_heads) * D + (int64_t)kvh * group * D;
#pragma unroll
        for (int nq = 0; nq < NQ; nq++) {
            const bool live = 8 * nq + g < group && pos >= 0;
            if (ROPE) {
                if (NORM && nq == 0 && pos >= 0)
                    inv = in.inv_rms(norm, t, lane);
                in.q_operand(nq, live, inv, qb[nq]);
                continue;
            }
            const uint32_t *q = (const uint32_t *)(qrow + (int64_t)(8 * nq + g) * D);
#pragma unroll
            for (int s = 0; s < KS; s++) {
                qb[nq][s][0] = live ? q[(16 * s + 2 * tq) / 2] : 0u;
                qb[nq][s][1] = live ? q[(16 * s + 8 + 2 * tq) / 2] : 0u;
            }
        }
        typename rope_inputs<D, NQ, NORM>::new_kv nkv = {};
        if (ROPE) { /* then the new key and value, and that row */
            if (writes_new_kv) {
                nkv = in.final_kv(lane, inv);
                in.write_new_kv(a, kvh, pos, new_block, lane, nkv);
                if (!new_key_in_regs) {
                    __threadfence_block(); /* the lanes' cache writes before any lane's copies */
                    __syncwarp();
                }
            }
            load_pos_row<D, NW>(stage0, pos_j, a, pos_block, kvh, pos, t_begin, warp, lane);
            if (NW == 1 && splits == 1 && drop.input && pos >= 0)
                drop_qkv_lines<D>(a, t, kvh, group, lane);
        }
        float o[KS][NQ][4], m[NQ][2], l[NQ][2];
        const float scale_log2 = attention_scale_log2<D>();
        if (new_key_in_regs && pos >= 0) {
            rope_inputs<D, NQ, NORM>::new_key_start(nkv, qb, scale_log2, o, m, l, lane);
        } else {
            decode_start<D, NQ>(o, m, l);
        }
        for (int j = 0; j < mine; j++) {
            /* Tile j's group is complete: ST groups came after it for j < ST
             * (the later first tiles and the pos row), ST - 1 after that (the
             * tiles loaded since); the last tile waits for everything (the
             * pos row's group included). */
            if (j == mine - 1)
                cp_async_wait<0>();
            else if (j < ST)
                cp_async_wait<ST>();
            else
                cp_async_wait<ST - 1>();
            __syncwarp();
            folio_bf16_bits *ks = stage0 + (size_t)(j % ST) * 2 * KT * LD;
            const int kbase = (t_begin + warp + j * NW) * KT;
            decode_tile<D, NQ>(ks, ks + KT * LD, qb, o, m, l, kbase, n_keys, scale_log2);
            __syncwarp(); /* this stage is free for tile j + ST */
            if (j + ST < mine)
                load(j + ST, -1);
            cp_async_commit();
        }
        sum_head_lanes<NQ>(l);

        if (NW == 1 && direct) {
            store_direct<D, NQ>(a.out, row0, group, o, l, lane);
        } else {
            /* Unnormalized f32 rows (head, dims): this warp's into shared
             * memory for the CTA's merge, or with NW == 1 straight out as
             * this split's partial. */
            float *mo = (float *)smem_kv; /* [NW][16][D] */
            float *mm = mo + NW * 16 * D; /* [NW][16] */
            float *ml = mm + NW * 16;     /* [NW][16] */
            if (NW > 1)
                __syncthreads(); /* every warp is done with its stages */
#pragma unroll
            for (int nq = 0; nq < NQ; nq++)
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const int h = 8 * nq + 2 * tq + c;
                    if (h >= group)
                        continue;
                    float *dst = NW == 1 ? a.part_o + ((row0 + h) * splits + split) * D
                                         : mo + (warp * 16 + h) * D;
#pragma unroll
                    for (int dt = 0; dt < KS; dt++) {
                        dst[16 * dt + g] = o[dt][nq][c];
                        dst[16 * dt + g + 8] = o[dt][nq][c + 2];
                    }
                    if (g == 0) {
                        if (NW == 1) {
                            a.part_ml[(row0 + h) * splits + split] =
                                make_float2(m[nq][c], l[nq][c]);
                        } else {
                            mm[warp * 16 + h] = m[nq][c];
                            ml[warp * 16 + h] = l[nq][c];
                        }
                    }
                }
            if (NW > 1) {
                __syncthreads();
                for (int c = threadIdx.x; c < group * D / 4; c += NW * 32) {
                    const int r = c / (D / 4), d = (c - r * (D / 4)) * 4;
                    float mx = -INFINITY;
#pragma unroll
                    for (int w = 0; w < NW; w++)
                        mx = fmaxf(mx, mm[w * 16 + r]);
                    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    float sum = 0.0f;
#pragma unroll
                    for (int w = 0; w < NW; w++) {
                        const float mw = mm[w * 16 + r];
                        const float wt = mw == -INFINITY ? 0.0f : exp2f(mw - mx);
                        const float4 ow = *(const float4 *)&mo[(w * 16 + r) * D + d];
                        sum += wt * ml[w * 16 + r];
                        acc.x += wt * ow.x;
                        acc.y += wt * ow.y;
                        acc.z += wt * ow.z;
                        acc.w += wt * ow.w;
                    }
                    if (direct) {
                        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
                        uint2 packed = make_uint2(pack_bf16x2(acc.x * inv, acc.y * inv),
                                                  pack_bf16x2(acc.z * inv, acc.w * inv));
                        *(uint2 *)(a.out + (row0 + r) * D + d) = packed;
                    } else {
                        *(float4 *)&a.part_o[((row0 + r) * splits + split) * D + d] = acc;
                        if (d == 0)
                            a.part_ml[(row0 + r) * splits + split] = make_float2(mx, sum);
                    }
                }
            }
        }
    }
    if (direct || !a.counters)
        return;

    /* The last of the active CTAs of this (token, KV head) merges their splits. */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        int *cnt = a.counters + (int64_t)t * a.num_kv_heads + kvh;
        is_last = atomicAdd(cnt, 1) == active - 1;
        if (is_last)
            *cnt = 0; /* every CTA of this launch has counted: ready for the next */
    }
    __syncthreads();
    if (!is_last)
        return;
    __threadfence();
    for (int c = threadIdx.x; c < group * D / 4; c += NW * 32) {
        const int r = c / (D / 4), d = (c - r * (D / 4)) * 4;
        const float2 *pml = a.part_ml + (row0 + r) * splits;
        const float *po = a.part_o + (row0 + r) * splits * D + d;
        float mx = -INFINITY;
        for (int s = 0; s < active; s++)
            mx = fmaxf(mx, __ldcg(&pml[s]).x);
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        float sum = 0.0f;
#pragma unroll 4
        for (int s = 0; s < active; s++) {
            const float2 ms = __ldcg(&pml[s]);
            const float wt = ms.x == -INFINITY ? 0.0f : exp2f(ms.x - mx);
            const float4 os = __ldcg((const float4 *)(po + (int64_t)s * D));
            sum += wt * ms.y;
            acc.x += wt * os.x;
            acc.y += wt * os.y;
            acc.z += wt * os.z;
            acc.w += wt * os.w;
        }
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        *(uint2 *)(a.out + (row0 + r) * D + d) = make_uint2(pack_bf16x2(acc.x * inv, acc.y * inv),
                                                            pack_bf16x2(acc.z * inv, acc.w * inv));
    }
}

/* ---- Decode attention by TMA tensor copies: one warp, one split, RoPE ----
 *
 * attention_decode_kernel's one-warp, one-split form with RoPE (the plan past
 * 64 rows), for head_dim 64, its tiles copied by the TMA unit instead of the
 * lanes' cp.async: lane 0 issues one tensor copy a 2 KB cache block of K or
 * of V (box: 16 rows of 64 dims of the cache seen as [blocks * KV heads * 16
 * rows][64]), counted off the stage's mbarrier. The 128-byte swizzle of the
 * tensor map puts 16-byte chunk c of row r at chunk c ^ (r & 7): the stages'
 * layout (decode_layout) in 1024-byte aligned stages, so decode_tile reads
 * them as before. Keys past the context: K rows give scores that the mask
 * drops; V rows are zeroed after the copy lands (0 * NaN would leak).
 *
 * Why: the lanes no longer issue 16 copies a tile each, and bulk copies draw
 * less power for the same bytes, which matters where a step runs at the
 * card's power cap. With fewer CTAs an SM the cp.async kernel is faster:
 * folio_k_attention_decode_plan's tma says where this one runs. (Loading the
 * tiles straight into registers as MMA fragments was slower than either.) */
constexpr int TMA_ST = 2;                    /* stages, as the one-warp cp.async kernel */
constexpr int TMA_BLOCK_BYTES = 16 * 64 * 2; /* one cache block of one head, K or V */
static_assert(FOLIO_KV_BLOCK_SIZE == 16, "a TMA copy's box is one 16-row cache block");

/* 16 rows from the cache (map) at row into dst, completing on bar; the lines
 * marked first to leave the L2: a layer's K/V is read once a step and would
 * otherwise push out what the next kernels read. */
__device__ __forceinline__ void tma_copy_rows(void *dst, const CUtensorMap *map, int row,
                                              uint64_t *bar)
{
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_addr(dst)),
                 "l"((uint64_t)map), "r"(0), "r"(row), "r"(smem_addr(bar)), "l"(policy)
                 : "memory");
}

template <int NQ, int ROPE>
__global__ void __launch_bounds__(32)
    attention_decode_tma_kernel(decode_args a, const uint32_t *rope_cos_sin,
                                struct folio_k_row_norm norm, struct folio_k_l2_drop drop,
                                const __grid_constant__ CUtensorMap kmap,
                                const __grid_constant__ CUtensorMap vmap)
{
    constexpr int D = 64, KS = D / 16, BK = FOLIO_KV_BLOCK_SIZE, LD = decode_layout<D>::LD;
    constexpr bool NORM = ROPE == QKV_ROPE_NORM;
    static_assert(ROPE != QKV_ROTATED, "the kernel makes the new key itself");
    extern __shared__ __align__(1024) unsigned char smem_tma[];
    /* 1024-byte aligned stages (the swizzle's period), the barriers after them */
    folio_bf16_bits *stage0 =
        (folio_bf16_bits *)(smem_tma + ((1024 - (smem_addr(smem_tma) & 1023)) & 1023));
    uint64_t *bar = (uint64_t *)(stage0 + TMA_ST * 2 * KT * LD);

    pdl_trigger();
    const int t = blockIdx.x, kvh = blockIdx.y, lane = threadIdx.x, g = lane >> 2;
    const int group = a.num_heads / a.num_kv_heads;
    const int pos = a.b.token_pos[t]; /* -1: padding row, no keys, zeros out */
    const int n_keys = max(pos, 0); /* keys from the cache: the new one is scored from registers */
    const int tiles = (n_keys + KT - 1) / KT;
    const int n_blocks = (n_keys + BK - 1) / BK;
    /* Lane i holds the id of block i of the current run of 32 (16 tiles), and
     * of the next run, read a run ahead. */
    const int32_t *table = a.b.block_tables + (int64_t)a.b.token_seq[t] * a.b.block_stride;
    int32_t blk = lane < n_blocks ? table[lane] : 0;
    int32_t blk_next = 32 + lane < n_blocks ? table[32 + lane] : 0;
    const int32_t new_block = pos >= 0 ? table[pos / BK] : 0;
    if (lane == 0) {
#pragma unroll
        for (int s = 0; s < TMA_ST; s++)
            mbar_init(&bar[s], 1);
        mbar_init_fence();
    }
    __syncwarp();
    pdl_wait();
    l2_discard_dead(drop, blockIdx.x + (int64_t)gridDim.x * blockIdx.y,
                    (int64_t)gridDim.x * gridDim.y, lane, 32);

    rope_inputs<D, NQ, NORM> in;
    in.load(a, rope_cos_sin, norm, t, kvh, group, pos, pos >= 0, lane);

    /* Tile j into stage j % TMA_ST: its live blocks, K then V. */
    auto load = [&](int j) {
        if (j % 16 == 0 && j > 0) {
            blk = blk_next;
            const int next = 32 * (j / 16 + 1) + lane;
            blk_next = next < n_blocks ? table[next] : 0;
        }
        const int32_t b0 = __shfl_sync(0xffffffffu, blk, (2 * j) % 32);
        const int32_t b1 = __shfl_sync(0xffffffffu, blk, (2 * j) % 32 + 1);
        if (lane == 0) {
            folio_bf16_bits *ks = stage0 + (size_t)(j % TMA_ST) * 2 * KT * LD;
            const bool second = j * KT + BK < n_keys;
            uint64_t *b = &bar[j % TMA_ST];
            /* the warp's reads of the stage (ordered before by the caller's
             * __syncwarp) before the async proxy writes it again */
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            mbar_arrive_expect_tx(b, (second ? 4 : 2) * TMA_BLOCK_BYTES);
            const int r0 = (b0 * a.num_kv_heads + kvh) * BK, r1 = (b1 * a.num_kv_heads + kvh) * BK;
            tma_copy_rows(ks, &kmap, r0, b);
            tma_copy_rows(ks + KT * LD, &vmap, r0, b);
            if (second) {
                tma_copy_rows(ks + BK * LD, &kmap, r1, b);
                tma_copy_rows(ks + (KT + BK) * LD, &vmap, r1, b);
            }
        }
    };
#pragma unroll
    for (int j = 0; j < TMA_ST; j++)
        if (j < tiles)
            load(j);

    uint32_t qb[NQ][KS][2];
    float inv = 1.0f;
    if (NORM && pos >= 0)
        inv = in.inv_rms(norm, t, lane);
#pragma unroll
    for (int nq = 0; nq < NQ; nq++)
        in.q_operand(nq, 8 * nq + g < group && pos >= 0, inv, qb[nq]);
    float o[KS][NQ][4], m[NQ][2], l[NQ][2];
    const float scale_log2 = attention_scale_log2<D>();
    if (pos >= 0) {
        const auto nkv = in.final_kv(lane, inv);
        in.write_new_kv(a, kvh, pos, new_block, lane, nkv);
        if (drop.input)
            drop_qkv_lines<D>(a, t, kvh, group, lane);
        rope_inputs<D, NQ, NORM>::new_key_start(nkv, qb, scale_log2, o, m, l, lane);
    } else {
        decode_start<D, NQ>(o, m, l);
    }
    for (int j = 0; j < tiles; j++) {
        folio_bf16_bits *ks = stage0 + (size_t)(j % TMA_ST) * 2 * KT * LD;
        mbar_wait(&bar[j % TMA_ST], (j / TMA_ST) & 1);
        const int kbase = j * KT;
        if (kbase + KT > n_keys) { /* V rows past the context (unwritten, or a block not copied) */
            uint4 *vs = (uint4 *)(ks + KT * LD);
            for (int c = (n_keys - kbase) * (D / 8) + lane; c < KT * (D / 8); c += 32)
                vs[c] = make_uint4(0, 0, 0, 0);
            /* before a later copy into this stage (the async proxy) */
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            __syncwarp();
        }
        decode_tile<D, NQ>(ks, ks + KT * LD, qb, o, m, l, kbase, n_keys, scale_log2);
        __syncwarp(); /* every lane is done with this stage */
        if (j + TMA_ST < tiles)
            load(j + TMA_ST);
    }
    sum_head_lanes<NQ>(l);
    store_direct<D, NQ>(a.out, (int64_t)t * a.num_heads + kvh * group, group, o, l, lane);
}

constexpr size_t tma_smem_bytes()
{
    return 1024 + (size_t)TMA_ST * 2 * KT * 64 * sizeof(folio_bf16_bits) +
           TMA_ST * sizeof(uint64_t);
}

/* Tensor maps of the caches: [rows][64] bf16, 16-row boxes, 128-byte swizzle.
 * The kernel's API passes a cache's base, not its size: the map's extent is a
 * bound no cache reaches (copies only ever name blocks of the block tables).
 * Encoded once a base (the layers' caches), kept for the process. */
static const CUtensorMap *cache_map(const folio_bf16_bits *base)
{
    struct entry {
        const void *base;
        CUtensorMap map;
    };
    static entry maps[256];
    static int n_maps = 0;
    static std::mutex lock;
    std::lock_guard<std::mutex> held(lock);
    for (int i = 0; i < n_maps; i++)
        if (maps[i].base == base)
            return &maps[i].map;
    PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (!encode || n_maps == 256 || (uintptr_t)base % 16 != 0)
        return NULL;
    cuuint64_t dims[2] = {64, (cuuint64_t)1 << 30};
    cuuint64_t strides[1] = {64 * 2};
    cuuint32_t box[2] = {64, 16};
    cuuint32_t elem[2] = {1, 1};
    entry &e = maps[n_maps];
    if (encode(&e.map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base, dims, strides, box, elem,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return NULL;
    e.base = base;
    return &maps[n_maps++].map;
}

/* Merges the split partials of one (token, head) row when the decode kernel
 * leaves it to a second launch: one CTA of D threads; warp 0 turns the active
 * splits' (max, sum) into weights (<= 32, one per lane), then each thread sums
 * its output dimension over them with independent loads. Rows with at most one
 * active split were written by the decode kernel. */
template <int D>
__global__ void combine_kernel(folio_bf16_bits *out, const float *part_o, const float2 *part_ml,
                               struct folio_k_batch b, int num_heads, int splits, int nw)
{
    __shared__ float w_s[32];
    __shared__ float sum_s;
    pdl_trigger();
    const int64_t row = blockIdx.x; /* the step's metadata: readable before the wait */
    const int t = (int)(row / num_heads), d = threadIdx.x;
    const split_layout sl(b.token_pos[t], splits, nw);
    if (sl.active <= 1)
        return;
    pdl_wait();
    /* Every split's value of this dimension is loaded before the weights are
     * formed, so the partials and their (max, sum) cost one round trip. */
    const float *po = part_o + row * splits * D + d;
    float v[MAX_SPLITS];
#pragma unroll
    for (int s = 0; s < MAX_SPLITS; s++)
        v[s] = s < sl.active ? po[(int64_t)s * D] : 0.0f;
    if (threadIdx.x < 32) {
        float2 ml = threadIdx.x < sl.active ? part_ml[row * splits + threadIdx.x]
                                            : make_float2(-INFINITY, 0.0f);
        float mmax = warp_max(ml.x);
        float w = mmax == -INFINITY || ml.x == -INFINITY ? 0.0f : exp2f(ml.x - mmax);
        float sum = warp_sum(w * ml.y);
        w_s[threadIdx.x] = w;
        if (threadIdx.x == 0)
            sum_s = sum;
    }
    __syncthreads();
    float acc = 0.0f;
#pragma unroll
    for (int s = 0; s < MAX_SPLITS; s++)
        if (s < sl.active)
            acc += w_s[s] * v[s];
    const float sum = sum_s;
    out[row * D + d] = f32_to_bf16(sum > 0.0f ? acc / sum : 0.0f);
}

template <int D> static int smem_d(int warps)
{
    return (int)(warps == 1 ? decode_smem_bytes<D, 1>() : decode_smem_bytes<D, 4>());
}

extern "C" struct folio_k_decode_plan folio_k_attention_decode_plan(int num_tokens,
                                                                    int num_kv_heads, int head_dim,
                                                                    int num_sms, int warps_per_sm,
                                                                    int cta_warps, int pdl)
{
    struct folio_k_decode_plan p = {1, 1, 0, 0};
    const int base = num_tokens * num_kv_heads;
    if (base <= 0 || (head_dim != 64 && head_dim != 128))
        return p;
    /* PDL steps (batch 1-2 on the GEMV path): one-warp CTAs and the combine
     * kernel, which PDL starts early (faster there than 4-warp CTAs merging in
     * the last CTA). Otherwise four warps
     * a CTA while every CTA fits on the chip at once; past that one warp a CTA
     * keeps the most warps resident (shared memory is the limit). */
    const int smem4 = head_dim == 64 ? smem_d<64>(4) : smem_d<128>(4);
    p.combine = pdl != 0;
    p.warps = cta_warps == 1 || cta_warps == 4       ? cta_warps
              : pdl                                  ? 1
              : base <= SMEM_LIMIT / smem4 * num_sms ? 4
                                                     : 1;
    /* Once the keys are split at all (their partials and merge paid), one
     * more warp an SM's worth of splits: the extra split costs little more. */
    const int per_split = base * p.warps;
    int s = (warps_per_sm * num_sms + per_split - 1) / per_split;
    if (s >= 2)
        s = ((warps_per_sm + 1) * num_sms + per_split - 1) / per_split;
    p.splits = s < 1 ? 1 : s > MAX_SPLITS ? MAX_SPLITS : s;
    /* TMA copies once one-warp CTAs crowd the SMs (more than 4 an SM); with
     * fewer the cp.async copies win. */
    p.tma = head_dim == 64 && p.warps == 1 && p.splits == 1 && base > 4 * num_sms;
    return p;
}

extern "C" size_t folio_k_attention_decode_workspace_bytes(int num_tokens,
                                                           struct folio_k_decode_plan p,
                                                           int num_heads, int head_dim)
{
    if (p.splits <= 1)
        return 0;
    size_t rows = (size_t)num_tokens * num_heads * p.splits;
    return rows * (sizeof(float) * head_dim + sizeof(float2));
}

template <int D, int NW, int NQ, int ROPE> static cudaError_t prepare_kernel()
{
    cudaError_t e = cudaFuncSetAttribute(attention_decode_kernel<D, NW, NQ, ROPE>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)decode_smem_bytes<D, NW>());
    if (e == cudaSuccess && folio_k_smem_carveout() >= 0)
        e = cudaFuncSetAttribute(attention_decode_kernel<D, NW, NQ, ROPE>,
                                 cudaFuncAttributePreferredSharedMemoryCarveout,
                                 folio_k_smem_carveout());
    return e;
}

template <typename K> static cudaError_t prepare_tma(K kernel)
{
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)tma_smem_bytes());
    if (e == cudaSuccess && folio_k_smem_carveout() >= 0)
        e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 folio_k_smem_carveout());
    return e;
}

template <int D, int NW, int NQ> static cudaError_t prepare_one()
{
    cudaError_t e = prepare_kernel<D, NW, NQ, QKV_ROTATED>();
    e = e == cudaSuccess ? prepare_kernel<D, NW, NQ, QKV_ROPE>() : e;
    e = e == cudaSuccess ? prepare_kernel<D, NW, NQ, QKV_ROPE_NORM>() : e;
    if constexpr (D == 64 && NW == 1) {
        e = e == cudaSuccess ? prepare_tma(attention_decode_tma_kernel<NQ, QKV_ROPE>) : e;
        e = e == cudaSuccess ? prepare_tma(attention_decode_tma_kernel<NQ, QKV_ROPE_NORM>) : e;
    }
    return e;
}

/* NQ: n-tiles of 8 query heads (groups of up to 8, or of 16). */
template <int D> static cudaError_t prepare_d()
{
    cudaError_t e = prepare_one<D, 1, 1>();
    e = e == cudaSuccess ? prepare_one<D, 4, 1>() : e;
    e = e == cudaSuccess ? prepare_one<D, 1, 2>() : e;
    return e == cudaSuccess ? prepare_one<D, 4, 2>() : e;
}

extern "C" cudaError_t folio_k_attention_prepare(int head_dim)
{
    cudaError_t e = folio_k_attention_prefill_prepare(head_dim);
    if (e != cudaSuccess)
        return e;
    return head_dim == 64 ? prepare_d<64>() : prepare_d<128>();
}

template <int D, int NW, int NQ>
static cudaError_t launch(const decode_args &a, const uint32_t *rope_cos_sin,
                          const struct folio_k_row_norm &norm, const struct folio_k_l2_drop &drop,
                          int splits, bool tma, bool pdl, cudaStream_t s)
{
    dim3 grid(a.b.num_tokens, a.num_kv_heads, splits);
    if constexpr (D == 64 && NW == 1) {
        const CUtensorMap *km = tma && splits == 1 && rope_cos_sin ? cache_map(a.k_cache) : NULL;
        const CUtensorMap *vm = km ? cache_map(a.v_cache) : NULL;
        if (vm)
            return norm.x
                       ? launch_pdl(attention_decode_tma_kernel<NQ, QKV_ROPE_NORM>, grid, dim3(32),
                                    tma_smem_bytes(), s, pdl, a, rope_cos_sin, norm, drop, *km, *vm)
                       : launch_pdl(attention_decode_tma_kernel<NQ, QKV_ROPE>, grid, dim3(32),
                                    tma_smem_bytes(), s, pdl, a, rope_cos_sin, norm, drop, *km,
                                    *vm);
    }
    const size_t smem = decode_smem_bytes<D, NW>();
    if (!rope_cos_sin)
        return launch_pdl(attention_decode_kernel<D, NW, NQ, QKV_ROTATED>, grid, dim3(NW * 32),
                          smem, s, pdl, a, rope_cos_sin, norm, drop);
    if (!norm.x)
        return launch_pdl(attention_decode_kernel<D, NW, NQ, QKV_ROPE>, grid, dim3(NW * 32), smem,
                          s, pdl, a, rope_cos_sin, norm, drop);
    return launch_pdl(attention_decode_kernel<D, NW, NQ, QKV_ROPE_NORM>, grid, dim3(NW * 32), smem,
                      s, pdl, a, rope_cos_sin, norm, drop);
}

template <int D>
static cudaError_t launch_d(const decode_args &a, const uint32_t *rope_cos_sin,
                            const struct folio_k_row_norm &norm, const struct folio_k_l2_drop &drop,
                            struct folio_k_decode_plan p, bool pdl, cudaStream_t s)
{
    if (a.num_heads / a.num_kv_heads <= 8)
        return p.warps == 1 ? launch<D, 1, 1>(a, rope_cos_sin, norm, drop, p.splits, p.tma, pdl, s)
                            : launch<D, 4, 1>(a, rope_cos_sin, norm, drop, p.splits, p.tma, pdl, s);
    return p.warps == 1 ? launch<D, 1, 2>(a, rope_cos_sin, norm, drop, p.splits, p.tma, pdl, s)
                        : launch<D, 4, 2>(a, rope_cos_sin, norm, drop, p.splits, p.tma, pdl, s);
}

extern "C" cudaError_t folio_k_attention_decode(
    folio_bf16_bits *out, const folio_bf16_bits *qkv, folio_bf16_bits *k_cache,
    folio_bf16_bits *v_cache, struct folio_k_batch b, struct folio_k_decode_plan p, void *workspace,
    int *counters, int num_heads, int num_kv_heads, int head_dim, const uint32_t *rope_cos_sin,
    struct folio_k_row_norm norm, struct folio_k_l2_drop drop, int pdl, cudaStream_t s)
{
    if (b.num_tokens <= 0)
        return cudaSuccess;
    if (folio_k_attention_tile_tokens(num_heads, num_kv_heads, head_dim) <= 0 || p.splits < 1 ||
        p.splits > MAX_SPLITS || (p.warps != 1 && p.warps != 4) ||
        (p.splits > 1 && (!workspace || (!p.combine && !counters))) ||
        (norm.x && (!rope_cos_sin || norm.hidden % 8 != 0)))
        return cudaErrorInvalidValue;
    decode_args a = {};
    a.out = out;
    a.qkv = qkv;
    a.k_cache = k_cache;
    a.v_cache = v_cache;
    a.b = b;
    a.num_heads = num_heads;
    a.num_kv_heads = num_kv_heads;
    if (p.splits > 1) {
        size_t rows = (size_t)b.num_tokens * num_heads * p.splits;
        a.part_o = (float *)workspace;
        a.part_ml = (float2 *)(a.part_o + rows * head_dim);
        a.counters = p.combine ? NULL : counters;
    }
    if (((uintptr_t)drop.dead & 127) != 0)
        return cudaErrorInvalidValue;
    cudaError_t e = head_dim == 64 ? launch_d<64>(a, rope_cos_sin, norm, drop, p, pdl != 0, s)
                                   : launch_d<128>(a, rope_cos_sin, norm, drop, p, pdl != 0, s);
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e != cudaSuccess || p.splits == 1 || !p.combine)
        return e;
    dim3 grid((unsigned)(b.num_tokens * num_heads));
    e = head_dim == 64 ? launch_pdl(combine_kernel<64>, grid, dim3(64), 0, s, pdl != 0, out,
                                    (const float *)a.part_o, (const float2 *)a.part_ml, b,
                                    num_heads, p.splits, p.warps)
                       : launch_pdl(combine_kernel<128>, grid, dim3(128), 0, s, pdl != 0, out,
                                    (const float *)a.part_o, (const float2 *)a.part_ml, b,
                                    num_heads, p.splits, p.warps);
    return e != cudaSuccess ? e : cudaGetLastError();
}
