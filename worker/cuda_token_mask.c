#include "cuda_token_mask.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio_kernels.h"

bool folio_cuda_mask_in_batch(const struct folio_step_batch *batch)
{
    for (int i = 0; i < batch->num_seqs; i++)
        if (batch->seqs[i].sample && batch->seqs[i].allowed)
            return true;
    return false;
}

static int grow(struct folio_cuda_mask *m, int need, size_t words, char *err, size_t errlen)
{
    if (need <= m->cap)
        return 0;
    int cap = need < 16 ? 16 : need * 2;
    uint32_t *h = realloc(m->host, (size_t)cap * words * sizeof *h);
    int32_t *hr = h ? realloc(m->host_rows, (size_t)cap * sizeof *hr) : NULL;
    if (h)
        m->host = h;
    if (hr)
        m->host_rows = hr;
    if (!h || !hr) {
        snprintf(err, errlen, "cuda backend: out of memory for %d token masks", need);
        return -1;
    }
    /* cudaFree waits for the device: the old buffers' readers are done. */
    cudaFree(m->dev);
    cudaFree(m->dev_rows);
    m->dev = NULL;
    m->dev_rows = NULL;
    m->cap = 0;
    cudaError_t e = cudaMalloc((void **)&m->dev, (size_t)cap * words * sizeof *m->dev);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->dev_rows, (size_t)cap * sizeof *m->dev_rows);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda backend: %d token masks: %s", need, cudaGetErrorString(e));
        return -1;
    }
    m->cap = cap;
    return 0;
}

int folio_cuda_mask_upload(struct folio_cuda_mask *m, const struct folio_step_batch *batch,
                           const int *seq_row, int vocab, cudaStream_t s, char *err, size_t errlen)
{
    const size_t words = ((size_t)vocab + 31) / 32;
    int n = 0;
    for (int i = 0; i < batch->num_seqs; i++)
        if (seq_row[i] >= 0 && batch->seqs[i].allowed)
            n++;
    m->count = 0;
    if (n == 0)
        return 0;
    if (grow(m, n, words, err, errlen) != 0)
        return -1;
    for (int i = 0; i < batch->num_seqs; i++) {
        const struct folio_step_seq *q = &batch->seqs[i];
        if (seq_row[i] < 0 || !q->allowed)
            continue;
        memcpy(m->host + (size_t)m->count * words, q->allowed, words * sizeof *m->host);
        m->host_rows[m->count++] = seq_row[i];
    }
    /* From pageable memory the copies are staged before the calls return, so
     * the host arrays may be refilled by the next step at once. */
    cudaError_t e = cudaMemcpyAsync(m->dev, m->host, (size_t)n * words * sizeof *m->dev,
                                    cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(m->dev_rows, m->host_rows, (size_t)n * sizeof *m->dev_rows,
                            cudaMemcpyHostToDevice, s);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda backend: token mask upload: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

cudaError_t folio_cuda_mask_apply(const struct folio_cuda_mask *m, float *logits, int vocab,
                                  cudaStream_t s)
{
    return folio_k_token_mask(logits, vocab, m->dev, m->dev_rows, m->count, s);
}

void folio_cuda_mask_free(struct folio_cuda_mask *m)
{
    free(m->host);
    free(m->host_rows);
    cudaFree(m->dev);
    cudaFree(m->dev_rows);
    memset(m, 0, sizeof *m);
}
