/* config.json's quantization_config, as the checkpoints users download write it. Folio takes
 * FP8 weights with a scale per output row or per tensor (common/checkpoint_fp8.c), the two
 * ways they ship:
 *   - compressed-tensors (llm-compressor), format "float-quantized" (or "naive-quantized", the
 *     same tensors): every config_group's weights num_bits 8, type float, strategy channel or
 *     tensor; input_activations, if any, num_bits 8 float, dynamic or static;
 *   - "fp8" (vLLM's and AutoFP8's serialization): activation_scheme dynamic or static.
 * Static activation scales are accepted and not used: Folio scales each token's activations by
 * its own amax. Everything else (AWQ, GPTQ, bitsandbytes, 4-bit or integer weights, group or
 * block scales) is refused by its field and value: serving such a file as if it were bf16 would
 * be wrong, and Folio has no kernels for it. The `ignore` list needs nothing: the LM head and
 * embedding stay unquantized in Folio, and a layer projection the file leaves in bf16 is
 * quantized at load as --quantization fp8 does (worker/backend.c says so in the log). */
#include "error.h"
#include "model_config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct qreader {
    const char *path;
    char *err;
    size_t errlen;
};

/* The value as compact JSON, for a message (at most len - 1 characters). */
static void value_text(const json_t *v, char *buf, size_t len)
{
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    snprintf(buf, len, "%s", s ? s : "absent");
    free(s);
}

static int refuse(struct qreader *q, const char *field, const json_t *v, const char *why)
{
    char val[96];
    value_text(v, val, sizeof val);
    folio_set_err(q->err, q->errlen,
                  "%s: field \"quantization_config.%s\" is %s: %s (Folio loads FP8 checkpoints: "
                  "compressed-tensors float-quantized with channel or tensor weight scales, or "
                  "quant_method fp8)",
                  q->path, field, val, why);
    return -1;
}

static bool is_string(const json_t *v, const char *s)
{
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

static bool absent(const json_t *v)
{
    return !v || json_is_null(v);
}

/* A list of names (ignore, ignored_layers), if there. */
static int check_names(struct qreader *q, const json_t *qc, const char *key)
{
    const json_t *v = json_object_get(qc, key), *e;
    size_t i;
    if (absent(v))
        return 0;
    if (!json_is_array(v))
        return refuse(q, key, v, "must be a list of layer names");
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e))
            return refuse(q, key, v, "must be a list of layer names");
    }
    return 0;
}

/* One quantization args object (weights or input_activations) of a config group. */
static int check_args(struct qreader *q, const char *group, const char *which, const json_t *a)
{
    char field[192];
    if (!json_is_object(a)) {
        snprintf(field, sizeof field, "config_groups.%s.%s", group, which);
        return refuse(q, field, a, "must be an object");
    }
    const bool weights = strcmp(which, "weights") == 0;
    const json_t *bits = json_object_get(a, "num_bits"), *type = json_object_get(a, "type");
    const json_t *strategy = json_object_get(a, "strategy");
    const json_t *dyn = json_object_get(a, "dynamic"), *sym = json_object_get(a, "symmetric");
    const json_t *blocks = json_object_get(a, "block_structure");
    snprintf(field, sizeof field, "config_groups.%s.%s.num_bits", group, which);
    if (!json_is_integer(bits) || json_integer_value(bits) != 8)
        return refuse(q, field, bits, "only 8-bit (FP8) weights and activations are supported");
    snprintf(field, sizeof field, "config_groups.%s.%s.type", group, which);
    if (!is_string(type, "float"))
        return refuse(q, field, type, "only type \"float\" (e4m3) is supported");
    snprintf(field, sizeof field, "config_groups.%s.%s.symmetric", group, which);
    if (!absent(sym) && !json_is_true(sym))
        return refuse(q, field, sym, "asymmetric (zero-point) scales are not supported");
    snprintf(field, sizeof field, "config_groups.%s.%s.dynamic", group, which);
    if (!absent(dyn) && !json_is_boolean(dyn))
        return refuse(q, field, dyn, "must be true or false");
    if (weights) {
        snprintf(field, sizeof field, "config_groups.%s.weights.strategy", group);
        if (!is_string(strategy, "channel") && !is_string(strategy, "tensor"))
            return refuse(q, field, strategy,
                          "weights need one scale per output channel or per tensor (group and "
                          "block scales are not supported)");
        snprintf(field, sizeof field, "config_groups.%s.weights.block_structure", group);
        if (!absent(blocks))
            return refuse(q, field, blocks, "block-wise weight scales are not supported");
    }
    return 0;
}

/* kv_cache_scheme: the calibrated K/V scales the file carries (model.c reads them, one a layer
 * for each of K and V); per-head scales and other types have no kernels in Folio. */
