/* The TMA form of the decode kernel and the tensor maps of the caches it
 * copies from. Included by attention_decode.cu alone, after the cp.async
 * kernel. */
#ifndef FOLIO_ATTENTION_DECODE_TMA_CUH
#define FOLIO_ATTENTION_DECODE_TMA_CUH

#include <mutex>

#include "attention_decode.cuh"
#include "mbarrier.cuh"
#include "tensor_map.cuh"

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

#endif
