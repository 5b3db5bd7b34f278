/* L2 prefetch of a decode step's keys and values ahead of its attention.
 *
 * At 129-256 rows the GEMMs before a layer's attention (down, QKV) are bound by
 * latency and leave most of the HBM's bandwidth idle, while the attention that
 * follows waits on the HBM. This kernel asks the L2 for the first blocks of
 * every sequence's keys and values (one cp.async.bulk.prefetch.L2 of a whole
 * cache block, all KV heads, per thread and K or V), so that those bytes move
 * while the GEMMs run. It reads only the step's metadata (the host wrote it
 * before the step), never what the kernels before it write, so it waits on
 * nothing; a prefetch is a hint and changes no value. */
#include "common.cuh"

__device__ __forceinline__ void prefetch_l2(const void *p, uint32_t bytes, bool keep)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (keep) {
        uint64_t policy;
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
        asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;\n" ::"l"(p),
                     "r"(bytes), "l"(policy)
                     : "memory");
    } else {
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes)
                     : "memory");
    }
#endif
}

/* Thread (seq, b): block b < blocks of sequence seq, if the sequence has it. */
__global__ void kv_prefetch_kernel(const folio_bf16_bits *k_cache, const folio_bf16_bits *v_cache,
                                   struct folio_k_batch b, int blocks, int block_elems, int keep)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int seq = i / blocks, blk = i - seq * blocks;
    if (seq >= b.num_seqs || blk * FOLIO_K_BLOCK >= b.seq_ctx_len[seq])
        return;
    const int64_t off = (int64_t)b.block_tables[(int64_t)seq * b.block_stride + blk] * block_elems;
    const uint32_t bytes = (uint32_t)(block_elems * sizeof(folio_bf16_bits));
    prefetch_l2(k_cache + off, bytes, keep != 0);
    prefetch_l2(v_cache + off, bytes, keep != 0);
}

extern "C" cudaError_t folio_k_kv_prefetch(const folio_bf16_bits *k_cache,
                                           const folio_bf16_bits *v_cache, struct folio_k_batch b,
                                           int blocks, int num_kv_heads, int head_dim, int keep,
                                           cudaStream_t s)
{
    const int block_elems = num_kv_heads * FOLIO_K_BLOCK * head_dim;
    if (blocks <= 0 || b.num_seqs <= 0)
        return cudaSuccess;
    if ((block_elems * (int)sizeof(folio_bf16_bits)) % 16 != 0)
        return cudaErrorInvalidValue;
    const int threads = 256, total = b.num_seqs * blocks;
    kv_prefetch_kernel<<<(total + threads - 1) / threads, threads, 0, s>>>(
        k_cache, v_cache, b, blocks, block_elems, keep);
    return cudaGetLastError();
}
