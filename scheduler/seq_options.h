/* What a request asks of its sequence beyond the prompt and the sampling
 * parameters, and what the policy does with it at each step: the stop token
 * ids (and EOS) that end it, min_tokens (which bans those in the sampler
 * until reached, as vLLM does), the client's logit bias, the prompt
 * logprobs of echo, and its structured-output grammar, which the plan brings
 * to the worker with the sequence's first sampling step on a slot. */
#ifndef FOLIO_SCHEDULER_SEQ_OPTIONS_H
#define FOLIO_SCHEDULER_SEQ_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar_kind.h"
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
    /* Structured output: the grammar (its text owned here). EOS is the
     * grammar's to allow, so min_tokens does not ban it and ignore_eos does
     * not keep it from ending the sequence. */
    struct folio_seq_grammar grammar;
    bool grammar_sent; /* the worker's matcher for the current slot has it */
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

/* What a sampling entry must bring for the grammar (none once sent):
 * text bytes and replay ids, for a sequence with num_outputs tokens. */
void folio_seq_options_grammar_need(const struct folio_seq_options *o, int num_outputs,
                                    int *text_bytes, int *replay_ids);

/* The plan entry's grammar fields; for the first sampling entry on a slot,
 * the text at text[*text_at] and the outputs (outputs[num_outputs]) at
 * replay[*replay_at], both cursors advanced, and the grammar marked sent. */
void folio_seq_options_plan_grammar(struct folio_seq_options *o, bool sample,
                                    const int32_t *outputs, int num_outputs, int32_t *replay,
                                    int *replay_at, char *text, int *text_at,
                                    struct folio_plan_seq *out);

/* The prompt logprobs of a chunk [start, start + n) of a sequence whose
 * tokens start with num_prompt prompt tokens: the logprob of the prompt token
 * after each position that has one (the last prompt position's is the first
 * sampled token's), into the plan entry. */
void folio_seq_options_plan_prompt_lp(const struct folio_seq_options *o, const int32_t *tokens,
                                      int num_prompt, int start, int n, struct folio_plan_seq *out);

#endif
