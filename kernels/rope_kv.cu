/* Fused RoPE (rotate-half convention, rope_rotate in common.cuh) and K/V cache
 * write, for the paths whose QKV projection does not do it in its epilogue
 * (cuBLASLt batches, prefill, and the TMA GEMM's QKV in K slices, which it
 * sums first). The token's position is its place in its sequence
 * (context_len - num_new + i, computed by the host into token_pos). Under
 * --kv-cache-dtype fp8 the caches take the values' e4m3 codes (kv_fp8.cuh). */
#include "folio_kv_fp8.h"
#include "kv_fp8.cuh"

/* Grid (token, group of ROPE_THREADS * P rotation pairs): P adjacent pairs per
 * thread (2 where head_dim / 2 is even: 4-byte loads and stores), so a token's
 * 1-2 thousand pairs do not queue behind one CTA, and a batch of 256 tokens is
 * one wave of CTAs, not two. The CTAs of group 0 also copy the token's V. */
#define ROPE_THREADS 128

/* Values col .. col + P - 1 of token t's projection: qkv itself, or
 * (partials != NULL) the bf16 rounding of its split-K partial sums added in
 * slice order, as folio_k_add_rmsnorm_partials rounds them. col is a multiple
 * of P. */
template <int P>
__device__ __forceinline__ void qkv_values(folio_bf16_bits (&x)[P], const folio_bf16_bits *row,
                                           const float *prow, int splits, int64_t split_stride,
                                           int col)
{
    if (!prow) {
        if (P == 2) {
            const uint32_t v = *(const uint32_t *)(row + col);
            x[0] = (folio_bf16_bits)(v & 0xffffu);
            x[P - 1] = (folio_bf16_bits)(v >> 16);
        } else {
            x[0] = row[col];
        }
        return;
    }
    float v[P];
    if (P == 2) {
        const float2 f = *(const float2 *)(prow + col);
        v[0] = f.x;
        v[P - 1] = f.y;
    } else {
        v[0] = prow[col];
    }
#pragma unroll 4
    for (int s = 1; s < splits; s++) {
        if (P == 2) {
            const float2 f = *(const float2 *)(prow + s * split_stride + col);
            v[0] += f.x;
            v[P - 1] += f.y;
        } else {
            v[0] += prow[s * split_stride + col];
        }
    }
#pragma unroll
    for (int e = 0; e < P; e++)
        x[e] = f32_to_bf16(v[e]);
}

template <int P>
__device__ __forceinline__ void store_values(folio_bf16_bits *dst, const folio_bf16_bits (&x)[P])
{
    if (P == 2)
        *(uint32_t *)dst = (uint32_t)x[0] | (uint32_t)x[P - 1] << 16;
    else
        dst[0] = x[0];
}

/* P values into a cache at element idx: the bf16 values, or (F8) their codes of x / scale. */
template <int P, bool F8>
__device__ __forceinline__ void store_cache(void *cache, int64_t idx, const folio_bf16_bits (&x)[P],
                                            float scale)
{
    if constexpr (F8) {
#pragma unroll
        for (int e = 0; e < P; e++)
            ((uint8_t *)cache)[idx + e] = kv8_code(x[e], scale);
    } else {
        store_values<P>((folio_bf16_bits *)cache + idx, x);
    }
}

/* F8: the caches hold e4m3 codes (--kv-cache-dtype fp8), of x / k_scale and x / v_scale. */
template <int P, bool F8>
__global__ void __launch_bounds__(ROPE_THREADS)
    rope_kv_write_kernel(folio_bf16_bits *qkv, void *k_cache, void *v_cache,
                         const uint32_t *cos_sin, struct folio_k_batch b, int num_heads,
                         int num_kv_heads, int head_dim, const float *partials, int splits,
                         int64_t split_stride, bool pdl, float k_scale, float v_scale)
{
    pdl_trigger();
    int t = blockIdx.x;
    int half = head_dim / 2;
    int stride = (num_heads + 2 * num_kv_heads) * head_dim;
    folio_bf16_bits *row = qkv + (int64_t)t * stride;
    const float *prow = partials ? partials + (int64_t)t * stride : NULL;
    int p = (blockIdx.y * ROPE_THREADS + threadIdx.x) * P; /* the thread's first pair */
    bool pair = p < (num_heads + num_kv_heads) * half;
    int h = pair ? p / half : 0, i = p - h * half;
    folio_bf16_bits *x = row + h * head_dim;
    /* The step's metadata and the position's cos and sin (folio_k_rope_table:
     * the bits rope_rotate computes), which no kernel of the step writes, are
     * read before the wait for the projection when launched with programmatic
     * dependent launch (pdl): after it, one round trip for q, k and v and no
     * sinf/cosf. Otherwise q, k and v go out with the position: two round
     * trips in all, not three. */
    int pos = b.token_pos[t], seq = b.token_seq[t];
    folio_bf16_bits x1[P] = {}, x2[P] = {};
    uint32_t cs[P] = {};
    if (pair) {
        if (pos >= 0) {
#pragma unroll
            for (int e = 0; e < P; e++)
                cs[e] = cos_sin[(int64_t)pos * half + i + e];
        }
        if (!pdl) {
            qkv_values<P>(x1, row, prow, splits, split_stride, h * head_dim + i);
            qkv_values<P>(x2, row, prow, splits, split_stride, h * head_dim + i + half);
        }
    }
    int block =
        pos >= 0 ? b.block_tables[(int64_t)seq * b.block_stride + pos / FOLIO_KV_BLOCK_SIZE] : 0;
    pdl_wait();
    if (pos < 0)
        return; /* padding row of a CUDA-graph bucket */
    if (pair && pdl) {
        qkv_values<P>(x1, row, prow, splits, split_stride, h * head_dim + i);
        qkv_values<P>(x2, row, prow, splits, split_stride, h * head_dim + i + half);
    }
    int64_t cache_base = (int64_t)block * num_kv_heads * FOLIO_KV_BLOCK_SIZE * head_dim +
                         (int64_t)(pos % FOLIO_KV_BLOCK_SIZE) * head_dim;
    if (pair) {
#pragma unroll
        for (int e = 0; e < P; e++)
            rope_rotate_cs(x1[e], x2[e], cs[e]);
        store_values<P>(x + i, x1);
        store_values<P>(x + i + half, x2);
        if (h >= num_heads) {
            int kh = h - num_heads;
            const int64_t dst = cache_base + (int64_t)kh * FOLIO_KV_BLOCK_SIZE * head_dim;
            store_cache<P, F8>(k_cache, dst + i, x1, k_scale);
            store_cache<P, F8>(k_cache, dst + i + half, x2, k_scale);
        }
    }
    if (blockIdx.y != 0)
        return;
    int v_elems = num_kv_heads * head_dim, v0 = (num_heads + num_kv_heads) * head_dim;
    for (int e = threadIdx.x * P; e < v_elems; e += ROPE_THREADS * P) {
        int kh = e / head_dim, d = e - kh * head_dim;
        folio_bf16_bits v[P];
        qkv_values<P>(v, row, prow, splits, split_stride, v0 + e);
        if (prow)
            store_values<P>(row + v0 + e, v);
        store_cache<P, F8>(v_cache, cache_base + (int64_t)kh * FOLIO_KV_BLOCK_SIZE * head_dim + d,
                           v, v_scale);
    }
}

