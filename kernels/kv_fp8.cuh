/* The FP8 KV cache's tiles (--kv-cache-dtype fp8): e4m3 codes of x / scale, D bytes a row in the
 * cache's layout [block][KV head][16][D]. The attention kernels copy a tile's codes into shared
 * memory (half the bf16 tile's bytes), widen them there into the bf16 tile their tensor-core
 * math reads, and apply the layer's scales outside the products: K's with the softmax scale,
 * V's on the output. A code widens to bf16 exactly (3 mantissa bits and exponents 2^-9 .. 2^8
 * fit), so the products see the cached values themselves. */
#ifndef FOLIO_KERNELS_KV_FP8_CUH
#define FOLIO_KERNELS_KV_FP8_CUH

#include "attention_tile.cuh"
#include "fp8.cuh"

/* cp.async copies of keys kbase .. kbase + KT - 1 of one KV head (whole cache blocks, ids in
 * blocks[]) into ks8/vs8 ([KT][D] codes), threads first .. first + count - 1 sharing the work;
 * keys at or past k_end are zero-filled (a stale slot may hold a NaN code). */
template <int D, int KT>
__device__ __forceinline__ void
kv8_load_blocks(uint8_t *ks8, uint8_t *vs8, const uint8_t *k_cache, const uint8_t *v_cache,
                const int32_t (&blocks)[KT / FOLIO_KV_BLOCK_SIZE], int kvh, int num_kv_heads,
                int kbase, int k_end, int thread, int count)
{
    constexpr int CHUNKS = D / 16; /* 16-byte chunks a row */
    constexpr int BK = FOLIO_KV_BLOCK_SIZE;
    for (int e = thread; e < KT * CHUNKS; e += count) {
        const int j = e / CHUNKS, c = e % CHUNKS, b = j / BK;
        const bool live = kbase + j < k_end;
        const int64_t off =
            ((int64_t)blocks[b] * num_kv_heads + kvh) * (BK * D) + (int64_t)(j % BK) * D + c * 16;
        cp_async_16((folio_bf16_bits *)(ks8 + j * D + c * 16),
                    (const folio_bf16_bits *)(live ? k_cache + off : k_cache), live ? 16 : 0);
        cp_async_16((folio_bf16_bits *)(vs8 + j * D + c * 16),
                    (const folio_bf16_bits *)(live ? v_cache + off : v_cache), live ? 16 : 0);
    }
}

/* The codes of ks8/vs8 widened into the bf16 tiles ks/vs, laid out as LAYOUT (tile_layout):
 * each 16-byte chunk of codes becomes two 16-byte chunks of bf16. */
template <int D, int KT, typename LAYOUT>
__device__ __forceinline__ void kv8_widen(folio_bf16_bits *ks, folio_bf16_bits *vs,
                                          const uint8_t *ks8, const uint8_t *vs8, int thread,
                                          int count)
{
    constexpr int CHUNKS = D / 16;
    for (int e = thread; e < 2 * KT * CHUNKS; e += count) {
        const bool is_v = e >= KT * CHUNKS;
        const int i = is_v ? e - KT * CHUNKS : e, j = i / CHUNKS, c = i % CHUNKS;
        const uint4 codes = *(const uint4 *)((is_v ? vs8 : ks8) + j * D + c * 16);
        float f[16];
        fp8_unpack16(codes, f);
        uint4 lo, hi;
        lo.x = pack_bf16x2(f[0], f[1]), lo.y = pack_bf16x2(f[2], f[3]);
        lo.z = pack_bf16x2(f[4], f[5]), lo.w = pack_bf16x2(f[6], f[7]);
        hi.x = pack_bf16x2(f[8], f[9]), hi.y = pack_bf16x2(f[10], f[11]);
        hi.z = pack_bf16x2(f[12], f[13]), hi.w = pack_bf16x2(f[14], f[15]);
        folio_bf16_bits *dst = is_v ? vs : ks;
        *(uint4 *)(dst + LAYOUT::at(j, 2 * c)) = lo;
        *(uint4 *)(dst + LAYOUT::at(j, 2 * c + 1)) = hi;
    }
}

/* e4m3(x / scale) of a bf16 value: the code the cache keeps (common/fp8.h's rounding). */
__device__ __forceinline__ uint8_t kv8_code(folio_bf16_bits x, float scale)
{
    return fp8_code(bf16_to_f32(x), scale);
}

#endif
