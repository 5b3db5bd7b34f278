/* Pulls weights that the next kernels of a small-batch decode step will read
 * into L2 while the step runs kernels that leave DRAM idle. At batch 1 the
 * RoPE, attention and combine kernels between the QKV and O projections take
 * ~10 us and move almost nothing; the O projection and the first part of
 * gate/up (~32 MB of the 50 MB L2) can stream in meanwhile, so those GEMVs
 * then read from L2.
 *
 * One warp per CTA, one CTA per SM: each issues bulk L2 prefetches
 * (cp.async.bulk.prefetch.L2, sm_90: the TMA unit fetches, no registers or
 * shared memory held) for its slice of the two ranges, then waits for the
 * previous kernel like any PDL-launched kernel, so the kernels after it still
 * see every earlier write. */
#include "common.cuh"

#define PREFETCH_CHUNK (16u << 10) /* bytes per bulk prefetch */

__device__ __forceinline__ void prefetch_l2(const char *p, uint32_t bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
#endif
}

__global__ void __launch_bounds__(32)
    prefetch_kernel(const char *a, size_t a_bytes, const char *b, size_t b_bytes)
{
    size_t total = a_bytes + b_bytes;
    size_t slice = (total + gridDim.x - 1) / gridDim.x;
    slice = (slice + PREFETCH_CHUNK - 1) / PREFETCH_CHUNK * PREFETCH_CHUNK;
    size_t begin = (size_t)blockIdx.x * slice, end = min(begin + slice, total);
    for (size_t o = begin + (size_t)threadIdx.x * PREFETCH_CHUNK; o < end;
         o += 32 * (size_t)PREFETCH_CHUNK) {
        size_t n = min((size_t)PREFETCH_CHUNK, end - o);
        /* A chunk may straddle the two ranges: split it there. */
        if (o < a_bytes) {
            size_t na = min(n, a_bytes - o);
            prefetch_l2(a + o, (uint32_t)na);
            if (na < n)
                prefetch_l2(b, (uint32_t)(n - na));
        } else {
            prefetch_l2(b + (o - a_bytes), (uint32_t)n);
        }
    }
    pdl_trigger();
    pdl_wait();
}

extern "C" cudaError_t folio_k_prefetch_l2(const void *a, size_t a_bytes, const void *b,
                                           size_t b_bytes, int ctas, int pdl, cudaStream_t s)
{
    if (((uintptr_t)a | (uintptr_t)b | a_bytes | b_bytes) % 16 != 0 || ctas <= 0)
        return cudaErrorInvalidValue;
    if (a_bytes + b_bytes == 0)
        return cudaSuccess;
    cudaError_t e = launch_pdl(prefetch_kernel, dim3((unsigned)ctas), dim3(32), 0, s, pdl != 0,
                               (const char *)a, a_bytes, (const char *)b, b_bytes);
    return e != cudaSuccess ? e : cudaGetLastError();
}
