#include "cuda_logit_bias.h"

#include <stdio.h>
#include <stdlib.h>

bool folio_cuda_bias_in_batch(const struct folio_step_batch *batch)
{
    for (int i = 0; i < batch->num_seqs; i++)
        if (batch->seqs[i].sample && batch->seqs[i].num_bias > 0)
            return true;
    return false;
}

static int grow(struct folio_cuda_bias *b, int need, char *err, size_t errlen)
{
    if (need <= b->cap)
        return 0;
    int cap = need < 256 ? 256 : need * 2;
    struct folio_k_logit_bias *h = realloc(b->host, (size_t)cap * sizeof *h);
    if (!h) {
        snprintf(err, errlen, "cuda backend: out of memory for %d logit bias entries", need);
        return -1;
    }
    b->host = h;
    /* cudaFree waits for the device: the old buffer's readers are done. */
    cudaFree(b->dev);
    b->dev = NULL;
    b->cap = 0;
    cudaError_t e = cudaMalloc((void **)&b->dev, (size_t)cap * sizeof *b->dev);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda backend: %d logit bias entries: %s", need,
                 cudaGetErrorString(e));
        return -1;
    }
    b->cap = cap;
    return 0;
}

int folio_cuda_bias_upload(struct folio_cuda_bias *b, const struct folio_step_batch *batch,
                           const int *seq_row, cudaStream_t s, char *err, size_t errlen)
{
    int n = 0;
    for (int i = 0; i < batch->num_seqs; i++)
        if (seq_row[i] >= 0)
            n += batch->seqs[i].num_bias;
    b->count = 0;
    if (n == 0)
        return 0;
    if (grow(b, n, err, errlen) != 0)
        return -1;
    for (int i = 0; i < batch->num_seqs; i++) {
        const struct folio_step_seq *q = &batch->seqs[i];
        for (int k = 0; seq_row[i] >= 0 && k < q->num_bias; k++)
            b->host[b->count++] =
                (struct folio_k_logit_bias){seq_row[i], q->bias[k].token, q->bias[k].value};
    }
    /* From pageable memory the copy is staged before the call returns, so the
     * host array may be refilled by the next step at once. */
    cudaError_t e =
        cudaMemcpyAsync(b->dev, b->host, (size_t)n * sizeof *b->dev, cudaMemcpyHostToDevice, s);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda backend: logit bias upload: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

cudaError_t folio_cuda_bias_apply(const struct folio_cuda_bias *b, float *logits, int vocab,
                                  cudaStream_t s)
{
    return folio_k_logit_bias(logits, vocab, b->dev, b->count, s);
}

void folio_cuda_bias_free(struct folio_cuda_bias *b)
{
    free(b->host);
    cudaFree(b->dev);
    b->host = NULL;
    b->dev = NULL;
    b->cap = b->count = 0;
}
