/* One K/V tile against one warp's 16 query rows on the tensor cores (mma.sync
 * m16n8k16, bf16 in, f32 accumulate), FlashAttention-2 style: S = Q K^T, the
 * mask, the online softmax in the log2 domain, O += P V: the prefill kernel's
 * (attention_mma.cu). The decode kernel (attention_decode.cu) runs the
 * product transposed (decode_tile) and shares the pitch and the K/V loader.
 *
 * Fragment layout (lane = 4 g + tq): the lane holds rows g and g + 8 of the
 * warp's 16; qa[s] is the A operand of head dims 16 s .. 16 s + 15 (registers 0
 * and 2: row g, dims 2 tq, 2 tq + 1 and +8; registers 1 and 3: row g + 8);
 * o[n] holds output dims 8 n + 2 tq, +1 of row g (0, 1) and row g + 8 (2, 3).
 * m and l are each row's running max (log2 domain) and sum; l is spread over
 * the quad's four lanes until the caller adds them up. */
#ifndef FOLIO_KERNELS_ATTENTION_TILE_CUH
#define FOLIO_KERNELS_ATTENTION_TILE_CUH

#include "mma_helpers.cuh"

/* Shared-memory row pitch of a K/V tile: 16 bytes of padding keep the eight
 * rows of each ldmatrix 8x8 block in different banks. */
template <int D> struct tile_pitch {
    static constexpr int value = D + 8;
};

/* Where 16-byte chunk c of row r of a K/V tile lies in shared memory (in
 * values from the tile's start): padded rows (tile_pitch), or, SWIZZLED,
 * unpadded rows with chunk c of row r at chunk c ^ (r & 7), which keeps the
 * eight rows of an ldmatrix block in different banks too. Into padded rows
 * each 128-byte line of the cache lands across two lines of shared memory,
 * which makes the copies slower. */
template <int D, bool SWIZZLED> struct tile_layout {
    static_assert(!SWIZZLED || D % 64 == 0, "a swizzled row is whole 8-chunk groups");
    static constexpr int LD = SWIZZLED ? D : tile_pitch<D>::value; /* values a row */
    static __device__ __forceinline__ int at(int r, int c)
    {
        return r * LD + (SWIZZLED ? c ^ (r & 7) : c) * 8;
    }
};

/* 1 / sqrt(D) in the log2 domain of the online softmax (exp2 of scores times it). */
template <int D> __device__ __forceinline__ float attention_scale_log2()
{
    return rsqrtf((float)D) * 1.4426950408889634f;
}

/* The online softmax's starting state of a warp's rows: no output, running
 * max -inf, running sum 0; the scale of the scores in the log2 domain (taken
 * once, outside the tile loop). */
template <int D>
__device__ __forceinline__ float attention_start(float (&o)[D / 8][4], float (&m)[2], float (&l)[2])
{
#pragma unroll
    for (int n = 0; n < D / 8; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.0f;
    return attention_scale_log2<D>();
}

/* Keys kbase .. kbase + KT - 1 from ks/vs ([KT][pitch], keys past the
 * context zero-filled: a stale cache slot may hold a NaN bit pattern, and
 * 0 * NaN would leak into the output). A key counts for row i when it is
 * below k_end and at most row_pos[i] (causal). */
template <int D, int KT>
__device__ __forceinline__ void
attention_tile(const folio_bf16_bits *ks, const folio_bf16_bits *vs,
               const uint32_t (&qa)[D / 16][4], float (&o)[D / 8][4], float (&m)[2], float (&l)[2],
               int kbase, int k_end, const int (&row_pos)[2], float scale_log2)
{
    constexpr int LD = tile_pitch<D>::value;
    constexpr int NT = KT / 8; /* n-tiles of keys */
    constexpr int DT = D / 8;  /* n-tiles of output dims */
    constexpr int KS = D / 16; /* k-steps over head dims */
    const int lane = threadIdx.x & 31, tq = lane & 3;

    /* S = Q K^T: B operand is K^T, i.e. K rows, non-transposed ldmatrix. */
    float sc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++)
        sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll
    for (int s = 0; s < KS; s++) {
#pragma unroll
        for (int jp = 0; jp < NT / 2; jp++) {
            uint32_t kb[4];
            ldmatrix_x4(kb, ks + (jp * 16 + (lane >> 4) * 8 + (lane & 7)) * LD + s * 16 +
                                ((lane >> 3) & 1) * 8);
            mma_16816(sc[2 * jp], qa[s], kb[0], kb[1]);
            mma_16816(sc[2 * jp + 1], qa[s], kb[2], kb[3]);
        }
    }

    /* Mask, online softmax (log2 domain), P in bf16 for the PV product. A
     * tile that every row of the warp sees whole (inside the context, at or
     * before each row's position) needs no mask. */
    float tile_max[2] = {-INFINITY, -INFINITY};
    const int last = kbase + KT - 1;
    if (__all_sync(0xffffffffu, last < k_end && last <= row_pos[0] && last <= row_pos[1])) {
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                sc[j][e] *= scale_log2;
                tile_max[e >> 1] = fmaxf(tile_max[e >> 1], sc[j][e]);
            }
    } else {
#pragma unroll
        for (int j = 0; j < NT; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int i = e >> 1;
                int key = kbase + 8 * j + 2 * tq + (e & 1);
                bool ok = key < k_end && key <= row_pos[i];
                sc[j][e] = ok ? sc[j][e] * scale_log2 : -INFINITY;
                tile_max[i] = fmaxf(tile_max[i], sc[j][e]);
            }
        }
    }
    float alpha[2], m_use[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
        tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
        float m_new = fmaxf(m[i], tile_max[i]);
        m_use[i] = m_new == -INFINITY ? 0.0f : m_new; /* no -inf - -inf */
        alpha[i] = exp2f(m[i] - m_use[i]);
        m[i] = m_new;
        l[i] *= alpha[i];
    }
