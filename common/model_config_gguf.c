/* A Llama (or Qwen2) model's hyperparameters from a GGUF file's metadata, the
 * keys llama.cpp's converter writes (ARCH.embedding_length, ...), into the
 * same struct config.json fills, with the same checks. What the engine would
 * compute wrongly (another architecture, partial rotary, YaRN or llama3 rope
 * frequency factors, different key and value head sizes) is refused with the
 * key's name. */
#include "error.h"
#include "gguf.h"
#include "model_config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct gguf_reader {
    const struct folio_gguf *g;
    const char *path;
    const char *arch; /* the keys' prefix: "llama" or "qwen2" */
    char *err;
    size_t errlen;
};

/* ARCH.key as an int in [min, INT32_MAX]; absent gives def, or an error when
 * required (def < 0). */
static int get_int(struct gguf_reader *r, const char *key, int def, int min, int *out)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", r->arch, key);
    const struct folio_gguf_kv *kv = folio_gguf_find(r->g, full);
    if (!kv && def >= 0) {
        *out = def;
        return 0;
    }
    int64_t v;
    if (folio_gguf_get_int(r->g, full, &v, r->err, r->errlen) != 0)
        return -1;
    if (v < min || v > 2147483647) {
        folio_set_err(r->err, r->errlen, "%s: key '%s' is %lld, must be in [%d, 2147483647]",
                      r->path, full, (long long)v, min);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A positive finite number at ARCH.key; absent gives def. */
static int get_positive(struct gguf_reader *r, const char *key, float def, float *out)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", r->arch, key);
    if (!folio_gguf_find(r->g, full)) {
        *out = def;
        return 0;
    }
    double v;
    if (folio_gguf_get_float(r->g, full, &v, r->err, r->errlen) != 0)
        return -1;
    if (!(v > 0) || !isfinite(v) || v > 3.0e38) {
        folio_set_err(r->err, r->errlen, "%s: key '%s' must be a positive number", r->path, full);
        return -1;
    }
    *out = (float)v;
    return 0;
}

