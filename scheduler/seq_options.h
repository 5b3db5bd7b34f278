/* What a request asks of its sequence beyond the prompt and the sampling
 * parameters, and what the policy does with it at each step: the stop token
 * ids (and EOS) that end it, min_tokens (which bans those in the sampler
 * until reached, as vLLM does), the client's logit bias, and the prompt
 * logprobs of echo. */
#ifndef FOLIO_SCHEDULER_SEQ_OPTIONS_H
#define FOLIO_SCHEDULER_SEQ_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc_records.h"
#include "sampling_params.h"

struct folio_request;

struct folio_seq_options {
    int min_tokens;
    bool ignore_eos;
    int num_stop_ids;
    int32_t *stop_ids;
    int num_bias;
    struct folio_logit_bias *bias;
    bool prompt_logprobs; /* echo with logprobs */
    int prompt_lp_sent;   /* prompt positions 1..prompt_lp_sent have their logprob sent */
};

/* 0, or -1 with why the request's options are invalid (a 400): more stop ids
 * or bias entries than allowed, a bias outside the vocabulary or range. */
int folio_seq_options_check(const struct folio_request *r, int vocab_size, char *msg, size_t len);

/* Copies the request's options (its lists too); false when out of memory,
 * with o left freeable. */
bool folio_seq_options_init(struct folio_seq_options *o, const struct folio_request *r);
void folio_seq_options_free(struct folio_seq_options *o);

/* The most logit bias entries one sequence brings to a plan. */
int folio_seq_options_max_bias(int num_eos_ids);

/* The bias of a sampling entry into out (NULL: only counted): the client's,
 * then, while fewer than min_tokens outputs exist, a ban (-inf) on EOS
 * (unless ignored) and every stop token id. Returns the number of entries. */
int folio_seq_options_plan_bias(const struct folio_seq_options *o, const int *eos_ids,
                                int num_eos_ids, int num_outputs, struct folio_logit_bias *out);

/* tok ends the sequence (EOS unless ignored, or a stop token id). */
bool folio_seq_options_is_stop(const struct folio_seq_options *o, const int *eos_ids,
                               int num_eos_ids, int32_t tok);

/* The prompt logprobs of a chunk [start, start + n) of a sequence whose
 * tokens start with num_prompt prompt tokens: the logprob of the prompt token
 * after each position that has one (the last prompt position's is the first
 * sampled token's), into the plan entry. */
void folio_seq_options_plan_prompt_lp(const struct folio_seq_options *o, const int32_t *tokens,
                                      int num_prompt, int start, int n, struct folio_plan_seq *out);

#endif