static int check_kv_cache_scheme(struct qreader *q, const json_t *qc)
{
    const json_t *kv = json_object_get(qc, "kv_cache_scheme");
    if (absent(kv))
        return 0;
    if (!json_is_object(kv))
        return refuse(q, "kv_cache_scheme", kv, "must be an object or null");
    const json_t *bits = json_object_get(kv, "num_bits"), *type = json_object_get(kv, "type");
    const json_t *strategy = json_object_get(kv, "strategy"),
                 *sym = json_object_get(kv, "symmetric");
    if (!json_is_integer(bits) || json_integer_value(bits) != 8)
        return refuse(q, "kv_cache_scheme.num_bits", bits,
                      "only an 8-bit (FP8) KV cache is supported");
    if (!is_string(type, "float"))
        return refuse(q, "kv_cache_scheme.type", type, "only type \"float\" (e4m3) is supported");
    if (!absent(strategy) && !is_string(strategy, "tensor"))
        return refuse(q, "kv_cache_scheme.strategy", strategy,
                      "only one K and one V scale a layer (\"tensor\") is supported");
    if (!absent(sym) && !json_is_true(sym))
        return refuse(q, "kv_cache_scheme.symmetric", sym,
                      "asymmetric (zero-point) scales are not supported");
    return 0;
}

static int read_compressed_tensors(struct qreader *q, const json_t *qc)
{
    const json_t *format = json_object_get(qc, "format");
    if (!is_string(format, "float-quantized") && !is_string(format, "naive-quantized"))
        return refuse(q, "format", format,
                      "only \"float-quantized\" (or \"naive-quantized\") FP8 weights are "
                      "supported");
    const json_t *groups = json_object_get(qc, "config_groups");
    if (!json_is_object(groups) || json_object_size(groups) == 0)
        return refuse(q, "config_groups", groups, "must be an object of quantization groups");
    const char *name;
    const json_t *g;
    json_object_foreach((json_t *)groups, name, g)
    {
        char field[160];
        snprintf(field, sizeof field, "config_groups.%s", name);
        if (!json_is_object(g))
            return refuse(q, field, g, "must be an object");
        if (check_args(q, name, "weights", json_object_get(g, "weights")) != 0)
            return -1;
        const json_t *in = json_object_get(g, "input_activations");
        if (!absent(in) && check_args(q, name, "input_activations", in) != 0)
            return -1;
        const json_t *out = json_object_get(g, "output_activations");
        snprintf(field, sizeof field, "config_groups.%s.output_activations", name);
        if (!absent(out))
            return refuse(q, field, out, "quantized outputs are not supported");
    }
    if (check_kv_cache_scheme(q, qc) != 0)
        return -1;
    return check_names(q, qc, "ignore");
}

static int read_vllm_fp8(struct qreader *q, const json_t *qc)
{
    const json_t *scheme = json_object_get(qc, "activation_scheme");
    if (!absent(scheme) && !is_string(scheme, "dynamic") && !is_string(scheme, "static"))
        return refuse(q, "activation_scheme", scheme, "must be \"dynamic\" or \"static\"");
    const json_t *blocks = json_object_get(qc, "weight_block_size");
    if (!absent(blocks))
        return refuse(q, "weight_block_size", blocks,
                      "block-wise weight scales are not supported (one scale per output row or "
                      "per tensor)");
    const json_t *fmt = json_object_get(qc, "fmt");
    if (!absent(fmt) && !is_string(fmt, "e4m3"))
        return refuse(q, "fmt", fmt, "only e4m3 is supported");
    return check_names(q, qc, "ignored_layers");
}

int folio_model_config_read_quantization(const char *path, const struct json_t *root,
                                         struct folio_model_config *cfg, char *err, size_t errlen)
{
    struct qreader q = {path, err, errlen};
    cfg->quantization = FOLIO_QUANT_NONE;
    cfg->quant_method[0] = '\0';
    const json_t *qc = json_object_get(root, "quantization_config");
    if (absent(qc))
        return 0;
    if (!json_is_object(qc)) {
        folio_set_err(err, errlen, "%s: field \"quantization_config\" must be an object or null",
                      path);
        return -1;
    }
    const json_t *method = json_object_get(qc, "quant_method");
    int rc;
    if (is_string(method, "compressed-tensors"))
        rc = read_compressed_tensors(&q, qc);
    else if (is_string(method, "fp8"))
        rc = read_vllm_fp8(&q, qc);
    else
        return refuse(&q, "quant_method", method,
                      "not supported (AWQ, GPTQ, bitsandbytes and other 4-bit or integer "
                      "formats have no kernels in Folio; a GGUF of the model serves instead)");
    if (rc != 0)
        return -1;
    cfg->quantization = FOLIO_QUANT_FP8;
    snprintf(cfg->quant_method, sizeof cfg->quant_method, "%s", json_string_value(method));
    return 0;
}
