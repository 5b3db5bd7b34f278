/* config.json of a Llama-family model, read the way transformers' LlamaConfig
 * reads it: the sizes are required, the rest take LlamaConfig's defaults.
 * Anything this engine would compute wrongly (biases other than Qwen2's, rope
 * types it does not implement; sliding windows, once the context served is
 * known) is refused with the field's name. */
#include "model_config.h"
#include "error.h"
#include "gguf.h"

#include <jansson.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Model types whose checkpoints have Llama's tensors and arithmetic; qwen2
 * adds biases to the q, k and v projections. */
static const char *const llama_like_types[] = {"llama", "mistral", "qwen2"};

struct reader {
    const char *path;
    json_t *root;
    char *err;
    size_t errlen;
};

/* An integer field in [min, INT32_MAX]; absent (or null) gives def, or an
 * error when required. */
static int get_int(struct reader *r, const char *key, bool required, int def, int min, int *out)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v)) {
        if (required) {
            folio_set_err(r->err, r->errlen, "%s: missing required field \"%s\"", r->path, key);
            return -1;
        }
        *out = def;
        return 0;
    }
    /* Some exporters write integral sizes as 2048.0. */
    double x;
    if (json_is_integer(v))
        x = (double)json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))
        x = json_real_value(v);
    else {
        folio_set_err(r->err, r->errlen, "%s: field \"%s\" must be an integer", r->path, key);
        return -1;
    }
    if (x < min || x > 2147483647.0) {
        folio_set_err(r->err, r->errlen, "%s: field \"%s\" is %.0f, must be in [%d, 2147483647]",
                      r->path, key, x, min);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* A positive finite number field; absent (or null) gives def. */
static int get_positive(struct reader *r, json_t *obj, const char *objname, const char *key,
                        bool required, float def, float *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required) {
            folio_set_err(r->err, r->errlen, "%s: missing required field \"%s%s%s\"", r->path,
                          objname, *objname ? "." : "", key);
            return -1;
        }
        *out = def;
        return 0;
    }
    /* Kept as a float: a value outside float's normal range would become
     * infinity or 0 (and the conversion of a double beyond FLT_MAX is
     * undefined), so it is refused here with the range. */
    if (!json_is_number(v) || !(json_number_value(v) >= FLT_MIN) ||
        !(json_number_value(v) <= FLT_MAX)) {
        folio_set_err(r->err, r->errlen,
                      "%s: field \"%s%s%s\" must be a positive number between %g and %g", r->path,
                      objname, *objname ? "." : "", key, (double)FLT_MIN, (double)FLT_MAX);
        return -1;
    }
    *out = (float)json_number_value(v);
    return 0;
}

static int get_bool(struct reader *r, const char *key, bool def, bool *out)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) {
        folio_set_err(r->err, r->errlen, "%s: field \"%s\" must be true or false", r->path, key);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

static int read_token_ids(struct reader *r, struct folio_model_config *cfg)
{
    json_t *bos = json_object_get(r->root, "bos_token_id");
    cfg->bos_token_id = -1;
    if (bos && !json_is_null(bos)) {
        if (!json_is_integer(bos) || json_integer_value(bos) < 0 ||
            json_integer_value(bos) >= cfg->vocab_size) {
            folio_set_err(r->err, r->errlen,
                          "%s: field \"bos_token_id\" must be a token id below %d", r->path,
                          cfg->vocab_size);
            return -1;
        }
        cfg->bos_token_id = (int)json_integer_value(bos);
    }
    json_t *eos = json_object_get(r->root, "eos_token_id");
    cfg->num_eos_token_ids = 0;
    if (!eos || json_is_null(eos))
        return 0;
    size_t n = json_is_array(eos) ? json_array_size(eos) : 1;
    if (!json_is_array(eos) && !json_is_integer(eos)) {
        folio_set_err(r->err, r->errlen,
                      "%s: field \"eos_token_id\" must be a token id or a list of them", r->path);
        return -1;
    }
    if (n > FOLIO_MAX_EOS_IDS) {
        folio_set_err(r->err, r->errlen,
                      "%s: field \"eos_token_id\" lists %zu ids, at most %d supported", r->path, n,
                      FOLIO_MAX_EOS_IDS);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_array(eos) ? json_array_get(eos, i) : eos;
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= cfg->vocab_size) {
            folio_set_err(r->err, r->errlen,
                          "%s: field \"eos_token_id\" must hold token ids below %d", r->path,
                          cfg->vocab_size);
            return -1;
        }
        cfg->eos_token_ids[cfg->num_eos_token_ids++] = (int)json_integer_value(v);
    }
    return 0;
}

