/* A Llama-family model directory opened for serving: its config and the
 * weight tensors it must have, each checked against the config. */
#ifndef FOLIO_MODEL_H
#define FOLIO_MODEL_H

#include <stdbool.h>

#include "model_config.h"
#include "safetensors.h"

struct folio_layer_weights {
    const struct folio_tensor *attn_norm; /* [hidden] input_layernorm */
    const struct folio_tensor *wq;        /* [heads*head_dim, hidden] */
    const struct folio_tensor *wk;        /* [kv_heads*head_dim, hidden] */
    const struct folio_tensor *wv;        /* [kv_heads*head_dim, hidden] */
    const struct folio_tensor *wo;        /* [hidden, heads*head_dim] */
    const struct folio_tensor *mlp_norm;  /* [hidden] post_attention_layernorm */
    const struct folio_tensor *w_gate;    /* [intermediate, hidden] */
    const struct folio_tensor *w_up;      /* [intermediate, hidden] */
    const struct folio_tensor *w_down;    /* [hidden, intermediate] */
    /* Qwen2's projection biases ([q_dim], [kv_dim], [kv_dim]); NULL when the
     * architecture has none (Llama). */
    const struct folio_tensor *bq, *bk, *bv;
    /* The FP8 KV cache's scales for this layer's K and V: the checkpoint's calibrated ones
     * (self_attn.k_scale / v_scale), else FOLIO_KV_FP8_SCALE, vLLM's default. */
    float k_scale, v_scale;
};

struct folio_model {
    struct folio_model_config config;
    struct folio_checkpoint *checkpoint;
    const struct folio_tensor *embed;      /* [vocab, hidden] */
    const struct folio_tensor *final_norm; /* [hidden] */
    const struct folio_tensor *lm_head;    /* [vocab, hidden]; == embed when tied */
    struct folio_layer_weights *layers;    /* [num_layers] */
    bool kv_scales;                        /* the layers' KV scales came from the checkpoint */
};

/* Opens DIR (config.json + safetensors) and binds every weight by its Hugging
 * Face name (model.layers.N.self_attn.q_proj.weight, ...). A missing or
 * misshapen tensor is an error naming the file and the tensor. */
int folio_model_open(const char *model_dir, struct folio_model **out, char *err, size_t errlen);
/* The same with the checkpoint's flags (FOLIO_CHECKPOINT_KEEP_BLOCKS: for the CPU's fast path). */
int folio_model_open_flags(const char *model_dir, unsigned flags, struct folio_model **out,
                           char *err, size_t errlen);
void folio_model_close(struct folio_model *m);

#endif
