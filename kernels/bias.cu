/* A projection's bias added to its bf16 output in place (Qwen2's Q/K/V), the
 * sum rounded to bf16 once, as PyTorch rounds a bf16 add. */
#include "common.cuh"

__global__ void add_bias_kernel(folio_bf16_bits *x, const folio_bf16_bits *bias, int n)
{
    folio_bf16_bits *row = x + (int64_t)blockIdx.x * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        row[i] = f32_to_bf16(bf16_to_f32(row[i]) + bf16_to_f32(bias[i]));
}

extern "C" cudaError_t folio_k_add_bias(folio_bf16_bits *x, const folio_bf16_bits *bias, int rows,
                                        int n, cudaStream_t s)
{
    if (rows <= 0)
        return cudaSuccess;
    add_bias_kernel<<<rows, 256, 0, s>>>(x, bias, n);
    return cudaGetLastError();
}