template <bool F8>
static cudaError_t rope_launch(folio_bf16_bits *qkv, void *k_cache, void *v_cache,
                               const uint32_t *cos_sin, struct folio_k_batch b, int num_heads,
                               int num_kv_heads, int head_dim, const float *partials, int splits,
                               int pdl, float k_scale, float v_scale, cudaStream_t s)
{
    if (b.num_tokens <= 0)
        return cudaSuccess;
    int pairs = (num_heads + num_kv_heads) * (head_dim / 2);
    int64_t split_stride = (int64_t)b.num_tokens * (num_heads + 2 * num_kv_heads) * head_dim;
    const bool two = head_dim % 4 == 0; /* pairs (and V values) two by two */
    const int per_cta = ROPE_THREADS * (two ? 2 : 1);
    dim3 grid((unsigned)b.num_tokens, (unsigned)((pairs + per_cta - 1) / per_cta));
    cudaError_t e = launch_pdl(two ? rope_kv_write_kernel<2, F8> : rope_kv_write_kernel<1, F8>,
                               grid, dim3(ROPE_THREADS), 0, s, pdl != 0, qkv, k_cache, v_cache,
                               cos_sin, b, num_heads, num_kv_heads, head_dim, partials, splits,
                               split_stride, pdl != 0, k_scale, v_scale);
    return e != cudaSuccess ? e : cudaGetLastError();
}

extern "C" cudaError_t folio_k_rope_kv_write(folio_bf16_bits *qkv, folio_bf16_bits *k_cache,
                                             folio_bf16_bits *v_cache, const uint32_t *cos_sin,
                                             struct folio_k_batch b, int num_heads,
                                             int num_kv_heads, int head_dim, int pdl,
                                             cudaStream_t s)
{
    return rope_launch<false>(qkv, k_cache, v_cache, cos_sin, b, num_heads, num_kv_heads, head_dim,
                              NULL, 1, pdl, 1.0f, 1.0f, s);
}

extern "C" cudaError_t folio_k_rope_kv_write_fp8(folio_bf16_bits *qkv, uint8_t *k_cache,
                                                 uint8_t *v_cache, const uint32_t *cos_sin,
                                                 struct folio_k_batch b, int num_heads,
                                                 int num_kv_heads, int head_dim, float k_scale,
                                                 float v_scale, int pdl, cudaStream_t s)
{
    return rope_launch<true>(qkv, k_cache, v_cache, cos_sin, b, num_heads, num_kv_heads, head_dim,
                             NULL, 1, pdl, k_scale, v_scale, s);
}

extern "C" cudaError_t
folio_k_rope_kv_write_partials(folio_bf16_bits *qkv, const float *partials, int splits,
                               folio_bf16_bits *k_cache, folio_bf16_bits *v_cache,
                               const uint32_t *cos_sin, struct folio_k_batch b, int num_heads,
                               int num_kv_heads, int head_dim, int pdl, cudaStream_t s)
{
    if (splits < 1 || !partials)
        return cudaErrorInvalidValue;
    return rope_launch<false>(qkv, k_cache, v_cache, cos_sin, b, num_heads, num_kv_heads, head_dim,
                              partials, splits, pdl, 1.0f, 1.0f, s);
}

__global__ void rope_table_kernel(uint32_t *cos_sin, const float *inv_freq, int positions, int half)
{
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)positions * half)
        return;
    const int pos = (int)(idx / half), i = (int)(idx - (int64_t)pos * half);
    cos_sin[idx] = rope_cos_sin(pos, inv_freq[i]);
}

extern "C" cudaError_t folio_k_rope_table(uint32_t *cos_sin, const float *inv_freq, int positions,
                                          int head_dim, cudaStream_t s)
{
    if (positions < 1 || head_dim < 2 || head_dim % 2 != 0)
        return cudaErrorInvalidValue;
    const int64_t n = (int64_t)positions * (head_dim / 2);
    rope_table_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(cos_sin, inv_freq, positions,
                                                                  head_dim / 2);
    return cudaGetLastError();
}
