/* The CUDA backend's structured-output masks: a step's masks (each sampling
 * sequence's folio_step_seq.allowed, for its LM-head row) go up on the
 * compute stream and cut the logits to the grammar's tokens before the
 * sampler (kernels/token_mask.cu), after the logit bias. Steps that carry a
 * mask run eagerly, never as a decode graph, whose kernels and arguments
 * are fixed at capture. */
#ifndef FOLIO_WORKER_CUDA_TOKEN_MASK_H
#define FOLIO_WORKER_CUDA_TOKEN_MASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend.h"

struct folio_cuda_mask {
    uint32_t *host, *dev;          /* [cap][words] */
    int32_t *host_rows, *dev_rows; /* [cap]: each mask's LM-head row */
    int cap;                       /* masks both buffers hold */
    int count;                     /* masks of the step being queued */
};

/* Some sampling sequence of the batch has a mask. */
bool folio_cuda_mask_in_batch(const struct folio_step_batch *batch);

/* Gathers the batch's masks (seq_row: each sequence's LM-head row, -1 when it
 * does not sample; vocab sets the words of a mask) and copies them up on
 * stream s, after whatever the stream runs before. */
int folio_cuda_mask_upload(struct folio_cuda_mask *m, const struct folio_step_batch *batch,
                           const int *seq_row, int vocab, cudaStream_t s, char *err, size_t errlen);

/* Applies the uploaded masks to logits [rows, vocab] on stream s. */
cudaError_t folio_cuda_mask_apply(const struct folio_cuda_mask *m, float *logits, int vocab,
                                  cudaStream_t s);

void folio_cuda_mask_free(struct folio_cuda_mask *m);

#endif
