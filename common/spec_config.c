#include "spec_config.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "ipc_records.h" /* FOLIO_MAX_DRAFT_TOKENS */

/* An integer field in lo..hi, or def when absent. */
static int int_field(json_t *root, const char *name, int lo, int hi, int def, int *out, char *err,
                     size_t errlen)
{
    json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        snprintf(err, errlen, "--speculative-config: \"%s\" must be an integer in %d..%d", name, lo,
                 hi);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}

int folio_spec_config_parse(const char *text, struct folio_spec_config *out, char *err,
                            size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!text || !*text)
        return 0;
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root || !json_is_object(root)) {
        snprintf(err, errlen, "--speculative-config: not a JSON object (%s)",
                 root ? "another JSON value" : je.text);
        json_decref(root);
        return -1;
    }
    int rc = -1;
    const char *key;
    json_t *val;
    static const char *const known[] = {"method", "num_speculative_tokens", "prompt_lookup_max",
                                        "prompt_lookup_min", "model"};
    json_object_foreach(root, key, val)
    {
        size_t i = 0;
        while (i < sizeof known / sizeof *known && strcmp(known[i], key) != 0)
            i++;
        if (i == sizeof known / sizeof *known) {
            snprintf(err, errlen,
                     "--speculative-config: unknown field \"%s\" (known: method, "
                     "num_speculative_tokens, prompt_lookup_max, prompt_lookup_min)",
                     key);
            goto out;
        }
    }
    json_t *method = json_object_get(root, "method");
    if (!json_is_string(method)) {
        snprintf(err, errlen, "--speculative-config: \"method\" must be given, as a string");
        goto out;
    }
    if (!strcmp(json_string_value(method), "draft_model") || json_object_get(root, "model")) {
        snprintf(err, errlen,
                 "--speculative-config: \"method\": \"draft_model\" (a draft model) is not built "
                 "yet; \"ngram\" is");
        goto out;
    }
    if (strcmp(json_string_value(method), "ngram") != 0) {
        snprintf(err, errlen,
                 "--speculative-config: \"method\" \"%s\" is unknown (\"ngram\" is built)",
                 json_string_value(method));
        goto out;
    }
    if (!json_object_get(root, "num_speculative_tokens")) {
        snprintf(err, errlen, "--speculative-config: \"num_speculative_tokens\" must be given");
        goto out;
    }
    if (int_field(root, "num_speculative_tokens", 1, FOLIO_MAX_DRAFT_TOKENS, 0, &out->num_tokens,
                  err, errlen) != 0 ||
        int_field(root, "prompt_lookup_max", 1, 64, 0, &out->lookup_max, err, errlen) != 0 ||
        int_field(root, "prompt_lookup_min", 1, 64, 0, &out->lookup_min, err, errlen) != 0)
        goto out;
    /* vLLM's defaults: 5 for both, or the one bound given for the other. */
    if (!out->lookup_max && !out->lookup_min)
        out->lookup_max = out->lookup_min = 5;
    else if (!out->lookup_min)
        out->lookup_min = out->lookup_max;
    else if (!out->lookup_max)
        out->lookup_max = out->lookup_min;
    if (out->lookup_min > out->lookup_max) {
        snprintf(err, errlen,
                 "--speculative-config: \"prompt_lookup_min\" (%d) is above \"prompt_lookup_max\" "
                 "(%d)",
                 out->lookup_min, out->lookup_max);
        goto out;
    }
    out->on = true;
    rc = 0;
out:
    json_decref(root);
    return rc;
}