static int read_rope_scaling(struct reader *r, struct folio_model_config *cfg)
{
    struct folio_rope_scaling *rs = &cfg->rope_scaling;
    memset(rs, 0, sizeof *rs);
    rs->type = FOLIO_ROPE_NONE;
    json_t *obj = json_object_get(r->root, "rope_scaling");
    if (!obj || json_is_null(obj))
        return 0;
    if (!json_is_object(obj)) {
        folio_set_err(r->err, r->errlen, "%s: field \"rope_scaling\" must be an object or null",
                      r->path);
        return -1;
    }
    /* transformers renamed "type" to "rope_type"; files carry either. */
    json_t *jt = json_object_get(obj, "rope_type");
    if (!jt)
        jt = json_object_get(obj, "type");
    if (!json_is_string(jt)) {
        folio_set_err(r->err, r->errlen,
                      "%s: field \"rope_scaling.rope_type\" missing or not a string", r->path);
        return -1;
    }
    const char *type = json_string_value(jt);
    if (strcmp(type, "default") == 0)
        return 0;
    if (strcmp(type, "linear") == 0) {
        rs->type = FOLIO_ROPE_LINEAR;
        return get_positive(r, obj, "rope_scaling", "factor", true, 1.0f, &rs->factor);
    }
    if (strcmp(type, "llama3") != 0) {
        folio_set_err(r->err, r->errlen,
                      "%s: field \"rope_scaling.rope_type\" is \"%s\", which is not supported "
                      "(supported: llama3, linear, default)",
                      r->path, type);
        return -1;
    }
    rs->type = FOLIO_ROPE_LLAMA3;
    float orig;
    if (get_positive(r, obj, "rope_scaling", "factor", true, 0, &rs->factor) != 0 ||
        get_positive(r, obj, "rope_scaling", "low_freq_factor", true, 0, &rs->low_freq_factor) !=
            0 ||
        get_positive(r, obj, "rope_scaling", "high_freq_factor", true, 0, &rs->high_freq_factor) !=
            0 ||
        get_positive(r, obj, "rope_scaling", "original_max_position_embeddings", true, 0, &orig) !=
            0)
        return -1;
    if (orig != floorf(orig) || orig > 2147483647.0f) {
        folio_set_err(
            r->err, r->errlen,
            "%s: field \"rope_scaling.original_max_position_embeddings\" must be an integer",
            r->path);
        return -1;
    }
    rs->original_max_position_embeddings = (int)orig;
    /* The smoothing between the two wavelength bounds divides by their difference. */
    if (!(rs->high_freq_factor > rs->low_freq_factor)) {
        folio_set_err(
            r->err, r->errlen,
            "%s: field \"rope_scaling.high_freq_factor\" (%g) must exceed low_freq_factor (%g)",
            r->path, rs->high_freq_factor, rs->low_freq_factor);
        return -1;
    }
    return 0;
}

/* Features of other architectures that share model_type with Llama-like
 * files; computing without them would silently give wrong logits. Qwen2's
 * q/k/v biases are its architecture's, not a flag. */
static int read_architecture_flags(struct reader *r, struct folio_model_config *cfg)
{
    const char *bias_keys[] = {"attention_bias", "mlp_bias"};
    for (size_t i = 0; i < 2; i++) {
        if (json_is_true(json_object_get(r->root, bias_keys[i]))) {
            folio_set_err(r->err, r->errlen, "%s: field \"%s\" is true; biases are not supported",
                          r->path, bias_keys[i]);
            return -1;
        }
    }
    cfg->qkv_bias = strcmp(cfg->model_type, "qwen2") == 0;
    json_t *act = json_object_get(r->root, "hidden_act");
    if (act && !(json_is_string(act) && strcmp(json_string_value(act), "silu") == 0)) {
        folio_set_err(r->err, r->errlen, "%s: field \"hidden_act\" must be \"silu\"", r->path);
        return -1;
    }
    /* Qwen2 files name a window that only use_sliding_window switches on. */
    bool use_window = true;
    if (cfg->qkv_bias && get_bool(r, "use_sliding_window", false, &use_window) != 0)
        return -1;
    cfg->sliding_window = 0;
    json_t *sw = json_object_get(r->root, "sliding_window");
    if (use_window && sw && !json_is_null(sw))
        return get_int(r, "sliding_window", false, 0, 1, &cfg->sliding_window);
    return 0;
}

