/* Paged attention of prefill and mixed batches on the tensor cores
 * (attention_tile.cuh: mma.sync, FlashAttention-2 online softmax), K/V tiles
 * staged in shared memory by cp.async (double-buffered). Works on sm_80 and
 * later, so the portable PTX path keeps it. Decode-only batches take
 * attention_decode.cu.
 *
 * Query rows: a warp owns 16 rows of the product, each row one (query token,
 * query head) pair of one KV head, so the heads that share a KV head (GQA)
 * share every K/V load. Grid = query tiles x KV heads, 8 warps: a tile is up
 * to 128 / group consecutive new tokens of one sequence (host-made list); row
 * r is token r / group, head r % group; the CTA streams the keys
 * 0..pos(last token) once for the whole tile, causal mask per row. F8: the
 * caches hold e4m3 codes (--kv-cache-dtype fp8): the tiles' codes are copied,
 * widened into one bf16 tile (kv_fp8.cuh) and the scales applied outside the
 * products. */
#include "folio_kv_fp8.h"
#include "kv_fp8.cuh"

/* Two stages of K and V tiles; F8: two stages of codes and the one bf16 tile they widen into. */
template <int D, int KT, bool F8 = false> constexpr size_t attention_smem_bytes()
{
    constexpr size_t tile = sizeof(folio_bf16_bits) * 2 /* K, V */ * KT * tile_pitch<D>::value;
    return F8 ? 2 * 2 * KT * D + tile : 2 * tile;
}

