/* Prompt logprobs on the CPU backend (echo with logprobs): the logprob of
 * each prompt token given the ones before it, with the top alternatives, from
 * the hidden state of the position before it, through the final norm and the
 * LM head one row at a time. Computed only for the sequences that ask, so the
 * step costs nothing more otherwise. */
#ifndef FOLIO_WORKER_CPU_PROMPT_LOGPROBS_H
#define FOLIO_WORKER_CPU_PROMPT_LOGPROBS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* One step's entries, sequence after sequence in batch order. */
struct folio_prompt_lps {
    int32_t count;
    int32_t *ids;        /* [max_num_tokens]: the token each entry is for */
    float *logprobs;     /* [max_num_tokens] */
    int32_t *top_ids;    /* [max_num_tokens * FOLIO_MAX_LOGPROBS], -1 padded */
    float *top_logprobs; /* [max_num_tokens * FOLIO_MAX_LOGPROBS] */
};

int folio_prompt_lps_alloc(struct folio_prompt_lps *p, int max_num_tokens);
void folio_prompt_lps_free(struct folio_prompt_lps *p);

/* Writes the logits of the batch's token row t (its final hidden state
 * through the final norm and the LM head) into logits[vocab]. */
typedef void (*folio_row_logits_fn)(void *ctx, int32_t t, float *logits);

/* Computes every entry the batch asks for into out; scratch holds [vocab]
 * floats. 0, or -1 with a message (NaN logits, a missing next token). */
int folio_cpu_prompt_logprobs(const struct folio_step_batch *batch, int32_t vocab,
                              folio_row_logits_fn row_logits, void *ctx, float *scratch,
                              struct folio_prompt_lps *out, char *err, size_t errlen);

/* Copies the entries into a step result's prompt arrays (when it has them). */
void folio_prompt_lps_copy(const struct folio_prompt_lps *p, struct folio_step_result *res);

#endif
