/* Fused RoPE (rotate-half convention, rope_rotate in common.cuh) and K/V cache
 * write, for the paths whose QKV projection does not do it in its epilogue
 * (cuBLASLt batches, prefill, and the TMA GEMM's QKV in K slices, which it
 * sums first). The token's position is its place in its sequence
 * (context_len - num_new + i, computed by the host into token_pos). */
#include "common.cuh"

/* Grid (token, group of ROPE_THREADS rotation pairs): one pair per thread, so a
 * token's 1-2 thousand pairs do not queue behind one CTA (one CTA per token
 * took ~7 us at batch 1). The CTAs of group 0 also copy the token's V. */
#define ROPE_THREADS 128

/* Value col of token t's projection: qkv itself, or (partials != NULL) the
 * bf16 rounding of its split-K partial sums added in slice order, as
 * folio_k_add_rmsnorm_partials rounds them. */
__device__ __forceinline__ folio_bf16_bits qkv_value(const folio_bf16_bits *row, const float *prow,
                                                     int splits, int64_t split_stride, int col)
{
    if (!prow)
        return row[col];
    float v = prow[col];
#pragma unroll 4
    for (int s = 1; s < splits; s++)
        v += prow[s * split_stride + col];
    return f32_to_bf16(v);
}

__global__ void __launch_bounds__(ROPE_THREADS)
    rope_kv_write_kernel(folio_bf16_bits *qkv, folio_bf16_bits *k_cache, folio_bf16_bits *v_cache,
                         const float *inv_freq, struct folio_k_batch b, int num_heads,
                         int num_kv_heads, int head_dim, const float *partials, int splits,
                         int64_t split_stride)
{
    pdl_trigger();
    pdl_wait();
    int t = blockIdx.x;
    int half = head_dim / 2;
    int stride = (num_heads + 2 * num_kv_heads) * head_dim;
    folio_bf16_bits *row = qkv + (int64_t)t * stride;
    const float *prow = partials ? partials + (int64_t)t * stride : NULL;
    int p = blockIdx.y * ROPE_THREADS + threadIdx.x;
    bool pair = p < (num_heads + num_kv_heads) * half;
    int h = pair ? p / half : 0, i = p - h * half;
    folio_bf16_bits *x = row + h * head_dim;
    /* Everything that needs neither the position nor the cache block is loaded
     * with the position: one memory round trip, then the block table's. */
    int pos = b.token_pos[t], seq = b.token_seq[t];
    folio_bf16_bits x1 = 0, x2 = 0;
    float freq = 0.0f;
    if (pair) {
        x1 = qkv_value(row, prow, splits, split_stride, h * head_dim + i);
        x2 = qkv_value(row, prow, splits, split_stride, h * head_dim + i + half);
        freq = inv_freq[i];
    }
    if (pos < 0)
        return; /* padding row of a CUDA-graph bucket */
    int block = b.block_tables[(int64_t)seq * b.block_stride + pos / FOLIO_K_BLOCK];
    int64_t cache_base = (int64_t)block * num_kv_heads * FOLIO_K_BLOCK * head_dim +
                         (int64_t)(pos % FOLIO_K_BLOCK) * head_dim;
    if (pair) {
        rope_rotate(x1, x2, pos, freq);
        x[i] = x1;
        x[i + half] = x2;
        if (h >= num_heads) {
            int kh = h - num_heads;
            folio_bf16_bits *dst = k_cache + cache_base + (int64_t)kh * FOLIO_K_BLOCK * head_dim;
            dst[i] = x1;
            dst[i + half] = x2;
        }
    }
    if (blockIdx.y != 0)
        return;
    int v_elems = num_kv_heads * head_dim, v0 = (num_heads + num_kv_heads) * head_dim;
    for (int e = threadIdx.x; e < v_elems; e += ROPE_THREADS) {
        int kh = e / head_dim, d = e - kh * head_dim;
        folio_bf16_bits v = qkv_value(row, prow, splits, split_stride, v0 + e);
        if (prow)
            row[v0 + e] = v;
        v_cache[cache_base + (int64_t)kh * FOLIO_K_BLOCK * head_dim + d] = v;
    }
}

static cudaError_t rope_launch(folio_bf16_bits *qkv, folio_bf16_bits *k_cache,
                               folio_bf16_bits *v_cache, const float *inv_freq,
                               struct folio_k_batch b, int num_heads, int num_kv_heads,
                               int head_dim, const float *partials, int splits, int pdl,
                               cudaStream_t s)
{
    if (b.num_tokens <= 0)
        return cudaSuccess;
    int pairs = (num_heads + num_kv_heads) * (head_dim / 2);
    int64_t split_stride = (int64_t)b.num_tokens * (num_heads + 2 * num_kv_heads) * head_dim;
    dim3 grid((unsigned)b.num_tokens, (unsigned)((pairs + ROPE_THREADS - 1) / ROPE_THREADS));
    cudaError_t e = launch_pdl(rope_kv_write_kernel, grid, dim3(ROPE_THREADS), 0, s, pdl != 0, qkv,
                               k_cache, v_cache, inv_freq, b, num_heads, num_kv_heads, head_dim,
                               partials, splits, split_stride);
    return e != cudaSuccess ? e : cudaGetLastError();
}

extern "C" cudaError_t folio_k_rope_kv_write(folio_bf16_bits *qkv, folio_bf16_bits *k_cache,
                                             folio_bf16_bits *v_cache, const float *inv_freq,
                                             struct folio_k_batch b, int num_heads,
                                             int num_kv_heads, int head_dim, int pdl,
                                             cudaStream_t s)
{
    return rope_launch(qkv, k_cache, v_cache, inv_freq, b, num_heads, num_kv_heads, head_dim, NULL,
                       1, pdl, s);
}

extern "C" cudaError_t folio_k_rope_kv_write_partials(folio_bf16_bits *qkv, const float *partials,
                                                      int splits, folio_bf16_bits *k_cache,
                                                      folio_bf16_bits *v_cache,
                                                      const float *inv_freq, struct folio_k_batch b,
                                                      int num_heads, int num_kv_heads, int head_dim,
                                                      int pdl, cudaStream_t s)
{
    if (splits < 1 || !partials)
        return cudaErrorInvalidValue;
    return rope_launch(qkv, k_cache, v_cache, inv_freq, b, num_heads, num_kv_heads, head_dim,
                       partials, splits, pdl, s);
}
