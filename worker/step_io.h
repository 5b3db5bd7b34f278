/* The worker's side of the step records: a decoded plan record (common/
 * ipc_records.h) becomes the backend's step batch (backend.h), and the
 * backend's step result becomes a result record. Kept apart from the
 * worker's main loop so that the scheduler's simulation test runs the very
 * same conversions. */
#ifndef FOLIO_WORKER_STEP_IO_H
#define FOLIO_WORKER_STEP_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "ipc_records.h"

struct folio_grammar_slots;
struct folio_grammar_step;

struct folio_step_io {
    int max_seqs, max_num_tokens;
    struct folio_grammar_slots *grammar; /* NULL: the backend applies no grammars */
    struct folio_step_seq *seqs;
    struct folio_step_result res;
    int32_t *num_logprobs; /* per sequence of the step being collected */
    int32_t *sampled;      /* per sequence: 1 when it sampled */
    int32_t *num_draft;    /* per sequence of the last batch: its draft positions */
    void *result_buf;
    size_t result_cap;
};

/* Buffers for steps of up to max_seqs sequences and max_num_tokens tokens. */
int folio_step_io_init(struct folio_step_io *io, int max_seqs, int max_num_tokens, char *err,
                       size_t errlen);
void folio_step_io_free(struct folio_step_io *io);

/* The batch for a plan (pointers into the plan record and io). Checks what the plan record
 * decoder cannot: block tables inside the plan, logprob counts, num_seqs within max_seqs,
 * grammars only where io has them. Its constrained sequences are bound to their grammars in gs
 * (NULL where io has none), and get their masks now, or with folio_step_io_fill_masks where
 * masks_later (the batch then says so). */
int folio_step_io_batch(struct folio_step_io *io, const struct folio_plan_view *v,
                        struct folio_grammar_step *gs, bool masks_later,
                        struct folio_step_batch *batch, char *err, size_t errlen);

/* The masks of the last batch, once every earlier step's tokens are committed. */
void folio_step_io_fill_masks(struct folio_step_io *io, struct folio_grammar_step *gs);

/* After the step of gs is collected into io->res: its constrained sequences commit their
 * tokens. */
void folio_step_io_commit(struct folio_step_io *io, struct folio_grammar_step *gs);

/* Encodes io->res (filled by collect for the plan v, whose grammars gs bound) as a result record in
 * io->result_buf; returns its length. status -1 with a message encodes a
 * failed step (num_seqs 0, the message after the header). num_draft: each sequence's draft
 * positions, whose samples follow as draft rows (NULL: none). */
size_t folio_step_io_encode_result(struct folio_step_io *io, const struct folio_grammar_step *gs,
                                   const struct folio_plan_header *plan, int32_t num_seqs,
                                   const int32_t *num_logprobs, const int32_t *num_draft,
                                   uint64_t backend_ns);
size_t folio_step_io_encode_failure(struct folio_step_io *io, uint64_t step_id,
                                    uint64_t plan_unix_ns, const char *message);

#endif