/* tokenizer.ggml.KEY as a token id below vocab, or -1 when absent. */
static int token_id(struct gguf_reader *r, const char *key, int vocab, int *out)
{
    char full[96];
    snprintf(full, sizeof full, "tokenizer.ggml.%s", key);
    *out = -1;
    if (!folio_gguf_find(r->g, full))
        return 0;
    int64_t v;
    if (folio_gguf_get_int(r->g, full, &v, r->err, r->errlen) != 0)
        return -1;
    if (v < 0 || v >= vocab) {
        folio_set_err(r->err, r->errlen, "%s: key '%s' is %lld, not a token id below %d", r->path,
                      full, (long long)v, vocab);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* The vocabulary: ARCH.vocab_size, else the token list's length. */
static int read_vocab(struct gguf_reader *r, struct folio_model_config *cfg)
{
    int from_key = 0;
    if (get_int(r, "vocab_size", 0, 0, &from_key) != 0)
        return -1;
    if (from_key > 0) {
        cfg->vocab_size = from_key;
        return 0;
    }
    const struct folio_gguf_kv *toks = folio_gguf_find(r->g, "tokenizer.ggml.tokens");
    enum folio_gguf_vtype et;
    uint64_t n;
    if (!toks || folio_gguf_kv_array(toks, &et, &n) != 0 || n < 1 || n > 2147483647) {
        folio_set_err(r->err, r->errlen,
                      "%s: no '%s.vocab_size' and no 'tokenizer.ggml.tokens' array to count the "
                      "vocabulary from",
                      r->path, r->arch);
        return -1;
    }
    cfg->vocab_size = (int)n;
    return 0;
}

/* BOS, and EOS plus the end-of-turn ids chat models stop on. */
static int read_token_ids(struct gguf_reader *r, struct folio_model_config *cfg)
{
    if (token_id(r, "bos_token_id", cfg->vocab_size, &cfg->bos_token_id) != 0)
        return -1;
    const char *eos_keys[] = {"eos_token_id", "eot_token_id", "eom_token_id"};
    cfg->num_eos_token_ids = 0;
    for (size_t k = 0; k < sizeof eos_keys / sizeof *eos_keys; k++) {
        int id;
        if (token_id(r, eos_keys[k], cfg->vocab_size, &id) != 0)
            return -1;
        bool seen = id < 0;
        for (int i = 0; i < cfg->num_eos_token_ids && !seen; i++)
            seen = cfg->eos_token_ids[i] == id;
        if (!seen)
            cfg->eos_token_ids[cfg->num_eos_token_ids++] = id;
    }
    return 0;
}

static int read_rope(struct gguf_reader *r, struct folio_model_config *cfg)
{
    memset(&cfg->rope_scaling, 0, sizeof cfg->rope_scaling);
    if (get_positive(r, "rope.freq_base", 10000.0f, &cfg->rope_theta) != 0)
        return -1;
    int rot;
    if (get_int(r, "rope.dimension_count", cfg->head_dim, 1, &rot) != 0)
        return -1;
    if (rot != cfg->head_dim) {
        folio_set_err(r->err, r->errlen,
                      "%s: key '%s.rope.dimension_count' is %d but heads are %d wide; partial "
                      "rotary embeddings are not supported",
                      r->path, r->arch, rot, cfg->head_dim);
        return -1;
    }
    if (folio_gguf_find_tensor(r->g, "rope_freqs.weight")) {
        folio_set_err(r->err, r->errlen,
                      "%s: tensor 'rope_freqs.weight' (llama3 rope frequency factors) is not "
                      "supported from GGUF",
                      r->path);
        return -1;
    }
    const char *type = "none";
    size_t len = 4;
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", r->arch);
    const struct folio_gguf_kv *kt = folio_gguf_find(r->g, key);
    if (kt && folio_gguf_kv_string(kt, &type, &len) != 0) {
        folio_set_err(r->err, r->errlen, "%s: key '%s' must be a string", r->path, key);
        return -1;
    }
    float factor = 0;
    if (len == 6 && memcmp(type, "linear", 6) == 0) {
        cfg->rope_scaling.type = FOLIO_ROPE_LINEAR;
        return get_positive(r, "rope.scaling.factor", 1.0f, &cfg->rope_scaling.factor);
    }
    if (!(len == 4 && memcmp(type, "none", 4) == 0)) {
        folio_set_err(r->err, r->errlen,
                      "%s: key '%s' is '%.*s', which is not supported (supported: none, linear)",
                      r->path, key, (int)(len < 64 ? len : 64), type);
        return -1;
    }
    /* Older converters wrote linear scaling as one key. */
    if (get_positive(r, "rope.scale_linear", 0.0f, &factor) != 0)
        return -1;
    if (factor > 0 && factor != 1.0f) {
        cfg->rope_scaling.type = FOLIO_ROPE_LINEAR;
        cfg->rope_scaling.factor = factor;
    }
    return 0;
}

static int read_sizes(struct gguf_reader *r, struct folio_model_config *cfg)
{
    if (get_int(r, "embedding_length", -1, 1, &cfg->hidden_size) != 0 ||
        get_int(r, "feed_forward_length", -1, 1, &cfg->intermediate_size) != 0 ||
        get_int(r, "block_count", -1, 1, &cfg->num_layers) != 0 ||
        get_int(r, "attention.head_count", -1, 1, &cfg->num_heads) != 0 ||
        get_int(r, "attention.head_count_kv", cfg->num_heads, 1, &cfg->num_kv_heads) != 0 ||
        get_int(r, "context_length", 2048, 1, &cfg->max_position_embeddings) != 0)
        return -1;
    int def_hd = cfg->hidden_size % cfg->num_heads == 0 ? cfg->hidden_size / cfg->num_heads : -1;
    int vdim;
    if (get_int(r, "attention.key_length", def_hd, 1, &cfg->head_dim) != 0 ||
        get_int(r, "attention.value_length", cfg->head_dim, 1, &vdim) != 0)
        return -1;
    if (vdim != cfg->head_dim) {
        folio_set_err(r->err, r->errlen,
                      "%s: key '%s.attention.value_length' (%d) differs from the key length "
                      "(%d); not supported",
                      r->path, r->arch, vdim, cfg->head_dim);
        return -1;
    }
    if (cfg->num_heads % cfg->num_kv_heads != 0 || cfg->head_dim % 2 != 0 ||
        (long long)cfg->num_heads * cfg->head_dim > 2147483647LL) {
        folio_set_err(r->err, r->errlen,
                      "%s: keys '%s.attention.head_count' (%d), 'head_count_kv' (%d) and the "
                      "head size (%d) must divide evenly, with an even head size",
                      r->path, r->arch, cfg->num_heads, cfg->num_kv_heads, cfg->head_dim);
        return -1;
    }
    return get_positive(r, "attention.layer_norm_rms_epsilon", 1e-5f, &cfg->rms_norm_eps);
}

/* general.sampling.KEY into *out (and *has) when present: a number, or for
 * top_k an integer. */
static int sampling_key(struct gguf_reader *r, const char *key, bool integer, bool *has,
                        double *out)
{
    char full[96];
    snprintf(full, sizeof full, "general.sampling.%s", key);
    const struct folio_gguf_kv *kv = folio_gguf_find(r->g, full);
    if (!kv)
        return 0;
    int64_t i;
    if (integer ? folio_gguf_kv_int(kv, &i) != 0 : folio_gguf_kv_float(kv, out) != 0) {
        folio_set_err(r->err, r->errlen, "%s: key '%s' must be %s", r->path, full,
                      integer ? "an integer" : "a number");
        return -1;
    }
    if (integer)
        *out = (double)i;
    *has = true;
    return 0;
}

/* The sampling settings the file recommends, under the keys llama.cpp reads
 * (general.sampling.temp, top_p, top_k, min_p, penalty_repeat), checked as
 * a request's would be. */
static int read_sampling_defaults(struct gguf_reader *r, struct folio_sampling_defaults *d)
{
    double t = 0, p = 0, k = 0, m = 0, rp = 0;
    memset(d, 0, sizeof *d);
    if (sampling_key(r, "temp", false, &d->has_temperature, &t) != 0 ||
        sampling_key(r, "top_p", false, &d->has_top_p, &p) != 0 ||
        sampling_key(r, "top_k", true, &d->has_top_k, &k) != 0 ||
        sampling_key(r, "min_p", false, &d->has_min_p, &m) != 0 ||
        sampling_key(r, "penalty_repeat", false, &d->has_repetition_penalty, &rp) != 0)
        return -1;
    char why[256];
    if (folio_sampling_defaults_set(d, t, p, k, m, rp, why, sizeof why) != 0) {
        folio_set_err(r->err, r->errlen, "%s: general.sampling.*: %s", r->path, why);
        return -1;
    }
    return 0;
}

int folio_model_config_from_gguf(const struct folio_gguf *g, struct folio_model_config *cfg,
                                 char *err, size_t errlen)
{
    struct gguf_reader r = {.g = g, .path = folio_gguf_path(g), .err = err, .errlen = errlen};
    memset(cfg, 0, sizeof *cfg);
    const char *arch;
    size_t len;
    if (folio_gguf_get_string(g, "general.architecture", &arch, &len, err, errlen) != 0)
        return -1;
    /* Qwen2 is Llama with biases on q, k and v; its converter keeps Hugging
     * Face's row order (llama.cpp ropes it by halves). */
    if (len == 5 && memcmp(arch, "llama", 5) == 0) {
        r.arch = "llama";
    } else if (len == 5 && memcmp(arch, "qwen2", 5) == 0) {
        r.arch = "qwen2";
        cfg->qkv_bias = true;
    } else {
        folio_set_err(err, errlen,
                      "%s: key 'general.architecture' is '%.*s', which Folio does not load from "
                      "GGUF (supported: llama, qwen2)",
                      r.path, (int)(len < 64 ? len : 64), arch);
        return -1;
    }
    snprintf(cfg->model_type, sizeof cfg->model_type, "%s", r.arch);
    if (read_sizes(&r, cfg) != 0 || read_vocab(&r, cfg) != 0 || read_rope(&r, cfg) != 0 ||
        read_token_ids(&r, cfg) != 0 || read_sampling_defaults(&r, &cfg->sampling_defaults) != 0)
        return -1;
    /* No output.weight: the LM head is the embedding, as llama.cpp reads it. */
    cfg->tie_word_embeddings = folio_gguf_find_tensor(g, "output.weight") == NULL;
    return 0;
}
