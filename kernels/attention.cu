/* The reference paged attention over the mixed flattened batch (prefill
 * chunks and decode tokens side by side) with grouped-query heads: simple
 * f32 arithmetic, kept as the fallback for shapes the tensor-core kernels of
 * attention_mma.cu do not take (groups above 16) and as
 * the yardstick in decode_bench.
 *
 * One CTA per (query token, KV head): its warps are the query heads that
 * share that KV head, so each K/V tile is read from memory once for all of
 * them. Keys come in tiles of 32 (two 16-token cache blocks), staged as f32 in
 * shared memory; lane j scores key j, a warp keeps its head's online softmax
 * (running max and sum in f32, FlashAttention-style) and lane l accumulates
 * output dims l, l+32, ... Causality: a token at position p sees keys 0..p,
 * which also covers earlier chunks already in the cache.
 * Each prefill token re-reads its whole context here; attention_mma.cu does not.
 * KV uint8_t: the e4m3 caches of --kv-cache-dtype fp8, each code times its scale. */
#include "folio_kv_fp8.h"
#include "kv_fp8.cuh"

#define TILE 32

/* 8 cached values from element off (16 bytes of bf16, or 8 codes) as floats. */
template <typename KV>
__device__ __forceinline__ void load8(const KV *cache, int64_t off, float (&f)[8])
{
    if constexpr (sizeof(KV) == 1) {
        const uint2 c = *(const uint2 *)(cache + off);
        const __nv_fp8x2_storage_t *p = (const __nv_fp8x2_storage_t *)&c;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 g = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(p[i], __NV_E4M3)));
            f[2 * i] = g.x;
            f[2 * i + 1] = g.y;
        }
    } else {
        const uint4 v = *(const uint4 *)(cache + off);
        const folio_bf16_bits *e = (const folio_bf16_bits *)&v;
#pragma unroll
        for (int i = 0; i < 8; i++)
            f[i] = bf16_to_f32(e[i]);
    }
}

template <int D, typename KV>
__global__ void paged_attention_kernel(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                       const KV *k_cache, const KV *v_cache, struct folio_k_batch b,
                                       int num_heads, int num_kv_heads, float k_scale,
                                       float v_scale)
{
    constexpr int C = D / 32; /* output dims per lane */
    extern __shared__ float smem[];
    int group = num_heads / num_kv_heads;
    float *q_s = smem;                 /* [group][D], pre-scaled */
    float *k_s = q_s + group * D;      /* [TILE][D + 1]: padded, conflict-free by key */
    float *v_s = k_s + TILE * (D + 1); /* [TILE][D] */

    int t = blockIdx.x, kvh = blockIdx.y;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int h = kvh * group + warp;
    int pos = b.token_pos[t];
    folio_bf16_bits *o = out + (int64_t)t * num_heads * D + (int64_t)h * D;
    if (pos < 0) { /* padding row: defined output */
        for (int c = 0; c < C; c++)
            o[lane + 32 * c] = 0;
        return;
    }
    int seq = b.token_seq[t];
    const int32_t *table = b.block_tables + (int64_t)seq * b.block_stride;
    int n_keys = pos + 1;
    int qkv_stride = (num_heads + 2 * num_kv_heads) * D;
    const float scale = rsqrtf((float)D) * k_scale;

    for (int e = threadIdx.x; e < group * D; e += blockDim.x)
        q_s[e] = bf16_to_f32(qkv[(int64_t)t * qkv_stride + (int64_t)kvh * group * D + e]) * scale;

    float m = -INFINITY, l = 0.0f, acc[C];
#pragma unroll
    for (int c = 0; c < C; c++)
        acc[c] = 0.0f;

    const int64_t head_stride = (int64_t)FOLIO_KV_BLOCK_SIZE * D;
    for (int t0 = 0; t0 < n_keys; t0 += TILE) {
        __syncthreads(); /* previous tile consumed, q_s written */
        /* Stage the tile: 8 bf16 (16 bytes) per access. */
        for (int e = threadIdx.x; e < TILE * D / 8; e += blockDim.x) {
            int j = e / (D / 8), d8 = (e - j * (D / 8)) * 8;
            int key = t0 + j;
            float kf[8], vf[8];
            if (key < n_keys) {
                int blk = table[key / FOLIO_KV_BLOCK_SIZE];
                int64_t off = ((int64_t)blk * num_kv_heads + kvh) * head_stride +
                              (int64_t)(key % FOLIO_KV_BLOCK_SIZE) * D + d8;
                load8(k_cache, off, kf);
                load8(v_cache, off, vf);
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++)
                    kf[i] = vf[i] = 0.0f;
            }
#pragma unroll
            for (int i = 0; i < 8; i++) {
                k_s[j * (D + 1) + d8 + i] = kf[i];
                v_s[j * D + d8 + i] = vf[i];
            }
        }
        __syncthreads();

        const float *q = q_s + warp * D;
        float score = -INFINITY;
        if (t0 + lane < n_keys) {
            float dot = 0.0f;
#pragma unroll 16
            for (int d = 0; d < D; d++)
                dot += q[d] * k_s[lane * (D + 1) + d];
            score = dot;
        }
        float m_new = fmaxf(m, warp_max(score));
        float p = __expf(score - m_new);
        float correction = __expf(m - m_new);
        l = l * correction + warp_sum(p);
        m = m_new;
#pragma unroll
        for (int c = 0; c < C; c++)
            acc[c] *= correction;
        int jmax = min(TILE, n_keys - t0);
        for (int j = 0; j < jmax; j++) {
            float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
            for (int c = 0; c < C; c++)
                acc[c] += pj * v_s[j * D + lane + 32 * c];
        }
    }
    float inv_l = v_scale / l;
