/* Fused residual add + RMSNorm, rounding where Hugging Face's bf16 Llama
 * rounds: the residual sum, the normalized row, and its product with the
 * weight. hidden must be a multiple of 8 (16-byte accesses). */
#include "common.cuh"

__global__ void add_rmsnorm_kernel(folio_bf16_bits *out, folio_bf16_bits *residual,
                                   const folio_bf16_bits *add, const folio_bf16_bits *weight,
                                   const int32_t *rows, int hidden, float eps)
{
    __shared__ float scratch[32];
    int r = blockIdx.x;
    int row = rows ? rows[r] : r;
    folio_bf16_bits *res = residual + (int64_t)row * hidden;
    const folio_bf16_bits *a = add ? add + (int64_t)row * hidden : NULL;
    folio_bf16_bits *o = out + (int64_t)r * hidden;
    int nvec = hidden / 8;

    float ss = 0.0f;
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
        uint4 rv = ((const uint4 *)res)[v];
        folio_bf16_bits *re = (folio_bf16_bits *)&rv;
        if (a) {
            uint4 av = ((const uint4 *)a)[v];
            const folio_bf16_bits *ae = (const folio_bf16_bits *)&av;
            for (int e = 0; e < 8; e++)
                re[e] = f32_to_bf16(bf16_to_f32(re[e]) + bf16_to_f32(ae[e]));
            if (!rows)
                ((uint4 *)res)[v] = rv;
        }
        for (int e = 0; e < 8; e++) {
            float x = bf16_to_f32(re[e]);
            ss += x * x;
        }
    }
    float inv = rsqrtf(block_sum(ss, scratch) / (float)hidden + eps);

    for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
        uint4 rv = ((const uint4 *)res)[v];
        folio_bf16_bits *re = (folio_bf16_bits *)&rv;
        if (a && rows) { /* the sum was not written back: form it again */
            uint4 av = ((const uint4 *)a)[v];
            const folio_bf16_bits *ae = (const folio_bf16_bits *)&av;
            for (int e = 0; e < 8; e++)
                re[e] = f32_to_bf16(bf16_to_f32(re[e]) + bf16_to_f32(ae[e]));
        }
        uint4 wv = ((const uint4 *)weight)[v];
        const folio_bf16_bits *we = (const folio_bf16_bits *)&wv;
        uint4 ov;
        folio_bf16_bits *oe = (folio_bf16_bits *)&ov;
        for (int e = 0; e < 8; e++)
            oe[e] = f32_to_bf16(bf16_to_f32(we[e]) * round_bf16(bf16_to_f32(re[e]) * inv));
        ((uint4 *)o)[v] = ov;
    }
}

extern "C" cudaError_t folio_k_add_rmsnorm(folio_bf16_bits *out, folio_bf16_bits *residual,
                                           const folio_bf16_bits *add,
                                           const folio_bf16_bits *weight, const int32_t *rows,
                                           int num_rows, int hidden, float eps, cudaStream_t s)
{
    if (num_rows <= 0)
        return cudaSuccess;
    add_rmsnorm_kernel<<<num_rows, 256, 0, s>>>(out, residual, add, weight, rows, hidden, eps);
    return cudaGetLastError();
}
