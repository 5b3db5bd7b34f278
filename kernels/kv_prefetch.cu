/* L2 prefetch of the cache blocks that a decode step's attention reads
 * first, issued while the GEMMs before it run.
 *
 * Why: at 256 rows and 512 keys, decode attention reads 134 MB a layer from
 * memory and is bound by it, while the down and QKV GEMMs before it read 33.5
 * MB of weights in about 20 us and leave most of the memory bandwidth unused.
 * Blocks 0 .. blocks - 1 of every decode token's sequence (its first tiles:
 * what each attention warp reads first) are fetched into the L2 by the copy
 * engine of each SM (cp.async.bulk.prefetch: no registers, no shared memory,
 * nothing to wait for), one thread per block and K or V, every KV head at
 * once (they lie together in a block).
 *
 * Launched with programmatic dependent launch after silu_mul (which lets it
 * start at once); it waits for that kernel at its end, so that the kernel
 * after it waits for both. */
#include "common.cuh"

__global__ void kv_prefetch_kernel(const folio_bf16_bits *k_cache, const folio_bf16_bits *v_cache,
                                   struct folio_k_batch b, int blocks, uint32_t block_bytes)
{
    pdl_trigger();
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    const int t = idx / (2 * blocks), j = (idx >> 1) % blocks;
    if (t < b.num_tokens) {
        const int pos = b.token_pos[t];
        if (pos >= 0 && j * FOLIO_K_BLOCK <= pos) {
            const int32_t blk = b.block_tables[(int64_t)b.token_seq[t] * b.block_stride + j];
            const char *p =
                (const char *)(idx & 1 ? v_cache : k_cache) + (int64_t)blk * block_bytes;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(block_bytes)
                         : "memory");
#else
            (void)p;
#endif
        }
    }
    pdl_wait();
}

extern "C" cudaError_t folio_k_kv_prefetch(const folio_bf16_bits *k_cache,
                                           const folio_bf16_bits *v_cache, struct folio_k_batch b,
                                           int num_kv_heads, int head_dim, int blocks, int pdl,
                                           cudaStream_t s)
{
    if (b.num_tokens <= 0 || blocks <= 0)
        return cudaSuccess;
    const uint32_t block_bytes =
        (uint32_t)num_kv_heads * FOLIO_K_BLOCK * (uint32_t)head_dim * sizeof(folio_bf16_bits);
    if (block_bytes % 16 != 0)
        return cudaErrorInvalidValue;
    const int threads = 128, n = b.num_tokens * 2 * blocks;
    cudaError_t e =
        launch_pdl(kv_prefetch_kernel, dim3((unsigned)((n + threads - 1) / threads)), dim3(threads),
                   0, s, pdl != 0, k_cache, v_cache, b, blocks, block_bytes);
    return e != cudaSuccess ? e : cudaGetLastError();
}
