/* The per-slot state that the repetition, frequency and presence penalties
 * need (folio_kernels.h, folio_k_penalty_update), kept on the GPU so that a
 * decode step never waits for the host.
 *
 * worker/sampler.c defines the penalties over the sequence's tokens as the
 * CPU backend fed them, by position: every token of [0, context_len) is
 * "seen" (repetition penalty), and the last output_index positions are the
 * output (frequency and presence penalties). Decode steps add one output
 * token each, so the state grows by increments. A prefill, though, cannot
 * always classify its tokens: after a preemption the scheduler re-prefills
 * prompt + generated tokens in chunks, each carrying the final output_index,
 * and only the chunk that samples knows where the prompt ends. So the tokens
 * also go into a by-position history, and the slot's state is rebuilt from it
 * at the first sampling step after the sequence (re)started at position 0:
 * one pass over vocab + context, once per prefill. */
#include "common.cuh"

#define PENALTY_THREADS 512

__global__ void __launch_bounds__(PENALTY_THREADS)
    penalty_update_kernel(uint32_t *state, int32_t *history, int32_t *rebuild,
                          const struct folio_k_penalty_seq *seqs, const int32_t *token_ids,
                          const int32_t *last_sampled, int vocab, int max_ctx)
{
    /* Launched with PDL, the kernels run alongside the embedding gather before
     * them (embed_kernel, or embed_rmsnorm_kernel with the first norm), and the
     * first layer's kernel after them starts (and issues its weight loads) at
     * once. That kernel's wait then covers this kernel only, so every CTA
     * here waits for the gather before it exits, although it reads nothing
     * the gather writes. */
    pdl_trigger();
    pdl_wait();
    struct folio_k_penalty_seq q = seqs[blockIdx.x];
    if (!(q.flags & FOLIO_K_PEN_TRACK) || q.num_new <= 0 || q.slot < 0 || q.context_len > max_ctx ||
        q.num_new > q.context_len)
        return;
    int start = q.context_len - q.num_new;
    int out_from = q.context_len - q.output_index; /* first output position */
    int32_t *hist = history + (int64_t)q.slot * max_ctx;
    uint32_t *st = state + (int64_t)q.slot * vocab;
    bool stale = start == 0 || rebuild[q.slot] != 0;
    bool samples = (q.flags & FOLIO_K_PEN_SAMPLES) != 0;

    for (int j = threadIdx.x; j < q.num_new; j += blockDim.x) {
        int id = token_ids[q.first_token + j];
        if (id < 0)
            id = last_sampled[q.slot];
        hist[start + j] = id;
        if (!stale && id >= 0 && id < vocab) {
            atomicOr(&st[id], FOLIO_K_PEN_SEEN);
            if (start + j >= out_from)
                atomicAdd(&st[id], 1u);
        }
    }
    if (!stale)
        return;
    if (!samples) { /* a prefill chunk: wait for the one that samples */
        if (threadIdx.x == 0)
            rebuild[q.slot] = 1;
        return;
    }
    for (int i = threadIdx.x; i < vocab; i += blockDim.x)
        st[i] = 0;
    __syncthreads(); /* the zeroes and this step's history entries, for the whole CTA */
    for (int pos = threadIdx.x; pos < q.context_len; pos += blockDim.x) {
        int id = hist[pos];
        if (id < 0 || id >= vocab)
            continue;
        atomicOr(&st[id], FOLIO_K_PEN_SEEN);
        if (pos >= out_from)
            atomicAdd(&st[id], 1u);
    }
    if (threadIdx.x == 0)
        rebuild[q.slot] = 0;
}

extern "C" cudaError_t folio_k_penalty_update(uint32_t *state, int32_t *history, int32_t *rebuild,
                                              const struct folio_k_penalty_seq *seqs, int num_seqs,
                                              const int32_t *token_ids, const int32_t *last_sampled,
                                              int vocab, int max_ctx, int pdl, cudaStream_t s)
{
    if (num_seqs <= 0)
        return cudaSuccess;
    cudaError_t e =
        launch_pdl(penalty_update_kernel, dim3(num_seqs), dim3(PENALTY_THREADS), 0, s, pdl != 0,
                   state, history, rebuild, seqs, token_ids, last_sampled, vocab, max_ctx);
    return e != cudaSuccess ? e : cudaGetLastError();
}
