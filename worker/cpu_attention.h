/* The CPU backend's attention: causal grouped-query attention of a step's new tokens over their
 * sequences' paged KV cache, one chunk of the thread pool per (token, head): the reference over
 * an f32 cache, the fast path over an f16 cache with the kernel table's dot products, and either
 * over an e4m3 cache (--kv-cache-dtype fp8) read back through the codes' table. Also how a
 * token's K or V row goes into the cache, for each type. */
#ifndef FOLIO_CPU_ATTENTION_H
#define FOLIO_CPU_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cpu_kernels.h"
#include "cpu_pool.h"
#include "model_config.h"
#include "tp_shard.h"

/* The KV cache's element type. */
enum cpu_kv_type {
    CPU_KV_F32,  /* the reference's, plain loops */
    CPU_KV_F16,  /* the fast path's, the kernel table's loops */
    CPU_KV_E4M3, /* --kv-cache-dtype fp8: codes of x / scale (common/fp8.h), either path */
};

/* Bytes of one cached value. */
size_t cpu_kv_elem_bytes(enum cpu_kv_type type);

/* x[0..n) into the cache at element offset off: as it is, in f16, or as e4m3(x / scale). */
void cpu_kv_write(enum cpu_kv_type type, const struct cpu_kernels *kern, void *cache, size_t off,
                  const float *x, int n, float scale);

/* The n values at element offset off as attention reads them (code x scale for e4m3). */
void cpu_kv_read(enum cpu_kv_type type, const void *cache, size_t off, float *out, int n,
                 float scale);

/* One layer of one rank for the step's ntok tokens. */
struct cpu_attention {
    const struct folio_model_config *cfg;
    const struct cpu_kernels *kern;
    enum cpu_kv_type kv;
    const struct folio_step_batch *batch;
    const int32_t *tok_seq, *tok_pos; /* each token's sequence in batch and position */
    const float *q;                   /* [ntok][the rank's heads][head_dim], RoPE applied */
    float *out;                       /* [ntok][the rank's heads][head_dim] */
    float *scores;                    /* [threads][scores_cap] */
    size_t scores_cap;
    const struct folio_tp_shard *sh;
    const void *k_cache, *v_cache; /* [blocks][16][the rank's kv_heads][head_dim] */
    float k_scale, v_scale;        /* CPU_KV_E4M3: the layer's (a value is code x scale) */
    int ntok;
};

/* Where (block, pos) starts in a rank's cache of kv_heads heads, in elements. */
static inline size_t cpu_kv_offset(const struct folio_model_config *c, int kv_heads, int32_t block,
                                   int32_t pos)
{
    return (((size_t)block * FOLIO_KV_BLOCK_SIZE + (size_t)(pos % FOLIO_KV_BLOCK_SIZE)) *
            (size_t)kv_heads) *
           (size_t)c->head_dim;
}

void cpu_attention_run(struct cpu_pool *pool, const struct cpu_attention *a);

#endif