template <int D, int NW, int KT, bool F8>
__global__ void __launch_bounds__(NW * 32)
    attention_mma_kernel(folio_bf16_bits *out, const folio_bf16_bits *qkv, const void *k_cache,
                         const void *v_cache, struct folio_k_batch b, const int32_t *tiles,
                         int num_heads, int num_kv_heads, float k_scale, float v_scale)
{
    constexpr int LD = tile_pitch<D>::value;
    constexpr int DT = D / 8;  /* n-tiles of output dims */
    constexpr int KS = D / 16; /* k-steps over head dims */
    extern __shared__ __align__(16) folio_bf16_bits smem_kv[];

    const int group = num_heads / num_kv_heads;
    const int kvh = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tq = lane & 3;
    const int qkv_stride = (num_heads + 2 * num_kv_heads) * D;

    const int t0 = tiles[2 * blockIdx.x], n_tok = tiles[2 * blockIdx.x + 1];
    const int k_end = b.token_pos[t0 + n_tok - 1] + 1;
    const int seq = b.token_seq[t0];
    const int32_t *table = b.block_tables + (int64_t)seq * b.block_stride;

    /* This lane's two rows: g and g + 8 of the warp's 16. */
    int row_pos[2], row_tok[2], row_head[2];
    bool row_live[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int r = warp * 16 + g + 8 * i;
        int tok = r / group, hl = r - tok * group;
        row_live[i] = tok < n_tok;
        row_tok[i] = t0 + (row_live[i] ? tok : 0);
        row_head[i] = kvh * group + hl;
        row_pos[i] = row_live[i] ? b.token_pos[row_tok[i]] : -1;
    }
    int warp_max_pos = max(row_pos[0], row_pos[1]);
    warp_max_pos = max(warp_max_pos, __shfl_xor_sync(0xffffffffu, warp_max_pos, 4));
    warp_max_pos = max(warp_max_pos, __shfl_xor_sync(0xffffffffu, warp_max_pos, 8));
    warp_max_pos = max(warp_max_pos, __shfl_xor_sync(0xffffffffu, warp_max_pos, 16));

    /* Q fragments (A operand, row-major 16 x D), straight from global. */
    uint32_t qa[KS][4];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const uint32_t *q =
            (const uint32_t *)(qkv + (int64_t)row_tok[i] * qkv_stride + (int64_t)row_head[i] * D);
#pragma unroll
        for (int s = 0; s < KS; s++) {
            qa[s][i] = row_live[i] ? q[(16 * s + 2 * tq) / 2] : 0u;
            qa[s][i + 2] = row_live[i] ? q[(16 * s + 8 + 2 * tq) / 2] : 0u;
        }
    }

    float o[DT][4], m[2], l[2];
    const float scale_log2 = attention_start<D>(o, m, l) * k_scale;

    uint8_t *const stage8 = (uint8_t *)smem_kv; /* F8: [2][K, V][KT][D] codes, then the tile */
    folio_bf16_bits *const tile8 = (folio_bf16_bits *)(stage8 + 2 * 2 * KT * D);
    auto load_tile = [&](int kbase, int stage) {
        if constexpr (F8) {
            constexpr int BK = FOLIO_KV_BLOCK_SIZE;
            int32_t blocks[KT / BK];
#pragma unroll
            for (int bi = 0; bi < KT / BK; bi++)
                blocks[bi] = kbase + bi * BK < k_end ? table[(kbase + bi * BK) / BK] : 0;
            uint8_t *k8 = stage8 + (size_t)stage * 2 * KT * D;
            kv8_load_blocks<D, KT>(k8, k8 + KT * D, (const uint8_t *)k_cache,
                                   (const uint8_t *)v_cache, blocks, kvh, num_kv_heads, kbase,
                                   k_end, threadIdx.x, NW * 32);
        } else {
            folio_bf16_bits *ks = smem_kv + (size_t)stage * 2 * KT * LD;
            attention_load_tile<D, KT>(ks, ks + KT * LD, (const folio_bf16_bits *)k_cache,
                                       (const folio_bf16_bits *)v_cache, table, kvh, num_kv_heads,
                                       kbase, k_end, threadIdx.x, NW * 32);
        }
    };

    const int n_tiles = (k_end + KT - 1) / KT;
    if (n_tiles > 0)
        load_tile(0, 0);
    cp_async_commit();
    for (int it = 0; it < n_tiles; it++) {
        const int kbase = it * KT;
        if (it + 1 < n_tiles) {
            load_tile(kbase + KT, (it + 1) & 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if constexpr (F8) { /* the stage's codes into the bf16 tile, read below */
            const uint8_t *k8 = stage8 + (size_t)(it & 1) * 2 * KT * D;
            kv8_widen<D, KT, tile_layout<D, false>>(tile8, tile8 + KT * LD, k8, k8 + KT * D,
                                                    threadIdx.x, NW * 32);
            __syncthreads();
        }
        /* A warp whose rows all sit before this tile (causal) skips it. */
        if (kbase <= warp_max_pos) {
            const folio_bf16_bits *ks = F8 ? tile8 : smem_kv + (size_t)(it & 1) * 2 * KT * LD;
            attention_tile<D, KT>(ks, ks + KT * LD, qa, o, m, l, kbase, k_end, row_pos, scale_log2);
        }
        __syncthreads(); /* this stage is free for the load two tiles ahead */
    }

    /* Row sums live spread over the quad's four lanes. */
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if (!row_live[i])
            continue;
        int64_t row = (int64_t)row_tok[i] * num_heads + row_head[i];
        float inv = l[i] > 0.0f ? v_scale / l[i] : 0.0f;
        uint32_t *dst = (uint32_t *)(out + row * D);
#pragma unroll
        for (int n = 0; n < DT; n++)
            dst[(8 * n + 2 * tq) / 2] = pack_bf16x2(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
    }
}

#define PREFILL_WARPS 8
#define PREFILL_KT 64

static bool mma_shape_ok(int num_heads, int num_kv_heads, int head_dim)
{
    if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0)
        return false;
    /* A group that does not divide the tile's 128 rows leaves its last rows dead (row_live);
     * the decode kernel's n-tiles of 8 heads take up to 16. */
    int group = num_heads / num_kv_heads;
    return (head_dim == 64 || head_dim == 128) && group <= 16;
}

