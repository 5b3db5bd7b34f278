/* SwiGLU's activation on the fused gate/up GEMM output, rounded as PyTorch
 * rounds act_fn(gate) * up in bf16. inter must be a multiple of 8. */
#include "common.cuh"

__global__ void silu_mul_kernel(folio_bf16_bits *out, const folio_bf16_bits *gate_up, int inter,
                                int64_t total_vecs)
{
    int nvec = inter / 8;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total_vecs;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / nvec;
        int v = (int)(i - t * nvec);
        const uint4 *row = (const uint4 *)(gate_up + t * 2 * inter);
        uint4 g = row[v], u = row[nvec + v], o;
        const folio_bf16_bits *ge = (const folio_bf16_bits *)&g, *ue = (const folio_bf16_bits *)&u;
        folio_bf16_bits *oe = (folio_bf16_bits *)&o;
        for (int e = 0; e < 8; e++) {
            oe[e] = f32_to_bf16(silu_bf16(bf16_to_f32(ge[e])) * bf16_to_f32(ue[e]));
        }
        ((uint4 *)(out + t * inter))[v] = o;
    }
}

/* The same after a gate/up GEMM that read the residual x with the MLP norm's
 * weight folded into its columns: gate and up are scaled by the token's
 * 1 / rms(x) (rounded to bf16, as the GEMM of the normed row would round them)
 * before the activation. CTA (c, t) takes vectors c * blockDim.x ... of token
 * t and reduces the row's sum of squares itself (4 KB from L2 for TinyLlama),
 * its gate and up loads already out. */
__global__ void silu_mul_norm_kernel(folio_bf16_bits *out, const folio_bf16_bits *gate_up,
                                     int inter, struct folio_k_row_norm norm)
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
    if (v >= nvec)
        return;
    uint4 o;
    const folio_bf16_bits *ge = (const folio_bf16_bits *)&g, *ue = (const folio_bf16_bits *)&u;
    folio_bf16_bits *oe = (folio_bf16_bits *)&o;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        float gs = round_bf16(bf16_to_f32(ge[e]) * inv);
        float us = round_bf16(bf16_to_f32(ue[e]) * inv);
        oe[e] = f32_to_bf16(silu_bf16(gs) * us);
    }
    ((uint4 *)(out + t * inter))[v] = o;
}

extern "C" cudaError_t folio_k_silu_mul(folio_bf16_bits *out, const folio_bf16_bits *gate_up,
                                        int num_tokens, int inter, struct folio_k_row_norm norm,
                                        cudaStream_t s)
{
    int64_t total = (int64_t)num_tokens * (inter / 8);
    if (total <= 0)
        return cudaSuccess;
    if (norm.x) {
        if (norm.hidden % 8 != 0)
            return cudaErrorInvalidValue;
        dim3 grid((unsigned)((inter / 8 + 255) / 256), (unsigned)num_tokens);
        silu_mul_norm_kernel<<<grid, 256, 0, s>>>(out, gate_up, inter, norm);
        return cudaGetLastError();
    }
    int64_t blocks = (total + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    silu_mul_kernel<<<(unsigned)blocks, 256, 0, s>>>(out, gate_up, inter, total);
    return cudaGetLastError();
}