static int read_config(struct reader *r, struct folio_model_config *cfg)
{
    if (!json_is_object(r->root)) {
        folio_set_err(r->err, r->errlen, "%s: not a JSON object", r->path);
        return -1;
    }
    json_t *mt = json_object_get(r->root, "model_type");
    if (!json_is_string(mt)) {
        folio_set_err(r->err, r->errlen, "%s: missing required field \"model_type\"", r->path);
        return -1;
    }
    const char *type = json_string_value(mt);
    bool known = false;
    for (size_t i = 0; i < sizeof llama_like_types / sizeof *llama_like_types; i++)
        known = known || strcmp(type, llama_like_types[i]) == 0;
    if (!known || strlen(type) >= sizeof cfg->model_type) {
        folio_set_err(
            r->err, r->errlen,
            "%s: field \"model_type\" is \"%s\", which is not supported (supported: llama, "
            "mistral, qwen2)",
            r->path, type);
        return -1;
    }
    snprintf(cfg->model_type, sizeof cfg->model_type, "%s", type);

    if (get_int(r, "hidden_size", true, 0, 1, &cfg->hidden_size) != 0 ||
        get_int(r, "intermediate_size", true, 0, 1, &cfg->intermediate_size) != 0 ||
        get_int(r, "num_hidden_layers", true, 0, 1, &cfg->num_layers) != 0 ||
        get_int(r, "num_attention_heads", true, 0, 1, &cfg->num_heads) != 0 ||
        get_int(r, "vocab_size", true, 0, 1, &cfg->vocab_size) != 0)
        return -1;
    if (get_int(r, "num_key_value_heads", false, cfg->num_heads, 1, &cfg->num_kv_heads) != 0)
        return -1;
    json_t *jhd = json_object_get(r->root, "head_dim");
    if (cfg->hidden_size % cfg->num_heads != 0 && (!jhd || json_is_null(jhd))) {
        folio_set_err(r->err, r->errlen,
                      "%s: field \"hidden_size\" (%d) is not a multiple of \"num_attention_heads\" "
                      "(%d) and no \"head_dim\" is given",
                      r->path, cfg->hidden_size, cfg->num_heads);
        return -1;
    }
    if (get_int(r, "head_dim", false, cfg->hidden_size / cfg->num_heads, 1, &cfg->head_dim) != 0 ||
        get_int(r, "max_position_embeddings", false, 2048, 1, &cfg->max_position_embeddings) != 0)
        return -1;
    if (get_positive(r, r->root, "", "rms_norm_eps", false, 1e-6f, &cfg->rms_norm_eps) != 0 ||
        get_positive(r, r->root, "", "rope_theta", false, 10000.0f, &cfg->rope_theta) != 0)
        return -1;
    if (get_bool(r, "tie_word_embeddings", false, &cfg->tie_word_embeddings) != 0)
        return -1;
    if (cfg->num_heads % cfg->num_kv_heads != 0) {
        folio_set_err(r->err, r->errlen,
                      "%s: field \"num_attention_heads\" (%d) is not a multiple of "
                      "\"num_key_value_heads\" (%d)",
                      r->path, cfg->num_heads, cfg->num_kv_heads);
        return -1;
    }
    if (cfg->head_dim % 2 != 0) {
        folio_set_err(r->err, r->errlen,
                      "%s: field \"head_dim\" (%d) must be even for rotary embeddings", r->path,
                      cfg->head_dim);
        return -1;
    }
    /* Products that index the weights must fit an int. */
    if ((long long)cfg->num_heads * cfg->head_dim > 2147483647LL) {
        folio_set_err(r->err, r->errlen, "%s: \"num_attention_heads\" * \"head_dim\" is too large",
                      r->path);
        return -1;
    }
    if (read_token_ids(r, cfg) != 0 || read_rope_scaling(r, cfg) != 0 ||
        read_architecture_flags(r, cfg) != 0)
        return -1;
    return folio_model_config_read_quantization(r->path, r->root, cfg, r->err, r->errlen);
}

/* A number field of generation_config.json into *out (and *has); absent or
 * null leaves them. skip: the value transformers' GenerationConfig holds by
 * default, which vLLM does not take as the model's (it reads the file's
 * differences from those defaults: a top_k of 50 is no recommendation). */
static int get_sampling(struct reader *r, const char *key, bool integer, double skip, bool *has,
                        double *out)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v) || (integer && !json_is_integer(v))) {
        folio_set_err(r->err, r->errlen, "%s: field \"%s\" must be %s", r->path, key,
                      integer ? "an integer" : "a number");
        return -1;
    }
    double x = json_number_value(v);
    if (x == skip)
        return 0;
    *has = true;
    *out = x;
    return 0;
}

/* The sampling settings of generation_config.json, checked as a request's
 * would be. */
