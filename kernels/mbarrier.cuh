/* Inline PTX wrappers for shared-memory mbarriers (sm_90), as the TMA copies
 * of gemm_tma.cu use them: a copy counts its bytes off the barrier's
 * transaction count on arrival, and a thread that waits on the barrier's
 * phase then sees the data. */
#ifndef FOLIO_KERNELS_MBARRIER_CUH
#define FOLIO_KERNELS_MBARRIER_CUH

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

/* One arrival, no bytes announced. */
__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

#endif
