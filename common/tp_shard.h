/* Tensor parallelism's sharding, the one contract every backend follows
 * (Megatron's): rank r of N holds heads [r*H/N, (r+1)*H/N) of Q and the same
 * share of the KV heads (its KV cache holds only those), a 1/N share of the
 * MLP's intermediate features, and a 1/N share of the vocabulary for the
 * embedding and the LM head. Q, K, V, gate and up are split by their output
 * rows; O and down by their input columns, so each rank's product is a
 * partial sum that an all-reduce completes; the embedding's rows are summed
 * the same way (one rank owns each token id) and the LM head's logits are
 * gathered. Norms are replicated. */
#ifndef FOLIO_TP_SHARD_H
#define FOLIO_TP_SHARD_H

#include <stddef.h>

#include "model_config.h"

/* What rank `rank` of `size` holds. */
struct folio_tp_shard {
    int rank, size;
    int heads, head0;       /* query heads: count, first */
    int kv_heads, kv_head0; /* key/value heads */
    int inter, inter0;      /* MLP intermediate features */
    int vocab, vocab0;      /* vocabulary rows of the embedding and the LM head */
};

/* The shard of rank `rank` for a model of config c split `size` ways, or -1
 * with err naming the size that does not divide (heads, KV heads,
 * intermediate size or vocabulary) and the flag. */
int folio_tp_shard_plan(const struct folio_model_config *c, int rank, int size,
                        struct folio_tp_shard *s, char *err, size_t errlen);

/* How a rank cuts a row-major [rows][cols] weight. */
enum folio_tp_tensor {
    FOLIO_TP_Q,       /* q_proj [heads*head_dim][hidden] and its bias: rows */
    FOLIO_TP_KV,      /* k_proj, v_proj [kv_heads*head_dim][hidden] and biases: rows */
    FOLIO_TP_O,       /* o_proj [hidden][heads*head_dim]: columns */
    FOLIO_TP_GATE_UP, /* gate_proj, up_proj [inter][hidden]: rows */
    FOLIO_TP_DOWN,    /* down_proj [hidden][inter]: columns */
    FOLIO_TP_VOCAB,   /* embed_tokens, lm_head [vocab][hidden]: rows */
    FOLIO_TP_REPLICA, /* norms: whole */
};

/* The block of rows [row0, row0 + rows) and columns [col0, col0 + cols) of
 * a [total_rows][total_cols] tensor that the shard holds. */
struct folio_tp_block {
    size_t row0, rows, col0, cols;
};

struct folio_tp_block folio_tp_block_of(const struct folio_model_config *c,
                                        const struct folio_tp_shard *s, enum folio_tp_tensor t,
                                        size_t total_rows, size_t total_cols);

/* Copies the shard's block of src ([total_rows][total_cols] floats) into dst
 * ([rows][cols]). */
void folio_tp_copy_block(float *dst, const float *src, size_t total_cols, struct folio_tp_block b);

#endif
