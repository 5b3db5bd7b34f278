/* The CPU backend's weights as the ranks of tensor parallelism hold them (one rank: the whole
 * model): the matrices packed or widened by the backend's policy (cpu_matrix.h), norms and
 * biases in f32. */
#ifndef FOLIO_CPU_WEIGHTS_H
#define FOLIO_CPU_WEIGHTS_H

#include <stdlib.h>

#include "cpu_matrix.h"
#include "model.h"
#include "tp_shard.h"

/* The most ranks one worker emulates (a host's GPUs, at most). */
#define FOLIO_CPU_TP_MAX 8

struct cpu_layer {
    float *attn_norm, *mlp_norm;
    float *bq, *bk, *bv; /* Qwen2's projection biases; NULL when the model has none */
    struct cpu_matrix wq, wk, wv, wo, w_gate, w_up, w_down;
    /* The fast path's stacked products where the parts share a type: [q; k; v] and [gate; up]
     * rows (wq..wv, w_gate and w_up then empty); data NULL otherwise. */
    struct cpu_matrix wqkv, w_gate_up;
    /* [num_kv_blocks][16][the rank's kv_heads][head_dim]: f32 for the reference, f16 (as
     * uint16_t) for the fast path */
    void *k_cache, *v_cache;
    float k_scale, v_scale; /* the fp8 cache's scales (model.h) */
};

/* One rank's share (tp_shard.h): its heads' Q/K/V rows and O columns, its
 * intermediate features' gate/up rows and down columns, its vocabulary rows
 * of the embedding and the LM head, and its KV heads' cache. */
struct cpu_rank {
    struct folio_tp_shard shard;
    struct cpu_matrix embed, lm_head; /* lm_head.data == embed.data when the embeddings are tied */
    struct cpu_layer *layers;
};

static inline void *cpu_alloc_floats(size_t n)
{
    /* 64-byte aligned so that vector loads never straddle cache lines. */
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    return aligned_alloc(64, bytes ? bytes : 64);
}

/* Converts a tensor of `expect` elements to fp32, or -1 with err naming it. */
int cpu_convert_tensor(const struct folio_tensor *t, size_t expect, const char *what, float **out,
                       char *err, size_t errlen);

/* ranks[0 .. tp_size) with their shards of m's weights (KV caches not yet
 * allocated), or -1 with err set; what was loaded is freed by
 * cpu_free_ranks either way. linear: the policy of the layers' projections (q/k/v, o,
 * gate/up, down): the same as policy, or CPU_WEIGHTS_E4M3 (--quantization fp8; the
 * embedding and the LM head keep policy). */
int cpu_load_ranks(const struct folio_model *m, int tp_size, enum cpu_weight_policy policy,
                   enum cpu_weight_policy linear, struct cpu_rank *ranks, char *err, size_t errlen);

void cpu_free_ranks(struct cpu_rank *ranks, int tp_size, int num_layers);

#endif
