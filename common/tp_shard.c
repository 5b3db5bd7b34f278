#include "tp_shard.h"

#include <stdio.h>
#include <string.h>

static int divides(int n, int size, const char *what, char *err, size_t errlen)
{
    if (n % size == 0)
        return 0;
    snprintf(err, errlen, "--tensor-parallel-size %d does not divide the model's %s (%d)", size,
             what, n);
    return -1;
}

int folio_tp_shard_plan(const struct folio_model_config *c, int rank, int size,
                        struct folio_tp_shard *s, char *err, size_t errlen)
{
    if (size < 1 || rank < 0 || rank >= size) {
        snprintf(err, errlen, "tensor parallelism: rank %d of %d", rank, size);
        return -1;
    }
    if (divides(c->num_heads, size, "num_attention_heads", err, errlen) ||
        divides(c->num_kv_heads, size, "num_key_value_heads", err, errlen) ||
        divides(c->intermediate_size, size, "intermediate_size", err, errlen) ||
        divides(c->vocab_size, size, "vocab_size", err, errlen))
        return -1;
    memset(s, 0, sizeof *s);
    s->rank = rank;
    s->size = size;
    s->heads = c->num_heads / size;
    s->head0 = rank * s->heads;
    s->kv_heads = c->num_kv_heads / size;
    s->kv_head0 = rank * s->kv_heads;
    s->inter = c->intermediate_size / size;
    s->inter0 = rank * s->inter;
    s->vocab = c->vocab_size / size;
    s->vocab0 = rank * s->vocab;
    return 0;
}

struct folio_tp_block folio_tp_block_of(const struct folio_model_config *c,
                                        const struct folio_tp_shard *s, enum folio_tp_tensor t,
                                        size_t total_rows, size_t total_cols)
{
    struct folio_tp_block b = {0, total_rows, 0, total_cols};
    size_t hd = (size_t)c->head_dim;
    switch (t) {
    case FOLIO_TP_Q:
        b.row0 = (size_t)s->head0 * hd;
        b.rows = (size_t)s->heads * hd;
        break;
    case FOLIO_TP_KV:
        b.row0 = (size_t)s->kv_head0 * hd;
        b.rows = (size_t)s->kv_heads * hd;
        break;
    case FOLIO_TP_O:
        b.col0 = (size_t)s->head0 * hd;
        b.cols = (size_t)s->heads * hd;
        break;
    case FOLIO_TP_GATE_UP:
        b.row0 = (size_t)s->inter0;
        b.rows = (size_t)s->inter;
        break;
    case FOLIO_TP_DOWN:
        b.col0 = (size_t)s->inter0;
        b.cols = (size_t)s->inter;
        break;
    case FOLIO_TP_VOCAB:
        b.row0 = (size_t)s->vocab0;
        b.rows = (size_t)s->vocab;
        break;
    case FOLIO_TP_REPLICA:
        break;
    }
    return b;
}

void folio_tp_copy_block(float *dst, const float *src, size_t total_cols, struct folio_tp_block b)
{
    for (size_t r = 0; r < b.rows; r++)
        memcpy(dst + r * b.cols, src + (b.row0 + r) * total_cols + b.col0, b.cols * sizeof *dst);
}
