/* Inline PTX wrappers for the Hopper bulk copy engine (sm_90): one
 * cp.async.bulk instruction moves a contiguous run of global memory (any
 * multiple of 16 bytes) into shared memory and, on arrival, counts its bytes
 * off an mbarrier's transaction count; a thread that waits on the mbarrier's
 * phase then sees the data. One thread can keep a whole ring of such copies in
 * flight, where cp.async needs an instruction per 16 bytes and per thread. */
#ifndef FOLIO_KERNELS_BULK_COPY_CUH
#define FOLIO_KERNELS_BULK_COPY_CUH

#include <stdint.h>

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* An mbarrier whose phase completes after `count` arrivals and all the bytes
 * announced by expect_tx. Call mbar_init_fence() and a __syncthreads() after
 * the inits, before any copy or wait uses them. */
__device__ __forceinline__ void mbar_init(uint64_t *bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
                 : "memory");
}

__device__ __forceinline__ void mbar_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* One arrival, announcing `bytes` of copies that will complete on bar. */
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
}

/* Blocks until the phase with this parity (0 for the first use, then
 * alternating) has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n"
                 "}\n" ::"r"(smem_addr(bar)),
                 "r"(parity)
                 : "memory");
}

/* bytes (a multiple of 16; dst and src 16-byte aligned) from global src to
 * shared dst, completing on bar. */
__device__ __forceinline__ void bulk_copy_to_shared(void *dst, const void *src, uint32_t bytes,
                                                    uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
        "[%3];\n" ::"r"(smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar))
        : "memory");
}

#endif
