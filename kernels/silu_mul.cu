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
