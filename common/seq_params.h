/* What one sequence asks of the engine, defined once: the frontend fills it
 * from the parsed request, the Submit message carries it (proto/seq_params_codec.c
 * maps it to the wire and back), the scheduler keeps it with the request, and
 * its sampling part travels whole in every plan record and step. */
#ifndef FOLIO_SEQ_PARAMS_H
#define FOLIO_SEQ_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar_kind.h"
#include "sampling_params.h"

struct folio_seq_params {
    struct folio_sampling_params sampling;
    bool has_seed;           /* false: the scheduler draws sampling.seed */
    int32_t max_tokens;      /* <= 0: up to the context length */
    int32_t min_tokens;      /* EOS and stop ids banned until this many tokens */
    const int32_t *stop_ids; /* [num_stop_ids] */
    int32_t num_stop_ids;
    bool ignore_eos;
    const struct folio_logit_bias *logit_bias; /* [num_logit_bias] */
    int32_t num_logit_bias;
    bool prompt_logprobs;             /* echo with logprobs: each prompt token's logprob, once */
    struct folio_seq_grammar grammar; /* structured output: the text must match it */
};

#endif
