/* Inline PTX wrappers for the tensor-core attention (attention_mma.cu):
 * mma.sync m16n8k16 bf16 with f32 accumulators, ldmatrix, movmatrix, cp.async. sm_80 and
 * later. */
#ifndef FOLIO_KERNELS_MMA_HELPERS_CUH
#define FOLIO_KERNELS_MMA_HELPERS_CUH

#include "common.cuh"

__device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const folio_bf16_bits *p)
{
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const folio_bf16_bits *p)
{
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* The transpose of an 8x8 b16 matrix held as an MMA fragment (lane 4 g + tq:
 * row g, columns 2 tq and 2 tq + 1), in the same layout: an accumulator
 * fragment becomes the B operand of the next product without shared memory. */
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x)
{
    uint32_t y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

/* 16 bytes global -> shared; src_bytes 0 writes zeros and reads nothing.
 * L2::128B: the L2 fetches the copy's whole 128-byte line from memory at
 * once, fewer requests to memory for the same bytes (L2::256B was slower). */
__device__ __forceinline__ void cp_async_16(folio_bf16_bits *dst, const folio_bf16_bits *src,
                                            int src_bytes)
{
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src),
                 "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

#endif