extern "C" int folio_k_attention_tile_tokens(int num_heads, int num_kv_heads, int head_dim)
{
    if (!mma_shape_ok(num_heads, num_kv_heads, head_dim))
        return 0;
    return PREFILL_WARPS * 16 / (num_heads / num_kv_heads);
}

template <int D, bool F8 = false> static cudaError_t prepare_d()
{
    return cudaFuncSetAttribute(attention_mma_kernel<D, PREFILL_WARPS, PREFILL_KT, F8>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)attention_smem_bytes<D, PREFILL_KT, F8>());
}

extern "C" cudaError_t folio_k_attention_prefill_fp8_prepare(int head_dim)
{
    if (head_dim == 64)
        return prepare_d<64, true>();
    if (head_dim == 128)
        return prepare_d<128, true>();
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t folio_k_attention_prefill_prepare(int head_dim)
{
    if (head_dim == 64)
        return prepare_d<64>();
    if (head_dim == 128)
        return prepare_d<128>();
    return cudaErrorInvalidValue;
}

template <int D, bool F8>
static cudaError_t prefill_d(folio_bf16_bits *out, const folio_bf16_bits *qkv, const void *k_cache,
                             const void *v_cache, struct folio_k_batch b, const int32_t *tiles,
                             int num_tiles, int num_heads, int num_kv_heads, float k_scale,
                             float v_scale, cudaStream_t s)
{
    dim3 grid(num_tiles, num_kv_heads);
    attention_mma_kernel<D, PREFILL_WARPS, PREFILL_KT, F8>
        <<<grid, PREFILL_WARPS * 32, attention_smem_bytes<D, PREFILL_KT, F8>(), s>>>(
            out, qkv, k_cache, v_cache, b, tiles, num_heads, num_kv_heads, k_scale, v_scale);
    return cudaGetLastError();
}

template <bool F8>
static cudaError_t prefill_any(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                               const void *k_cache, const void *v_cache, struct folio_k_batch b,
                               const int32_t *tiles, int num_tiles, int num_heads, int num_kv_heads,
                               int head_dim, float k_scale, float v_scale, cudaStream_t s)
{
    if (num_tiles <= 0)
        return cudaSuccess;
    if (!mma_shape_ok(num_heads, num_kv_heads, head_dim))
        return cudaErrorInvalidValue;
    if (head_dim == 64)
        return prefill_d<64, F8>(out, qkv, k_cache, v_cache, b, tiles, num_tiles, num_heads,
                                 num_kv_heads, k_scale, v_scale, s);
    return prefill_d<128, F8>(out, qkv, k_cache, v_cache, b, tiles, num_tiles, num_heads,
                              num_kv_heads, k_scale, v_scale, s);
}

extern "C" cudaError_t folio_k_attention_prefill(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                                 const folio_bf16_bits *k_cache,
                                                 const folio_bf16_bits *v_cache,
                                                 struct folio_k_batch b, const int32_t *tiles,
                                                 int num_tiles, int num_heads, int num_kv_heads,
                                                 int head_dim, cudaStream_t s)
{
    return prefill_any<false>(out, qkv, k_cache, v_cache, b, tiles, num_tiles, num_heads,
                              num_kv_heads, head_dim, 1.0f, 1.0f, s);
}

extern "C" cudaError_t folio_k_attention_prefill_fp8(
    folio_bf16_bits *out, const folio_bf16_bits *qkv, const uint8_t *k_cache,
    const uint8_t *v_cache, struct folio_k_batch b, const int32_t *tiles, int num_tiles,
    int num_heads, int num_kv_heads, int head_dim, float k_scale, float v_scale, cudaStream_t s)
{
    return prefill_any<true>(out, qkv, k_cache, v_cache, b, tiles, num_tiles, num_heads,
                             num_kv_heads, head_dim, k_scale, v_scale, s);
}
