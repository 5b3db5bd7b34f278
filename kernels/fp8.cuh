/* Device helpers of the fp8 kernels: common/fp8.h's rule in CUDA (the same IEEE division and
 * rounding, so the codes equal the host's) and the widening of packed codes. */
#ifndef FOLIO_KERNELS_FP8_CUH
#define FOLIO_KERNELS_FP8_CUH

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "common.cuh"

/* 1 / (448 * 512), common/fp8.h's FOLIO_FP8_MIN_SCALE. */
#define FP8_MIN_SCALE (1.0f / (448.0f * 512.0f))

/* The scale of a row whose largest magnitude is amax (a correctly rounded division: nvcc keeps
 * x / 448 a division without --use_fast_math). */
__device__ __forceinline__ float fp8_scale(float amax)
{
    return fmaxf(amax / 448.0f, FP8_MIN_SCALE);
}

/* e4m3(v / s): round to nearest even, saturated at +-448 (cvt.rn.satfinite). */
__device__ __forceinline__ uint8_t fp8_code(float v, float s)
{
    return (uint8_t)__nv_cvt_float_to_fp8(v / s, __NV_SATFINITE, __NV_E4M3);
}

/* Half h (0 or 1) of 16 codes (a 16-byte vector) as floats, in their order. */
__device__ __forceinline__ void fp8_unpack8(const uint4 &v, int h, float f[8])
{
    const __nv_fp8x2_storage_t *p = (const __nv_fp8x2_storage_t *)&v + 4 * h;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 g = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(p[i], __NV_E4M3)));
        f[2 * i] = g.x;
        f[2 * i + 1] = g.y;
    }
}

/* 16 codes (a 16-byte vector) as floats, in their order. */
__device__ __forceinline__ void fp8_unpack16(const uint4 &v, float f[16])
{
    fp8_unpack8(v, 0, f);
    fp8_unpack8(v, 1, f + 8);
}

#endif
