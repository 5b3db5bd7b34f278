/* Structured outputs in the worker: one grammar matcher per slot (grammar/grammar.h), and the
 * masks of each step computed here, on the host, whatever the backend.
 *
 * A plan brings a sequence's grammar with its first sampling step on a slot, plus the tokens it
 * generated before a preemption, which the new matcher replays; the matcher is dropped when
 * another sequence takes the slot. Before a step, every constrained sequence that samples gets
 * its mask in its step entry (folio_step_seq.allowed), EOS in it only where the grammar accepts
 * and alone once the grammar is complete; after the step, its sampled token is committed. So a
 * step's masks need the previous step's tokens committed: the worker runs a step with
 * constrained sequences alone in its pipeline.
 *
 * A sequence whose grammar cannot go on (a mask past the engine's limits, a token it refuses, a
 * mask that the logit bias empties) samples unmasked and is marked failed; its result says so
 * and the scheduler ends it with an error. */
#ifndef FOLIO_WORKER_GRAMMAR_SLOTS_H
#define FOLIO_WORKER_GRAMMAR_SLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "ipc_records.h"

struct folio_grammar_slots;

/* The model's tokenizer read from model_dir, its vocab (vocab_size logits, the eos_ids that end
 * a sequence) and a compile cache, for max_seqs slots. 0, or -1 with a message. */
int folio_grammar_slots_new(const char *model_dir, int32_t vocab_size, const int *eos_ids,
                            int num_eos, int max_seqs, struct folio_grammar_slots **out, char *err,
                            size_t errlen);
void folio_grammar_slots_free(struct folio_grammar_slots *g);

/* A plan with a sequence that samples under a grammar. */
bool folio_grammar_plan_constrained(const struct folio_plan_view *v);

/* Before the step of plan v, whose batch entries are seqs[v->hdr->num_seqs]: matchers made where
 * the plan brings a grammar and dropped where an unconstrained sequence took the slot; each
 * constrained sampling sequence's mask into seqs[i].allowed (which lives until the next call). */
void folio_grammar_slots_prepare(struct folio_grammar_slots *g, const struct folio_plan_view *v,
                                 struct folio_step_seq *seqs);

/* After that step: each constrained sequence that sampled commits token_ids[i]. */
void folio_grammar_slots_commit(struct folio_grammar_slots *g, const int32_t *token_ids);

/* Whether sequence i of the last prepared step failed its grammar. */
bool folio_grammar_slots_failed(const struct folio_grammar_slots *g, int i);

#endif