#pragma unroll
    for (int n = 0; n < DT; n++) {
        o[n][0] *= alpha[0];
        o[n][1] *= alpha[0];
        o[n][2] *= alpha[1];
        o[n][3] *= alpha[1];
    }
#pragma unroll
    for (int j = 0; j < NT; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float p = exp2f(sc[j][e] - m_use[e >> 1]);
            sc[j][e] = p;
            l[e >> 1] += p;
        }
    }

    /* O += P V: P's C fragments are the A fragments; V via ldmatrix.trans. */
#pragma unroll
    for (int kk = 0; kk < KT / 16; kk++) {
        uint32_t pa[4] = {pack_bf16x2(sc[2 * kk][0], sc[2 * kk][1]),
                          pack_bf16x2(sc[2 * kk][2], sc[2 * kk][3]),
                          pack_bf16x2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                          pack_bf16x2(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
        for (int np = 0; np < DT / 2; np++) {
            uint32_t vb[4];
            ldmatrix_x4_trans(vb, vs + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD +
                                      np * 16 + (lane >> 4) * 8);
            mma_16816(o[2 * np], pa, vb[0], vb[1]);
            mma_16816(o[2 * np + 1], pa, vb[2], vb[3]);
        }
    }
}

/* Issues the cp.async copies of keys kbase .. kbase + KT - 1 of one KV head
 * into ks/vs, threads first .. first + count - 1 of the caller sharing the
 * work; keys at or past k_end are zero-filled. kbase is a multiple of KT and
 * KT of the cache block, so the tile is whole blocks, whose ids the caller
 * passes (blocks[b]: the cache block of keys kbase + b * BK ..; unused for a
 * block at or past k_end): its rows then lie at fixed offsets (redoing the
 * 64-bit address for every 16-byte chunk made this loop half of the decode
 * kernel's instructions). The row of key `skip` (if any) is left alone: the
 * decode kernel copies it later, once the kernel that writes it is done. */
template <int D, int KT, bool SWIZZLED = false>
__device__ __forceinline__ void
attention_load_blocks(folio_bf16_bits *ks, folio_bf16_bits *vs, const folio_bf16_bits *k_cache,
                      const folio_bf16_bits *v_cache,
                      const int32_t (&blocks)[KT / FOLIO_KV_BLOCK_SIZE], int kvh, int num_kv_heads,
                      int kbase, int k_end, int thread, int count, int skip = -1)
{
    using layout = tile_layout<D, SWIZZLED>;
    constexpr int CHUNKS = D / 8; /* 16-byte chunks per K/V row */
    constexpr int BK = FOLIO_KV_BLOCK_SIZE;
    static_assert(KT % BK == 0, "a tile is whole cache blocks");
    const int per = (BK * CHUNKS + count - 1) / count; /* chunks per thread and block */
#pragma unroll
    for (int b = 0; b < KT / BK; b++) {
        const int first = kbase + b * BK;
        const folio_bf16_bits *kb = k_cache, *vb = v_cache;
        if (first < k_end) {
            int64_t off = ((int64_t)blocks[b] * num_kv_heads + kvh) * (BK * D);
            kb += off;
            vb += off;
        }
#pragma unroll
        for (int i = 0; i < per; i++) {
            const int e = thread + i * count;
            if (e >= BK * CHUNKS)
                break;
            const int j = e / CHUNKS, c = e % CHUNKS, src = j * D + c * 8;
            const int dst = layout::at(b * BK + j, c);
            const bool live = first + BK <= k_end || first + j < k_end;
            if (skip >= 0 && first + j == skip)
                continue;
            cp_async_16(ks + dst, live ? kb + src : k_cache, live ? 16 : 0);
            cp_async_16(vs + dst, live ? vb + src : v_cache, live ? 16 : 0);
        }
    }
}

/* attention_load_blocks with the block ids read from the sequence's block table. */
template <int D, int KT>
__device__ __forceinline__ void
attention_load_tile(folio_bf16_bits *ks, folio_bf16_bits *vs, const folio_bf16_bits *k_cache,
                    const folio_bf16_bits *v_cache, const int32_t *table, int kvh, int num_kv_heads,
                    int kbase, int k_end, int thread, int count)
{
    constexpr int BK = FOLIO_KV_BLOCK_SIZE;
    int32_t blocks[KT / BK];
#pragma unroll
    for (int b = 0; b < KT / BK; b++)
        blocks[b] = kbase + b * BK < k_end ? table[(kbase + b * BK) / BK] : 0;
    attention_load_blocks<D, KT>(ks, vs, k_cache, v_cache, blocks, kvh, num_kv_heads, kbase, k_end,
                                 thread, count);
}

#endif
