/* The CUDA backend's structured-output masks: a step's masks (each sampling
 * sequence's folio_step_seq.allowed, for its LM-head row) go up on the
 * compute stream and cut the logits to the grammar's tokens before the
 * sampler (kernels/token_mask.cu), after the logit bias. Such a step's
 * sampling runs eagerly after its forward (a decode step's forward still
 * replays its graph), so its masks may come after the launch, while the
 * forward runs (folio_backend_ops.sample_masked). */
#ifndef FOLIO_WORKER_CUDA_TOKEN_MASK_H
#define FOLIO_WORKER_CUDA_TOKEN_MASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend.h"

/* Host staging per in-flight step: a slot's pinned masks are refilled only
 * once its step is collected, so their copy up is never overtaken. */
#define FOLIO_CUDA_MASK_SLOTS 2

struct folio_cuda_mask {
    uint32_t *host[FOLIO_CUDA_MASK_SLOTS];     /* pinned [max_seqs][words] */
    int32_t *host_rows[FOLIO_CUDA_MASK_SLOTS]; /* pinned [max_seqs]: each mask's LM-head row */
    uint32_t *dev;                             /* [max_seqs][words] */
    int32_t *dev_rows;                         /* [max_seqs] */
    size_t words;                              /* (vocab + 31) / 32 */
    int max_seqs;
    int count; /* masks of the step being queued */
};

cudaError_t folio_cuda_mask_init(struct folio_cuda_mask *m, int max_seqs, int vocab);

/* Some sampling sequence of the batch has a mask. */
bool folio_cuda_mask_in_batch(const struct folio_step_batch *batch);

/* Gathers the batch's masks (seq_row: each sequence's LM-head row, -1 when it
 * does not sample) into staging slot `slot` and copies them up on stream s,
 * after whatever the stream runs before. */
int folio_cuda_mask_upload(struct folio_cuda_mask *m, int slot,
                           const struct folio_step_batch *batch, const int *seq_row, cudaStream_t s,
                           char *err, size_t errlen);

/* Applies the uploaded masks to logits [rows, vocab] on stream s. */
cudaError_t folio_cuda_mask_apply(const struct folio_cuda_mask *m, float *logits, int vocab,
                                  cudaStream_t s);

void folio_cuda_mask_free(struct folio_cuda_mask *m);

#endif
