/* The simulated worker: a backend behind worker/backend.h's step interface
 * that runs no model. It answers each step after the time a cost model gives
 * (or at once), samples tokens from the request's seed, and checks what a
 * real backend relies on, so that the scheduler can be tested at 10,000
 * requests without a GPU:
 *   - slots, block ids, block tables and counts in range;
 *   - FOLIO_TOKEN_FROM_PREV only for a slot that has sampled;
 *   - the KV cache is consistent: every position a step attends to was
 *     written, and holds the token chain of this very sequence (each KV
 *     entry stores a hash of its token and of the entry before it), so a
 *     block handed to two sequences at once, freed too early or shared by a
 *     wrong prefix-cache hit is an error, not a silent wrong answer.
 *
 * Cost model (an H200 running TinyLlama-1.1B, roughly):
 *   step_us = base_us + per_token_us * num_tokens + per_context_us * sum(context_len) */
#ifndef FOLIO_SIM_BACKEND_H
#define FOLIO_SIM_BACKEND_H

#include <stdint.h>

#include "backend.h"

struct folio_sim_options {
    int vocab_size;
    int eos_id;             /* -1: never sample EOS */
    double eos_probability; /* per sampled token */
    double base_us, per_token_us, per_context_us;
    double time_scale; /* 0: answer at once; 1: sleep the modelled time */
};

void folio_sim_options_default(struct folio_sim_options *o);

int folio_sim_backend_create(const struct folio_backend_options *opt,
                             const struct folio_sim_options *sim, struct folio_backend **out,
                             char *err, size_t errlen);

/* Modelled microseconds of every step so far (what a GPU would have spent). */
double folio_sim_backend_modelled_us(const struct folio_backend *b);

#endif
