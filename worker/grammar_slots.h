/* Structured outputs in the worker: one grammar matcher per slot (grammar/grammar.h), and the
 * masks of each step computed here, on the host, whatever the backend.
 *
 * A plan brings a sequence's grammar with its first sampling step on a slot, plus the tokens it
 * generated before a preemption, which the new matcher replays; the matcher is dropped when
 * another sequence takes the slot. A step's constrained sequences are bound to their matchers
 * when its plan is read; each one that samples gets its mask in its step entry
 * (folio_step_seq.allowed), EOS in it only where the grammar accepts and alone once the grammar
 * is complete, once the previous step's tokens are committed; after the step, its sampled token
 * is committed. So the worker launches a constrained step's forward before the previous step's
 * tokens are known, and brings its masks later (folio_backend_ops.sample_masked).
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
 * a sequence) and a compile cache, for max_seqs slots; parallel: a step's masks may be filled on
 * several threads (not where the backend computes on the host's cores). 0, or -1 with a
 * message. */
int folio_grammar_slots_new(const char *model_dir, int32_t vocab_size, const int *eos_ids,
                            int num_eos, int max_seqs, bool parallel,
                            struct folio_grammar_slots **out, char *err, size_t errlen);
void folio_grammar_slots_free(struct folio_grammar_slots *g);

/* A plan with a sequence that samples under a grammar. */
bool folio_grammar_plan_constrained(const struct folio_plan_view *v);

/* What the slots keep of one step between its plan and its collect: per sequence, the slot
 * whose matcher it samples under (-1: none) and the request that matcher is for, and whether its
 * grammar failed. */
struct folio_grammar_step {
    int num_seqs;
    int32_t *masked_slot;
    uint64_t *request_id;
    bool *failed;
};
int folio_grammar_step_init(struct folio_grammar_step *st, int max_seqs);
void folio_grammar_step_free(struct folio_grammar_step *st);

/* When plan v is read: matchers made where it brings a grammar and dropped where an
 * unconstrained sequence took the slot; st records the step's constrained sampling sequences.
 * No masks yet: every seqs[i].allowed is NULL. */
void folio_grammar_slots_bind(struct folio_grammar_slots *g, const struct folio_plan_view *v,
                              struct folio_grammar_step *st, struct folio_step_seq *seqs);

/* Once every earlier step's tokens are committed: each constrained sampling sequence's mask into
 * seqs[i].allowed (which lives until the next fill). */
void folio_grammar_slots_fill(struct folio_grammar_slots *g, struct folio_grammar_step *st,
                              struct folio_step_seq *seqs);

/* After that step: each constrained sequence that sampled commits token_ids[i]. */
void folio_grammar_slots_commit(struct folio_grammar_slots *g, struct folio_grammar_step *st,
                                const int32_t *token_ids);

/* Whether sequence i of the step failed its grammar. */
bool folio_grammar_step_failed(const struct folio_grammar_step *st, int i);

#endif
