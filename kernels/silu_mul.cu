/* SwiGLU's activation on the fused gate/up GEMM output, rounded as PyTorch
 * rounds act_fn(gate) * up in bf16. inter must be a multiple of 8. */
#include "common.cuh"

/* One 16-byte vector of gate and one of up to one of act_fn(gate) * up, two
 * elements at a time: the pairs are rounded by one packed conversion each, and
 * the product of two bf16 values, exact in float, is rounded by the packed bf16
 * multiply as the float multiply and a conversion would round it. With SCALE,
 * gate and up are first multiplied by inv and rounded to bf16 (the normed row's
 * GEMM output). The kernel is bound by its instructions, not by its L2
 * traffic, hence the packed conversions. */
template <bool SCALE> __device__ __forceinline__ uint4 swiglu8(uint4 g, uint4 u, float inv)
{
    uint4 o;
    const uint32_t *gw = &g.x, *uw = &u.x;
    uint32_t *ow = &o.x;
#pragma unroll
    for (int p = 0; p < 4; p++) {
        __nv_bfloat162 gp = *(const __nv_bfloat162 *)&gw[p], up = *(const __nv_bfloat162 *)&uw[p];
        if (SCALE) {
            float2 gf = __bfloat1622float2(gp), uf = __bfloat1622float2(up);
            gp = __floats2bfloat162_rn(gf.x * inv, gf.y * inv);
            up = __floats2bfloat162_rn(uf.x * inv, uf.y * inv);
        }
        float2 gf = __bfloat1622float2(gp);
        __nv_bfloat162 act = __floats2bfloat162_rn(silu_f32(gf.x), silu_f32(gf.y));
        __nv_bfloat162 r = __hmul2_rn(act, up);
        ow[p] = *(const uint32_t *)&r;
    }
    return o;
}

/* One thread a vector. drop: drop.dead, and with drop.input gate/up's lines
 * once read (the 8 vectors of a line are 8 lanes' loads). */
__global__ void silu_mul_kernel(folio_bf16_bits *out, const folio_bf16_bits *gate_up, int inter,
                                int64_t total_vecs, struct folio_k_l2_drop drop)
{
    const int nvec = inter / 8;
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t t = i / nvec;
    const int v = (int)(i - t * nvec);
    const uint4 *row = (const uint4 *)(gate_up + t * 2 * inter);
    if (i < total_vecs)
        ((uint4 *)(out + t * inter))[v] = swiglu8<false>(row[v], row[nvec + v], 1.0f);
    l2_discard_dead(drop, blockIdx.x, gridDim.x, threadIdx.x, blockDim.x);
    if (drop.input) {
        __syncwarp();
        if (i < total_vecs && v % 8 == 0) {
            l2_discard(row + v);
            l2_discard(row + nvec + v);
        }
    }
}

/* The same after a gate/up GEMM that read the residual x with the MLP norm's
 * weight folded into its columns: gate and up are scaled by the token's
 * 1 / rms(x) (rounded to bf16, as the GEMM of the normed row would round them)
 * before the activation. CTA (c, t) takes vectors c * blockDim.x ... of token
 * t and reduces the row's sum of squares itself (4 KB from L2 for TinyLlama),
 * its gate and up loads already out. */
__global__ void silu_mul_norm_kernel(folio_bf16_bits *out, const folio_bf16_bits *gate_up,
                                     int inter, struct folio_k_row_norm norm,
                                     struct folio_k_l2_drop drop)
{
    __shared__ float scratch[32];
    const int64_t t = blockIdx.y;
    const int nvec = inter / 8, v = blockIdx.x * blockDim.x + threadIdx.x;
    const uint4 *row = (const uint4 *)(gate_up + t * 2 * inter);
    const uint4 *x = (const uint4 *)(norm.x + t * norm.hidden);
    uint4 g = {}, u = {};
    if (v < nvec) {
        g = row[v];
        u = row[nvec + v];
    }
    float ss = 0.0f;
    for (int i = threadIdx.x; i < norm.hidden / 8; i += blockDim.x) {
        uint4 q = x[i];
        const folio_bf16_bits *qe = (const folio_bf16_bits *)&q;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            float f = bf16_to_f32(qe[e]);
            ss += f * f;
        }
    }
    const float inv = rsqrtf(block_sum(ss, scratch) / (float)norm.hidden + norm.eps);
    if (v < nvec)
        ((uint4 *)(out + t * inter))[v] = swiglu8<true>(g, u, inv);
    l2_discard_dead(drop, blockIdx.x + (int64_t)gridDim.x * blockIdx.y,
                    (int64_t)gridDim.x * gridDim.y, threadIdx.x, blockDim.x);
    if (drop.input) {
        /* The 8 vectors of a line are 8 lanes' loads, all used by now. */
        __syncwarp();
        if (v % 8 == 0 && v + 8 <= nvec) {
            l2_discard(row + v);
            l2_discard(row + nvec + v);
        }
    }
}

extern "C" cudaError_t folio_k_silu_mul(folio_bf16_bits *out, const folio_bf16_bits *gate_up,
                                        int num_tokens, int inter, struct folio_k_row_norm norm,
                                        struct folio_k_l2_drop drop, cudaStream_t s)
{
    int64_t total = (int64_t)num_tokens * (inter / 8);
    if (total <= 0)
        return cudaSuccess;
    if (!l2_drop_check(drop, gate_up, inter % 64 == 0))
        return cudaErrorInvalidValue;
    if (norm.x) {
        if (norm.hidden % 8 != 0)
            return cudaErrorInvalidValue;
        dim3 grid((unsigned)((inter / 8 + 255) / 256), (unsigned)num_tokens);
        silu_mul_norm_kernel<<<grid, 256, 0, s>>>(out, gate_up, inter, norm, drop);
        return cudaGetLastError();
    }
    silu_mul_kernel<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(out, gate_up, inter, total,
                                                                    drop);
    return cudaGetLastError();
}
