/* Small device helpers shared by the kernels: bf16 rounding as PyTorch does it
 * and warp/block reductions. */
#ifndef FOLIO_KERNELS_COMMON_CUH
#define FOLIO_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "folio_kernels.h"

__device__ __forceinline__ float bf16_to_f32(folio_bf16_bits h)
{
    return __uint_as_float((uint32_t)h << 16);
}

/* Round to nearest even, NaN kept a NaN (the same rule as folio_f32_to_bf16). */
__device__ __forceinline__ folio_bf16_bits f32_to_bf16(float f)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

/* x rounded through bf16 and back: where PyTorch stores a bf16 intermediate. */
__device__ __forceinline__ float round_bf16(float f)
{
    return bf16_to_f32(f32_to_bf16(f));
}

/* 2^x by the special-function unit (MUFU.EX2), flushing denormals: the .ftz
 * form skips the range test and two scalings that a denormal result takes. */
__device__ __forceinline__ float exp2_ftz(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* x / (1 + e^-x) from the special-function unit's exp2 and reciprocal (MUFU.EX2,
 * MUFU.RCP): a few float ulps from expf and an IEEE division, which the bf16
 * rounding that always follows hides but where a value lies within them of a
 * rounding boundary (then one bf16 ulp). The SwiGLU kernel is bound by its
 * instructions, hence the short forms. Below about -87 the result is -0
 * where PyTorch's is about -1e-36. */
__device__ __forceinline__ float silu_f32(float x)
{
    float r;
    /* The .ftz forms: without them each takes a range test and two scalings for
     * denormals that 1 + e^-x never holds. */
    const float e = exp2_ftz(x * -1.44269504088896341f);
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
    return x * r;
}

/* SiLU of a bf16 value, rounded to bf16 as PyTorch's act_fn rounds it (the
 * SwiGLU of silu_mul.cu and of the GEMV and TMA GEMM epilogues). */
__device__ __forceinline__ float silu_bf16(float x)
{
    return round_bf16(silu_f32(x));
}

/* RoPE (rotate-half) of one pair (x1 at dim i, x2 at dim i + D/2) by the bf16
 * cos c and sin s of its angle, rounded where Hugging Face's bf16
 * apply_rotary_pos_emb rounds: cos and sin to bf16, each product, the sums.
 * rope_kv.cu, the QKV GEMV's epilogue (rope_rotate) and decode attention
 * (rope_rotate_cs) all come here, so the paths give the same bits. */
__device__ __forceinline__ void rope_rotate_by(folio_bf16_bits &x1, folio_bf16_bits &x2, float c,
                                               float s)
{
    float f1 = bf16_to_f32(x1), f2 = bf16_to_f32(x2);
    x1 = f32_to_bf16(round_bf16(f1 * c) + round_bf16(-f2 * s));
    x2 = f32_to_bf16(round_bf16(f2 * c) + round_bf16(f1 * s));
}

/* cos and sin of the angle, rounded to bf16, packed as folio_k_rope_table
 * stores them: cos in the low half. */
__device__ __forceinline__ uint32_t rope_cos_sin(int pos, float inv_freq)
{
    float ang = (float)pos * inv_freq;
    return (uint32_t)f32_to_bf16(cosf(ang)) | (uint32_t)f32_to_bf16(sinf(ang)) << 16;
}

/* By a packed cos and sin of folio_k_rope_table. */
__device__ __forceinline__ void rope_rotate_cs(folio_bf16_bits &x1, folio_bf16_bits &x2,
                                               uint32_t cos_sin)
{
    rope_rotate_by(x1, x2, bf16_to_f32((folio_bf16_bits)(cos_sin & 0xffffu)),
                   bf16_to_f32((folio_bf16_bits)(cos_sin >> 16)));
}

/* At position pos, cos and sin computed here (rope_cos_sin's values). */
__device__ __forceinline__ void rope_rotate(folio_bf16_bits &x1, folio_bf16_bits &x2, int pos,
                                            float inv_freq)
{
    float ang = (float)pos * inv_freq;
    rope_rotate_by(x1, x2, round_bf16(cosf(ang)), round_bf16(sinf(ang)));
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block; every thread gets the result. scratch: 32 floats. */
__device__ __forceinline__ float block_sum(float v, float *scratch)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < nwarps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float *scratch)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < nwarps ? scratch[lane] : -INFINITY;
    return warp_max(v);
}

/* Drops the 128-byte line at p (128-byte aligned) from the L2 without writing
 * it back (discard.global.L2): for a buffer whose contents are dead, read for
 * the last time by a kernel that has finished, or by this thread and those it
 * has synchronized with. Later reads see undefined values until the line is
 * written again. Its use: the step's intermediate buffers would otherwise be
 * written back to memory when other data evicts them, traffic that lands on
 * the kernels reading memory then (decode attention). */
__device__ __forceinline__ void l2_discard(const void *p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(p) : "memory");
#endif
}

/* This thread's share of the whole lines of d.dead (thread tid of nthreads
 * in CTA cta of ctas). */
__device__ __forceinline__ void l2_discard_dead(const struct folio_k_l2_drop &d, int64_t cta,
                                                int64_t ctas, int tid, int nthreads)
{
    if (!d.dead)
        return;
    const int64_t lines = d.dead_bytes / 128;
    for (int64_t i = cta * nthreads + tid; i < lines; i += ctas * nthreads)
        l2_discard((const char *)d.dead + i * 128);
}

/* A launcher's check of drop: false if drop.dead is not 128-byte aligned;
 * drop.input is kept only where input is 128-byte aligned and the kernel
 * drops whole lines of it (whole_lines). */
static inline bool l2_drop_check(struct folio_k_l2_drop &drop, const void *input, bool whole_lines)
{
    if (((uintptr_t)drop.dead & 127) != 0)
        return false;
    drop.input = drop.input && input && whole_lines && ((uintptr_t)input & 127) == 0;
    return true;
}

/* Programmatic dependent launch (sm_90): a kernel launched with
 * cudaLaunchAttributeProgrammaticStreamSerialization may start while the one
 * before it still runs. pdl_wait() blocks until that kernel has finished and
 * its writes are visible: nothing the previous kernels write may be read, and
 * nothing may be written, before it. pdl_trigger() lets the next kernel start
 * once every CTA of this one has called it (or exited). Both are no-ops for a
 * kernel launched without the attribute, and below sm_90. */
__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* The embedding row of token t: its id, or for FOLIO_TOKEN_FROM_PREV (< 0)
 * the id its slot sampled last (already on the GPU); 0 for a slot that never
 * sampled, so that memory stays safe. */
__device__ __forceinline__ int embed_row(const int32_t *token_ids, const int32_t *token_slot,
                                         const int32_t *last_sampled, int t, int vocab)
{
    int id = token_ids[t];
    if (id < 0)
        id = token_slot[t] >= 0 ? last_sampled[token_slot[t]] : 0;
    return id < 0 || id >= vocab ? 0 : id;
}

/* kernel<<<grid, block, smem, s>>>(args...), with the programmatic-serialization
 * attribute when pdl is set. */
template <typename... P, typename... A>
static cudaError_t launch_pdl(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                              cudaStream_t s, bool pdl, A... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, (P)args...);
}

#endif
