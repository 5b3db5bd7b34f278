/* Structured outputs' token masks (grammar/grammar.h): each masked row's
 * logits outside its grammar's allowed tokens set to -inf before
 * folio_k_sample reads them, as the CPU sampler's folio_logits_apply_mask
 * does; bit i of word i / 32 set is token i allowed. */
#include "common.cuh"

#define TOKEN_MASK_THREADS 256

__global__ void __launch_bounds__(TOKEN_MASK_THREADS)
    token_mask_kernel(float *logits, int vocab, const uint32_t *masks, const int32_t *rows,
                      int words)
{
    const int m = blockIdx.y, w = blockIdx.x * TOKEN_MASK_THREADS + threadIdx.x;
    if (w >= words)
        return;
    const uint32_t bits = masks[(int64_t)m * words + w];
    if (bits == 0xffffffffu)
        return;
    float *row = logits + (int64_t)rows[m] * vocab;
    for (int b = 0; b < 32; b++) {
        const int v = w * 32 + b;
        if (v < vocab && !(bits >> b & 1u))
            row[v] = -INFINITY;
    }
}

extern "C" cudaError_t folio_k_token_mask(float *logits, int vocab, const uint32_t *masks,
                                          const int32_t *rows, int n, cudaStream_t s)
{
    if (n <= 0)
        return cudaSuccess;
    const int words = (vocab + 31) / 32;
    dim3 grid((words + TOKEN_MASK_THREADS - 1) / TOKEN_MASK_THREADS, n);
    token_mask_kernel<<<grid, TOKEN_MASK_THREADS, 0, s>>>(logits, vocab, masks, rows, words);
    return cudaGetLastError();
}