static int read_sampling_defaults(struct reader *r, struct folio_sampling_defaults *d)
{
    double t = 0, p = 0, k = 0, m = 0, rp = 0;
    memset(d, 0, sizeof *d);
    if (get_sampling(r, "temperature", false, 1.0, &d->has_temperature, &t) != 0 ||
        get_sampling(r, "top_p", false, 1.0, &d->has_top_p, &p) != 0 ||
        get_sampling(r, "top_k", true, 50, &d->has_top_k, &k) != 0 ||
        get_sampling(r, "min_p", false, NAN, &d->has_min_p, &m) != 0 ||
        get_sampling(r, "repetition_penalty", false, 1.0, &d->has_repetition_penalty, &rp) != 0)
        return -1;
    char why[256];
    if (folio_sampling_defaults_set(d, t, p, k, m, rp, why, sizeof why) != 0) {
        folio_set_err(r->err, r->errlen, "%s: %s", r->path, why);
        return -1;
    }
    return 0;
}

/* generation_config.json: its eos_token_id (a number or a list) joins
 * config.json's, since chat models end their turns with a token there
 * (Llama-3-Instruct's <|eot_id|>) that config.json may not list; and its
 * sampling settings become the model's defaults. */
static int read_generation_config(const char *model_dir, struct folio_model_config *cfg, char *err,
                                  size_t errlen)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/generation_config.json", model_dir) >=
        sizeof path) {
        folio_set_err(err, errlen, "%s: path too long", model_dir);
        return -1;
    }
    if (access(path, F_OK) != 0)
        return 0;
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        folio_set_err(err, errlen, "%s: cannot read: %s (line %d, column %d)", path, jerr.text,
                      jerr.line, jerr.column);
        return -1;
    }
    struct folio_model_config gen = {.vocab_size = cfg->vocab_size};
    struct reader r = {.path = path, .root = root, .err = err, .errlen = errlen};
    int rc = json_is_object(root) ? read_token_ids(&r, &gen) : 0;
    if (rc == 0 && json_is_object(root))
        rc = read_sampling_defaults(&r, &cfg->sampling_defaults);
    json_decref(root);
    if (rc != 0)
        return -1;
    for (int i = 0; i < gen.num_eos_token_ids; i++) {
        bool known = false;
        for (int j = 0; j < cfg->num_eos_token_ids; j++)
            known = known || cfg->eos_token_ids[j] == gen.eos_token_ids[i];
        if (known)
            continue;
        if (cfg->num_eos_token_ids == FOLIO_MAX_EOS_IDS) {
            folio_set_err(err, errlen,
                          "%s: field \"eos_token_id\" brings the end-of-sequence ids to more than "
                          "%d (with config.json's)",
                          path, FOLIO_MAX_EOS_IDS);
            return -1;
        }
        cfg->eos_token_ids[cfg->num_eos_token_ids++] = gen.eos_token_ids[i];
    }
    return 0;
}

int folio_model_config_check_context(const struct folio_model_config *cfg, int context_len,
                                     char *err, size_t errlen)
{
    if (cfg->sliding_window > 0 && cfg->sliding_window < context_len) {
        folio_set_err(err, errlen,
                      "config.json: field \"sliding_window\" is %d, shorter than the %d-token "
                      "context served; sliding-window attention is not implemented, so the "
                      "context must be at most %d tokens",
                      cfg->sliding_window, context_len, cfg->sliding_window);
        return -1;
    }
    return 0;
}

int folio_model_config_load(const char *model_dir, struct folio_model_config *cfg, char *err,
                            size_t errlen)
{
    char path[4096];
    int is_gguf = folio_gguf_resolve(model_dir, path, sizeof path, err, errlen);
    if (is_gguf < 0)
        return -1;
    if (is_gguf) {
        struct folio_gguf *g;
        if (folio_gguf_open(path, &g, err, errlen) != 0)
            return -1;
        int rc = folio_model_config_from_gguf(g, cfg, err, errlen);
        folio_gguf_close(g);
        return rc;
    }
    if ((size_t)snprintf(path, sizeof path, "%s/config.json", model_dir) >= sizeof path) {
        folio_set_err(err, errlen, "%s: path too long", model_dir);
        return -1;
    }
    memset(cfg, 0, sizeof *cfg);
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        folio_set_err(err, errlen, "%s: cannot read: %s (line %d, column %d)", path, jerr.text,
                      jerr.line, jerr.column);
        return -1;
    }
    struct reader r = {.path = path, .root = root, .err = err, .errlen = errlen};
    int rc = read_config(&r, cfg);
    json_decref(root);
    if (rc == 0)
        rc = read_generation_config(model_dir, cfg, err, errlen);
    return rc;
}
