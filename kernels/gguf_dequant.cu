/* A packed GGUF matrix widened to bf16 (gguf_blocks.h's decode, the GEMV's), for the products
 * of more rows than the GEMV takes: a bf16 GEMM then reads the copy. One thread a 32-weight
 * chunk, its 32 values written as four 16-byte stores. */
#include "common.cuh"
#include "folio_gguf.h"
#include "gguf_load.cuh"

template <int T>
__global__ void gguf_dequantize_kernel(folio_bf16_bits *out, const uint8_t *w, int64_t stride,
                                       int n, int k)
{
    const int chunks = k >> 5;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)n * chunks)
        return;
    const int64_t row = i / chunks;
    const int c = (int)(i % chunks);
    uint32_t r[GGUF_CHUNK_WORDS];
    const int sub = gguf_gather<T>(w + row * stride, c, r);
    float q[32], a[2], b;
    gguf_decode_chunk(T, r, sub, q, a, &b);
    uint4 *dst = (uint4 *)(out + row * k + 32 * (int64_t)c);
#pragma unroll
    for (int v = 0; v < 4; v++) {
        uint32_t p[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int j = 8 * v + 2 * e;
            p[e] = (uint32_t)f32_to_bf16(fmaf(a[j >> 4], q[j], b)) |
                   (uint32_t)f32_to_bf16(fmaf(a[j >> 4], q[j + 1], b)) << 16;
        }
        dst[v] = make_uint4(p[0], p[1], p[2], p[3]);
    }
}

template <int T>
static cudaError_t launch(folio_bf16_bits *out, const void *w, int64_t stride, int n, int k,
                          cudaStream_t s)
{
    const int64_t total = (int64_t)n * (k / 32);
    const unsigned grid = (unsigned)((total + 255) / 256);
    gguf_dequantize_kernel<T><<<grid, 256, 0, s>>>(out, (const uint8_t *)w, stride, n, k);
    return cudaGetLastError();
}

extern "C" cudaError_t folio_k_gguf_dequantize(folio_bf16_bits *out, const void *w, int type,
                                               int64_t stride, int n, int k, cudaStream_t s)
{
    if (n <= 0)
        return cudaSuccess;
    if (k % gguf_block_elems((uint32_t)type) || k % 32 || stride % 16)
        return cudaErrorInvalidValue;
    switch (type) {
    case FOLIO_GGML_Q4_0:
        return launch<FOLIO_GGML_Q4_0>(out, w, stride, n, k, s);
    case FOLIO_GGML_Q4_0X8:
        return launch<FOLIO_GGML_Q4_0X8>(out, w, stride, n, k, s);
    case FOLIO_GGML_Q4_1:
        return launch<FOLIO_GGML_Q4_1>(out, w, stride, n, k, s);
    case FOLIO_GGML_Q8_0:
        return launch<FOLIO_GGML_Q8_0>(out, w, stride, n, k, s);
    case FOLIO_GGML_Q4_K:
        return launch<FOLIO_GGML_Q4_K>(out, w, stride, n, k, s);
    case FOLIO_GGML_Q6_K:
        return launch<FOLIO_GGML_Q6_K>(out, w, stride, n, k, s);
    case FOLIO_GGML_BF16:
        return launch<FOLIO_GGML_BF16>(out, w, stride, n, k, s);
    }
    return cudaErrorInvalidValue;
}
