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
 * the same work with TMA tensor copies where one-warp CTAs crowd the SMs.
 * F8 (--kv-cache-dtype fp8, ROPE off): the caches hold e4m3 codes; every tile
 * is copied after the wait, widened into a bf16 tile per warp (kv_fp8.cuh),
 * and kv_scale's K and V scales go on the scores and the output. */
#include "folio_kv_fp8.h"
#include "attention_decode.cuh"

template <int D, int NW, int NQ, int ROPE, bool F8 = false>
__global__ void __launch_bounds__(NW * 32)
    attention_decode_kernel(decode_args a, const uint32_t *rope_cos_sin,
                            struct folio_k_row_norm norm, struct folio_k_l2_drop drop,
                            float2 kv_scale)
{
    static_assert(!F8 || ROPE == QKV_ROTATED, "the fp8 cache is written by the RoPE kernel");
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
        uint8_t *const stage8 = (uint8_t *)smem_kv + (size_t)warp * decode_warp_bytes8<D, NW>();
        folio_bf16_bits *const tile8 = (folio_bf16_bits *)(stage8 + ST * 2 * KT * D);
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
            if constexpr (F8) {
                uint8_t *k8 = stage8 + (size_t)(j % ST) * 2 * KT * D;
                kv8_load_blocks<D, KT>(k8, k8 + KT * D, (const uint8_t *)a.k_cache,
                                       (const uint8_t *)a.v_cache, blocks, kvh, a.num_kv_heads,
                                       (t_begin + warp + j * NW) * KT, n_keys, lane, 32);
            } else {
                folio_bf16_bits *ks = stage0 + (size_t)(j % ST) * 2 * KT * LD;
                attention_load_blocks<D, KT, true>(
                    ks, ks + KT * LD, a.k_cache, a.v_cache, blocks, kvh, a.num_kv_heads,
                    (t_begin + warp + j * NW) * KT, n_keys, lane, 32, skip);
            }
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
        if (!ROPE && !F8)
            load_first(pos);
        int pos_j = -1; /* which of the first ST tiles holds key pos (copied) */
#pragma unroll
        for (int j = 0; j < ST; j++) {
            const int kb = (t_begin + warp + j * NW) * KT;
            if (!F8 && !new_key_in_regs && j < mine && kb <= pos && pos < kb + KT)
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
        } else if (F8) { /* every tile after the wait; an empty group where the pos row's is */
            load_first(-1);
            cp_async_commit();
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
        const float scale_log2 = attention_scale_log2<D>() * (F8 ? kv_scale.x : 1.0f);
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
            if constexpr (F8) { /* the stage's codes into the warp's bf16 tile */
                const uint8_t *k8 = stage8 + (size_t)(j % ST) * 2 * KT * D;
                kv8_widen<D, KT, decode_layout<D>>(tile8, tile8 + KT * LD, k8, k8 + KT * D, lane,
                                                   32);
                __syncwarp();
                ks = tile8;
            }
            const int kbase = (t_begin + warp + j * NW) * KT;
            decode_tile<D, NQ>(ks, ks + KT * LD, qb, o, m, l, kbase, n_keys, scale_log2);
            __syncwarp(); /* this stage is free for tile j + ST */
            if (j + ST < mine)
                load(j + ST, -1);
            cp_async_commit();
        }
        if (F8) /* V's scale: the output and the partials are linear in o */
#pragma unroll
            for (int dt = 0; dt < KS; dt++)
#pragma unroll
                for (int nq = 0; nq < NQ; nq++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        o[dt][nq][e] *= kv_scale.y;
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

#include "attention_decode_tma.cuh"

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

template <int D, int NW, int NQ, int ROPE, bool F8 = false> static cudaError_t prepare_kernel()
{
    cudaError_t e = cudaFuncSetAttribute(attention_decode_kernel<D, NW, NQ, ROPE, F8>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)decode_smem_bytes<D, NW, F8>());
    if (e == cudaSuccess && folio_k_smem_carveout() >= 0)
        e = cudaFuncSetAttribute(attention_decode_kernel<D, NW, NQ, ROPE, F8>,
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

/* The fp8 variants (no RoPE) of every CTA shape and group size. */
template <int D> static cudaError_t prepare_fp8_d()
{
    cudaError_t e = prepare_kernel<D, 1, 1, QKV_ROTATED, true>();
    e = e == cudaSuccess ? prepare_kernel<D, 4, 1, QKV_ROTATED, true>() : e;
    e = e == cudaSuccess ? prepare_kernel<D, 1, 2, QKV_ROTATED, true>() : e;
    return e == cudaSuccess ? prepare_kernel<D, 4, 2, QKV_ROTATED, true>() : e;
}

extern "C" cudaError_t folio_k_attention_fp8_prepare(int head_dim)
{
    cudaError_t e = folio_k_attention_prefill_fp8_prepare(head_dim);
    if (e != cudaSuccess)
        return e;
    return head_dim == 64 ? prepare_fp8_d<64>() : prepare_fp8_d<128>();
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
    const float2 unit = make_float2(1.0f, 1.0f); /* kv_scale, read by the F8 kernels alone */
    if (!rope_cos_sin)
        return launch_pdl(attention_decode_kernel<D, NW, NQ, QKV_ROTATED>, grid, dim3(NW * 32),
                          smem, s, pdl, a, rope_cos_sin, norm, drop, unit);
    if (!norm.x)
        return launch_pdl(attention_decode_kernel<D, NW, NQ, QKV_ROPE>, grid, dim3(NW * 32), smem,
                          s, pdl, a, rope_cos_sin, norm, drop, unit);
    return launch_pdl(attention_decode_kernel<D, NW, NQ, QKV_ROPE_NORM>, grid, dim3(NW * 32), smem,
                      s, pdl, a, rope_cos_sin, norm, drop, unit);
}

/* The fp8 kernel of the plan's CTA shape and the group's n-tiles. */
template <int D>
static cudaError_t launch_fp8_d(const decode_args &a, struct folio_k_decode_plan p, float2 kv_scale,
                                bool pdl, cudaStream_t s)
{
    const struct folio_k_row_norm norm = {NULL, 0, 0.0f};
    const struct folio_k_l2_drop drop = {NULL, 0, 0};
    dim3 grid(a.b.num_tokens, a.num_kv_heads, p.splits);
    const bool nq1 = a.num_heads / a.num_kv_heads <= 8;
    if (p.warps == 1)
        return nq1 ? launch_pdl(attention_decode_kernel<D, 1, 1, QKV_ROTATED, true>, grid, dim3(32),
                                decode_smem_bytes<D, 1, true>(), s, pdl, a, (const uint32_t *)NULL,
                                norm, drop, kv_scale)
                   : launch_pdl(attention_decode_kernel<D, 1, 2, QKV_ROTATED, true>, grid, dim3(32),
                                decode_smem_bytes<D, 1, true>(), s, pdl, a, (const uint32_t *)NULL,
                                norm, drop, kv_scale);
    return nq1 ? launch_pdl(attention_decode_kernel<D, 4, 1, QKV_ROTATED, true>, grid, dim3(128),
                            decode_smem_bytes<D, 4, true>(), s, pdl, a, (const uint32_t *)NULL,
                            norm, drop, kv_scale)
               : launch_pdl(attention_decode_kernel<D, 4, 2, QKV_ROTATED, true>, grid, dim3(128),
                            decode_smem_bytes<D, 4, true>(), s, pdl, a, (const uint32_t *)NULL,
                            norm, drop, kv_scale);
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

/* folio_k_attention_decode's checks, arguments and merge around the launch of the bf16 kernels
 * (f8 false) or the fp8 ones. */
static cudaError_t decode_any(folio_bf16_bits *out, const folio_bf16_bits *qkv, const void *k_cache,
                              const void *v_cache, struct folio_k_batch b,
                              struct folio_k_decode_plan p, void *workspace, int *counters,
                              int num_heads, int num_kv_heads, int head_dim,
                              const uint32_t *rope_cos_sin, struct folio_k_row_norm norm,
                              struct folio_k_l2_drop drop, bool f8, float2 kv_scale, int pdl,
                              cudaStream_t s)
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
    a.k_cache = (const folio_bf16_bits *)k_cache; /* e4m3 codes for the fp8 kernels */
    a.v_cache = (const folio_bf16_bits *)v_cache;
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
    cudaError_t e;
    if (f8)
        e = head_dim == 64 ? launch_fp8_d<64>(a, p, kv_scale, pdl != 0, s)
                           : launch_fp8_d<128>(a, p, kv_scale, pdl != 0, s);
    else
        e = head_dim == 64 ? launch_d<64>(a, rope_cos_sin, norm, drop, p, pdl != 0, s)
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

extern "C" cudaError_t folio_k_attention_decode(
    folio_bf16_bits *out, const folio_bf16_bits *qkv, folio_bf16_bits *k_cache,
    folio_bf16_bits *v_cache, struct folio_k_batch b, struct folio_k_decode_plan p, void *workspace,
    int *counters, int num_heads, int num_kv_heads, int head_dim, const uint32_t *rope_cos_sin,
    struct folio_k_row_norm norm, struct folio_k_l2_drop drop, int pdl, cudaStream_t s)
{
    return decode_any(out, qkv, k_cache, v_cache, b, p, workspace, counters, num_heads,
                      num_kv_heads, head_dim, rope_cos_sin, norm, drop, false,
                      make_float2(1.0f, 1.0f), pdl, s);
}

extern "C" cudaError_t
folio_k_attention_decode_fp8(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                             const uint8_t *k_cache, const uint8_t *v_cache, struct folio_k_batch b,
                             struct folio_k_decode_plan p, void *workspace, int *counters,
                             int num_heads, int num_kv_heads, int head_dim, float k_scale,
                             float v_scale, int pdl, cudaStream_t s)
{
    const struct folio_k_row_norm norm = {NULL, 0, 0.0f};
    const struct folio_k_l2_drop drop = {NULL, 0, 0};
    return decode_any(out, qkv, k_cache, v_cache, b, p, workspace, counters, num_heads,
                      num_kv_heads, head_dim, NULL, norm, drop, true, make_float2(k_scale, v_scale),
                      pdl, s);
}
