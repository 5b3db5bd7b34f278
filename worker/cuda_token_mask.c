#include "cuda_token_mask.h"

#include <stdio.h>
#include <string.h>

#include "folio_kernels.h"

cudaError_t folio_cuda_mask_init(struct folio_cuda_mask *m, int max_seqs, int vocab)
{
    memset(m, 0, sizeof *m);
    m->words = ((size_t)vocab + 31) / 32;
    m->max_seqs = max_seqs;
    size_t n = (size_t)max_seqs;
    cudaError_t e = cudaMalloc((void **)&m->dev, n * m->words * sizeof *m->dev);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->dev_rows, n * sizeof *m->dev_rows);
    for (int i = 0; e == cudaSuccess && i < FOLIO_CUDA_MASK_SLOTS; i++) {
        e = cudaMallocHost((void **)&m->host[i], n * m->words * sizeof *m->host[i]);
        if (e == cudaSuccess)
            e = cudaMallocHost((void **)&m->host_rows[i], n * sizeof *m->host_rows[i]);
    }
    return e;
}

bool folio_cuda_mask_in_batch(const struct folio_step_batch *batch)
{
    for (int i = 0; i < batch->num_seqs; i++)
        if (batch->seqs[i].sample && batch->seqs[i].allowed)
            return true;
    return false;
}

int folio_cuda_mask_upload(struct folio_cuda_mask *m, int slot,
                           const struct folio_step_batch *batch, const int *seq_row, cudaStream_t s,
                           char *err, size_t errlen)
{
    m->count = 0;
    uint32_t *host = m->host[slot];
    int32_t *rows = m->host_rows[slot];
    for (int i = 0; i < batch->num_seqs; i++) {
        const struct folio_step_seq *q = &batch->seqs[i];
        if (seq_row[i] < 0 || !q->allowed)
            continue;
        memcpy(host + (size_t)m->count * m->words, q->allowed, m->words * sizeof *host);
        rows[m->count++] = seq_row[i];
    }
    if (m->count == 0)
        return 0;
    cudaError_t e = cudaMemcpyAsync(m->dev, host, (size_t)m->count * m->words * sizeof *m->dev,
                                    cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(m->dev_rows, rows, (size_t)m->count * sizeof *m->dev_rows,
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
    for (int i = 0; i < FOLIO_CUDA_MASK_SLOTS; i++) {
        cudaFreeHost(m->host[i]);
        cudaFreeHost(m->host_rows[i]);
    }
    cudaFree(m->dev);
    cudaFree(m->dev_rows);
    memset(m, 0, sizeof *m);
}
