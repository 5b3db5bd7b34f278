/* The CUDA backend's logit bias: a step's entries (each sampling sequence's
 * folio_step_seq.bias, on its LM-head row) go up on the compute stream and
 * are added to the logits before the sampler (kernels/logit_bias.cu). Steps
 * that carry a bias run eagerly, never as a decode graph, whose kernels and
 * arguments are fixed at capture. */
#ifndef FOLIO_WORKER_CUDA_LOGIT_BIAS_H
#define FOLIO_WORKER_CUDA_LOGIT_BIAS_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "folio_kernels.h"

struct folio_cuda_bias {
    struct folio_k_logit_bias *host; /* the step's entries, pageable */
    struct folio_k_logit_bias *dev;
    int cap;   /* entries both buffers hold */
    int count; /* entries of the step being queued */
};

/* Some sampling sequence of the batch has a logit bias. */
bool folio_cuda_bias_in_batch(const struct folio_step_batch *batch);

/* Gathers the batch's entries (seq_row: each sequence's LM-head row, -1 when
 * it does not sample) and copies them up on stream s, after whatever the
 * stream runs before (an earlier step still reading the device buffer). */
int folio_cuda_bias_upload(struct folio_cuda_bias *b, const struct folio_step_batch *batch,
                           const int *seq_row, cudaStream_t s, char *err, size_t errlen);

/* Adds the uploaded entries to logits [rows, vocab] on stream s. */
cudaError_t folio_cuda_bias_apply(const struct folio_cuda_bias *b, float *logits, int vocab,
                                  cudaStream_t s);

void folio_cuda_bias_free(struct folio_cuda_bias *b);

#endif