#pragma unroll
    for (int c = 0; c < C; c++)
        o[lane + 32 * c] = f32_to_bf16(acc[c] * inv_l);
}

template <int D, typename KV>
static cudaError_t launch(folio_bf16_bits *out, const folio_bf16_bits *qkv, const KV *k_cache,
                          const KV *v_cache, struct folio_k_batch b, int num_heads,
                          int num_kv_heads, float k_scale, float v_scale, cudaStream_t s)
{
    int group = num_heads / num_kv_heads;
    size_t smem = sizeof(float) * ((size_t)group * D + TILE * (D + 1) + TILE * D);
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(
            paged_attention_kernel<D, KV>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess)
            return e;
    }
    dim3 grid(b.num_tokens, num_kv_heads);
    paged_attention_kernel<D, KV><<<grid, 32 * group, smem, s>>>(
        out, qkv, k_cache, v_cache, b, num_heads, num_kv_heads, k_scale, v_scale);
    return cudaGetLastError();
}

template <typename KV>
static cudaError_t ref_any(folio_bf16_bits *out, const folio_bf16_bits *qkv, const KV *k_cache,
                           const KV *v_cache, struct folio_k_batch b, int num_heads,
                           int num_kv_heads, int head_dim, float k_scale, float v_scale,
                           cudaStream_t s)
{
    if (b.num_tokens <= 0)
        return cudaSuccess;
    if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0 || num_heads / num_kv_heads > 32)
        return cudaErrorInvalidValue;
    if (head_dim == 64)
        return launch<64>(out, qkv, k_cache, v_cache, b, num_heads, num_kv_heads, k_scale, v_scale,
                          s);
    if (head_dim == 128)
        return launch<128>(out, qkv, k_cache, v_cache, b, num_heads, num_kv_heads, k_scale, v_scale,
                           s);
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t folio_k_paged_attention_ref(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                                   const folio_bf16_bits *k_cache,
                                                   const folio_bf16_bits *v_cache,
                                                   struct folio_k_batch b, int num_heads,
                                                   int num_kv_heads, int head_dim, cudaStream_t s)
{
    return ref_any(out, qkv, k_cache, v_cache, b, num_heads, num_kv_heads, head_dim, 1.0f, 1.0f, s);
}

extern "C" cudaError_t
folio_k_paged_attention_ref_fp8(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                const uint8_t *k_cache, const uint8_t *v_cache,
                                struct folio_k_batch b, int num_heads, int num_kv_heads,
                                int head_dim, float k_scale, float v_scale, cudaStream_t s)
{
    return ref_any(out, qkv, k_cache, v_cache, b, num_heads, num_kv_heads, head_dim, k_scale,
                   v_scale, s);
}
