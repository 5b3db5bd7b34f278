/* Checkpoint tensors (bf16, f16 or f32) to the bf16 the GPU computes in. */
#include <cuda_fp16.h>

#include "common.cuh"

__global__ void convert_to_bf16_kernel(folio_bf16_bits *dst, const void *src, int src_dtype,
                                       int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v;
        if (src_dtype == 2)
            v = ((const float *)src)[i];
        else if (src_dtype == 1)
            v = __half2float(((const __half *)src)[i]);
        else
            v = bf16_to_f32(((const folio_bf16_bits *)src)[i]);
        dst[i] = f32_to_bf16(v);
    }
}

extern "C" cudaError_t folio_k_convert_to_bf16(folio_bf16_bits *dst, const void *src, int src_dtype,
                                               int64_t n, cudaStream_t s)
{
    if (n <= 0)
        return cudaSuccess;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65536)
        blocks = 65536;
    convert_to_bf16_kernel<<<(unsigned)blocks, 256, 0, s>>>(dst, src, src_dtype, n);
    return cudaGetLastError();
}

/* w[r][c] = bf16(w[r][c] * g[c]): an RMSNorm's weight folded into the columns
 * of the projection that reads its output. */
__global__ void scale_columns_kernel(folio_bf16_bits *w, int64_t n, int cols,
                                     const folio_bf16_bits *g)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        w[i] = f32_to_bf16(bf16_to_f32(w[i]) * bf16_to_f32(g[i % cols]));
}

extern "C" cudaError_t folio_k_scale_columns(folio_bf16_bits *w, int64_t rows, int cols,
                                             const folio_bf16_bits *g, cudaStream_t s)
{
    int64_t n = rows * cols;
    if (n <= 0)
        return cudaSuccess;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65536)
        blocks = 65536;
    scale_columns_kernel<<<(unsigned)blocks, 256, 0, s>>>(w, n, cols, g);
    return cudaGetLastError();
}
