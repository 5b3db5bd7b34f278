/* Embedding gather. A token id of FOLIO_TOKEN_FROM_PREV (-1) is read from the
 * ids the sequence's slot sampled last, which are already on the GPU. */
#include "common.cuh"

__global__ void embed_kernel(folio_bf16_bits *out, const folio_bf16_bits *embed,
                             const int32_t *token_ids, const int32_t *token_slot,
                             const int32_t *last_sampled, int hidden, int vocab)
{
    /* The step's first kernel: the penalty update after it may start at once
     * (it waits for this one to finish before it does). */
    pdl_trigger();
    int t = blockIdx.x;
    int id = embed_row(token_ids, token_slot, last_sampled, t, vocab);
    const uint4 *src = (const uint4 *)(embed + (int64_t)id * hidden);
    uint4 *dst = (uint4 *)(out + (int64_t)t * hidden);
    for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x)
        dst[i] = src[i];
}

extern "C" cudaError_t folio_k_embed(folio_bf16_bits *out, const folio_bf16_bits *embed,
                                     const int32_t *token_ids, const int32_t *token_slot,
                                     const int32_t *last_sampled, int num_tokens, int hidden,
                                     int vocab, cudaStream_t s)
{
    if (num_tokens <= 0)
        return cudaSuccess;
    embed_kernel<<<num_tokens, 128, 0, s>>>(out, embed, token_ids, token_slot, last_sampled, hidden,
                                            vocab);
    return cudaGetLastError();
}
