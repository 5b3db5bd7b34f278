/* SwiGLU's activation on the fused gate/up GEMM output, rounded as PyTorch
 * rounds act_fn(gate) * up in bf16. inter must be a multiple of 8. The
 * partials form takes the GEMM's split-K f32 slices and rounds their sum to
 * bf16 first, as a GEMM writing bf16 would. */
#include "common.cuh"

/* bf16(bf16(silu(gate)) * up) of eight bf16-rounded f32 pairs. */
__device__ __forceinline__ uint4 silu_mul8(const float g[8], const float u[8])
{
    uint4 o;
    folio_bf16_bits *oe = (folio_bf16_bits *)&o;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        float x = round_bf16(g[e]);
        float act = round_bf16(x / (1.0f + expf(-x)));
        oe[e] = f32_to_bf16(act * round_bf16(u[e]));
    }
    return o;
}

__global__ void silu_mul_kernel(folio_bf16_bits *out, const folio_bf16_bits *gate_up, int inter,
                                int64_t total_vecs)
{
    int nvec = inter / 8;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total_vecs;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / nvec;
        int v = (int)(i - t * nvec);
        const uint4 *row = (const uint4 *)(gate_up + t * 2 * inter);
        uint4 gv = row[v], uv = row[nvec + v];
        const folio_bf16_bits *ge = (const folio_bf16_bits *)&gv,
                              *ue = (const folio_bf16_bits *)&uv;
        float g[8], u[8];
#pragma unroll
        for (int e = 0; e < 8; e++) {
            g[e] = bf16_to_f32(ge[e]);
            u[e] = bf16_to_f32(ue[e]);
        }
        ((uint4 *)(out + t * inter))[v] = silu_mul8(g, u);
    }
}

extern "C" cudaError_t folio_k_silu_mul(folio_bf16_bits *out, const folio_bf16_bits *gate_up,
                                        int num_tokens, int inter, cudaStream_t s)
{
    int64_t total = (int64_t)num_tokens * (inter / 8);
    if (total <= 0)
        return cudaSuccess;
    int64_t blocks = (total + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    silu_mul_kernel<<<(unsigned)blocks, 256, 0, s>>>(out, gate_up, inter, total);
    return cudaGetLastError();
}

template <int SPLITS>
__global__ void silu_mul_partials_kernel(folio_bf16_bits *out, const float *partials,
                                         int64_t split_stride, int inter, int64_t total_vecs)
{
    int nvec = inter / 8;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total_vecs;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / nvec;
        int v = (int)(i - t * nvec);
        const float *row = partials + t * 2 * inter + (int64_t)v * 8;
        float4 pg[SPLITS][2], pu[SPLITS][2]; /* every load issued before any add */
#pragma unroll
        for (int s = 0; s < SPLITS; s++) {
            const float4 *g = (const float4 *)(row + s * split_stride);
            const float4 *u = (const float4 *)(row + s * split_stride + inter);
            pg[s][0] = __ldcg(g);
            pg[s][1] = __ldcg(g + 1);
            pu[s][0] = __ldcg(u);
            pu[s][1] = __ldcg(u + 1);
        }
        float g[8], u[8];
#pragma unroll
        for (int h = 0; h < 2; h++) {
#pragma unroll
            for (int s = 0; s < SPLITS; s++) { /* slices in order: deterministic */
                const float *gs = (const float *)&pg[s][h], *us = (const float *)&pu[s][h];
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    g[4 * h + q] = s ? g[4 * h + q] + gs[q] : gs[q];
                    u[4 * h + q] = s ? u[4 * h + q] + us[q] : us[q];
                }
            }
        }
        ((uint4 *)(out + t * inter))[v] = silu_mul8(g, u);
    }
}

extern "C" cudaError_t folio_k_silu_mul_partials(folio_bf16_bits *out, const float *partials,
                                                 int splits, int64_t split_stride, int num_tokens,
                                                 int inter, cudaStream_t s)
{
    int64_t total = (int64_t)num_tokens * (inter / 8);
    if (total <= 0)
        return cudaSuccess;
    int64_t blocks = (total + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    switch (splits) {
    case 2:
        silu_mul_partials_kernel<2>
            <<<(unsigned)blocks, 256, 0, s>>>(out, partials, split_stride, inter, total);
        break;
    case 4:
        silu_mul_partials_kernel<4>
            <<<(unsigned)blocks, 256, 0, s>>>(out, partials, split_stride, inter, total);
        break;
    case 8:
        silu_mul_partials_kernel<8>
            <<<(unsigned)blocks, 256, 0, s>>>(out, partials, split_stride, inter, total);
        break;
    default:
        return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}
