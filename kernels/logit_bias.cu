/* A step's logit bias (common/sampling_params.h), added to the LM head's
 * logits before folio_k_sample reads them, so that every sampler path (split,
 * rows, one CTA a row) and the logprobs see it, as the CPU sampler does. */
#include "common.cuh"

#define LOGIT_BIAS_THREADS 256

__global__ void __launch_bounds__(LOGIT_BIAS_THREADS)
    logit_bias_kernel(float *logits, int vocab, const struct folio_k_logit_bias *bias, int n)
{
    int i = blockIdx.x * LOGIT_BIAS_THREADS + threadIdx.x;
    if (i >= n)
        return;
    struct folio_k_logit_bias b = bias[i];
    if (b.row < 0 || b.token < 0 || b.token >= vocab)
        return;
    /* Atomic: one token may carry the client's bias and a min_tokens ban. */
    atomicAdd(&logits[(int64_t)b.row * vocab + b.token], b.value);
}

extern "C" cudaError_t folio_k_logit_bias(float *logits, int vocab,
                                          const struct folio_k_logit_bias *bias, int n,
                                          cudaStream_t s)
{
    if (n <= 0)
        return cudaSuccess;
    int blocks = (n + LOGIT_BIAS_THREADS - 1) / LOGIT_BIAS_THREADS;
    logit_bias_kernel<<<blocks, LOGIT_BIAS_THREADS, 0, s>>>(logits, vocab, bias, n);
    return cudaGetLastError();
}
