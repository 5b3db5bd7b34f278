/* The architecture of a Llama-family model, read from its config.json or GGUF file. */
#ifndef FOLIO_MODEL_CONFIG_H
#define FOLIO_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "fp8.h" /* enum folio_quantization */
#include "sampling_params.h"

#define FOLIO_MAX_EOS_IDS 8

enum folio_rope_scaling_type {
    FOLIO_ROPE_NONE = 0,
    FOLIO_ROPE_LLAMA3, /* Llama-3.1 frequency-dependent scaling */
    FOLIO_ROPE_LINEAR, /* positions divided by factor */
};

struct folio_rope_scaling {
    enum folio_rope_scaling_type type;
    float factor;
    float low_freq_factor;
    float high_freq_factor;
    int original_max_position_embeddings;
};

struct folio_model_config {
    char model_type[32]; /* "llama", "mistral" or "qwen2" */
    int hidden_size;
    int intermediate_size;
    int num_layers;
    int num_heads;
    int num_kv_heads;
    int head_dim; /* from config, or hidden_size / num_heads */
    int vocab_size;
    int max_position_embeddings;
    float rms_norm_eps;
    float rope_theta;
    struct folio_rope_scaling rope_scaling;
    bool tie_word_embeddings;
    bool qkv_bias; /* Qwen2: the q, k and v projections add a bias */
    /* Sliding-window attention over the last N positions (Mistral, Qwen2 with
     * use_sliding_window); 0 when every position sees the whole context. */
    int sliding_window;
    int bos_token_id; /* -1 when absent */
    /* config.json's eos_token_id (a number or a list) and then those of
     * generation_config.json not already listed: generation stops at any. */
    int eos_token_ids[FOLIO_MAX_EOS_IDS];
    int num_eos_token_ids;
    /* The sampling settings the model recommends (generation_config.json's
     * temperature, top_p, top_k, min_p, repetition_penalty; a GGUF's
     * general.sampling.*), for requests that leave them out. */
    struct folio_sampling_defaults sampling_defaults;
    /* config.json's quantization_config: FOLIO_QUANT_FP8 where the checkpoint ships FP8
     * weights (compressed-tensors' float-quantized or naive-quantized, vLLM's "fp8"), which
     * implies --quantization fp8; quant_method is its method, "" for none. */
    enum folio_quantization quantization;
    char quant_method[24];
};

/* Reads DIR/config.json (and DIR/generation_config.json when present), or the
 * metadata of a GGUF file when DIR is one (or a folder holding one; see
 * folio_gguf_resolve). Returns 0, or -1 with a message naming the file and the
 * field or key in err. */
int folio_model_config_load(const char *model_dir, struct folio_model_config *cfg, char *err,
                            size_t errlen);

struct json_t;
/* config.json's quantization_config (root is the whole file, path names it) into
 * cfg->quantization and quant_method (model_config_quant.c): FP8 checkpoints are taken, and
 * anything else (another quant_method, 4-bit or integer weights, group or block scales) is an
 * error naming the field and its value, never a silent unquantized run. */
int folio_model_config_read_quantization(const char *path, const struct json_t *root,
                                         struct folio_model_config *cfg, char *err, size_t errlen);

struct folio_gguf;
/* The same from an open GGUF file's llama.* and tokenizer.ggml.* keys
 * (model_config_gguf.c). */
int folio_model_config_from_gguf(const struct folio_gguf *g, struct folio_model_config *cfg,
                                 char *err, size_t errlen);

/* Whether this engine computes the model exactly for sequences of up to
 * context_len positions: a sliding window shorter than that is refused (with
 * the field and the largest context that would be served), since full
 * attention would silently differ from the model's own. */
int folio_model_config_check_context(const struct folio_model_config *cfg, int context_len,
                                     char *err, size_t errlen);

#endif
