/* Sampling one token from a sequence's logits on the CPU.
 *
 * The order is vLLM's (V0 sampler): temperature, then the top-k, top-p and
 * min-p filters, each over what the previous one kept. The draw is the
 * exponential race that the GPU sampler uses too, so that the same seed gives
 * the same token on both backends:
 *
 *     token = argmax over kept i of  p_i / E_i,
 *     p_i   = exp(logit_i / T - max_j logit_j / T)      (unnormalised)
 *     E_i   = -log(folio_rng_uniform(seed, output_index, i))
 *
 * which draws i with probability p_i / sum p (the E_i are i.i.d. Exp(1)), and
 * depends only on (seed, output_index), never on the batch. Temperature 0 is
 * greedy: the argmax, the lowest id among equal logits.
 *
 * Logprobs (the sampled token's and the top-N) are taken from the log-softmax
 * of the logits before temperature, penalties and filters, as OpenAI and vLLM
 * report them; a logit bias (folio_logits_add_bias) is part of those logits,
 * as on the GPU.
 *
 * Penalties come first, as in vLLM: the repetition penalty over every token
 * of the prompt and output, then the frequency and presence penalties over
 * the output; they need the sequence's token history. */
#ifndef FOLIO_WORKER_SAMPLER_H
#define FOLIO_WORKER_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

struct folio_sample_result {
    int32_t token;
    float logprob; /* of token, under the unmodified distribution */
    int32_t num_top;
    int32_t top_ids[FOLIO_MAX_LOGPROBS]; /* by logprob descending, ties lowest id first */
    float top_logprobs[FOLIO_MAX_LOGPROBS];
};

/* A sequence's tokens so far, prompt then output: the last num_output of
 * ids[0..len) are the ones it generated. */
struct folio_token_history {
    const int32_t *ids;
    int32_t len;
    int32_t num_output;
};

/* Scratch buffers for one vocabulary size; one per thread that samples. */
struct folio_sampler;

struct folio_sampler *folio_sampler_new(int32_t vocab_size);
void folio_sampler_free(struct folio_sampler *s);

/* Adds a logit bias (common/sampling_params.h) to logits[vocab] in place, as
 * the CUDA backend does to its LM-head output: the bias is part of the logits
 * that the sampler, the logprobs and a step's reported logits see. Ids
 * outside the vocabulary are skipped (the backend has checked them). */
void folio_logits_add_bias(float *logits, int32_t vocab, const struct folio_logit_bias *bias,
                           int32_t num_bias);

/* Sets logits[i] to -inf for every i < vocab whose bit (bit i % 32 of
 * mask[i / 32]) is clear: a grammar's allowed tokens (grammar/grammar.h),
 * applied before folio_sample. */
void folio_logits_apply_mask(float *logits, int32_t vocab, const uint32_t *mask);

/* The logprob of `token` under logits[vocab] and the top num_top (a prompt
 * token's logprob, for echo): 0, or -1 with a message. */
int folio_token_logprobs(const float *logits, int32_t vocab, int32_t token, int32_t num_top,
                         struct folio_sample_result *out, char *err, size_t errlen);

/* Samples from logits[vocab_size] (not modified). p must have passed
 * folio_sampling_params_check; history may be NULL when p has no penalties.
 * Returns 0, or -1 when the logits hold a NaN (or are all -inf), with a
 * message. */
int folio_sample(struct folio_sampler *s, const float *logits,
                 const struct folio_sampling_params *p, uint32_t output_index,
                 const struct folio_token_history *history, struct folio_sample_result *out,
                 char *err, size_t errlen);

#endif
