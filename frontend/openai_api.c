#include "openai_api.h"
#include "openai_fields.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parsing ------------------------------------------------------------ */

#define fail folio_oai_fail

/* Absent and null both mean "use the default", as in OpenAI's schema. */
static json_t *field(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static int get_bool(json_t *obj, const char *key, bool *out, struct folio_oai_error *e)
{
    json_t *v = field(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return fail(e, 400, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

/* Integers may come as 10.0 (pydantic's lax mode accepts them too). */
static int as_int64(json_t *v, long long *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9e15) {
            *out = (long long)d;
            return 0;
        }
    }
    return -1;
}

static int get_int(json_t *obj, const char *key, long long lo, long long hi, int32_t *out,
                   struct folio_oai_error *e)
{
    json_t *v = field(obj, key);
    if (!v)
        return 0;
    long long x;
    if (as_int64(v, &x) != 0)
        return fail(e, 400, key, "'%s' must be an integer", key);
    if (x < lo || x > hi)
        return fail(e, 400, key, "'%s' must be between %lld and %lld, got %lld", key, lo, hi, x);
    *out = (int32_t)x;
    return 0;
}

/* lo_open: the lower bound itself is not allowed. */
static int get_float(json_t *obj, const char *key, double lo, bool lo_open, double hi, float *out,
                     struct folio_oai_error *e)
{
    json_t *v = field(obj, key);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return fail(e, 400, key, "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || (lo_open && x == lo) || x > hi)
        return fail(e, 400, key, "'%s' must be in %s%g, %g], got %g", key, lo_open ? "(" : "[", lo,
                    hi, x);
    *out = (float)x;
    return 0;
}

static char *dup_json_string(json_t *s, size_t *len)
{
    size_t n = json_string_length(s);
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, json_string_value(s), n);
    d[n] = 0;
    if (len)
        *len = n;
    return d;
}

static int parse_stop(json_t *root, struct folio_oai_request *r, struct folio_oai_error *e)
{
    json_t *v = field(root, "stop");
    if (!v)
        return 0;
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : (size_t)-1;
    if (n == (size_t)-1)
        return fail(e, 400, "stop", "'stop' must be null, a string or a list of strings");
    if (n > FOLIO_OAI_MAX_STOPS)
        return fail(e, 400, "stop", "'stop' has %zu strings; at most %d are allowed", n,
                    FOLIO_OAI_MAX_STOPS);
    if (n == 0)
        return 0;
    r->stop = calloc(n, sizeof *r->stop);
    r->stop_len = calloc(n, sizeof *r->stop_len);
    if (!r->stop || !r->stop_len)
        return fail(e, 500, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s))
            return fail(e, 400, "stop", "'stop[%zu]' must be a string", i);
        if (json_string_length(s) == 0)
            return fail(e, 400, "stop", "'stop[%zu]' is empty; stop strings must not be", i);
        if (!(r->stop[i] = dup_json_string(s, &r->stop_len[i])))
            return fail(e, 500, NULL, "out of memory");
        r->num_stop++;
    }
    return 0;
}

static int parse_int_list(json_t *a, const char *name, long long lo, long long hi, int32_t **out,
                          size_t *n, struct folio_oai_error *e)
{
    size_t len = json_array_size(a);
    *out = malloc((len ? len : 1) * sizeof **out);
    if (!*out)
        return fail(e, 500, NULL, "out of memory");
    for (size_t i = 0; i < len; i++) {
        long long x;
        if (as_int64(json_array_get(a, i), &x) != 0)
            return fail(e, 400, name, "'%s[%zu]' must be an integer", name, i);
        if (x < lo || x > hi)
            return fail(e, 400, name, "'%s[%zu]' = %lld is out of range", name, i, x);
        (*out)[i] = (int32_t)x;
    }
    *n = len;
    return 0;
}

/* One prompt: a string, or a list of token ids. */
static int parse_one_prompt(json_t *p, size_t i, struct folio_oai_prompt *out,
                            struct folio_oai_error *e)
{
    if (json_is_string(p)) {
        if (!(out->text = dup_json_string(p, &out->len)))
            return fail(e, 500, NULL, "out of memory");
        return 0;
    }
    if (json_is_array(p) && json_array_size(p) > 0)
        return parse_int_list(p, "prompt", 0, INT32_MAX, &out->ids, &out->num_ids, e);
    return fail(e, 400, "prompt",
                json_is_array(p) ? "'prompt[%zu]' is an empty list"
                                 : "'prompt[%zu]' must be a string or a list of token ids",
                i);
}

/* A string, a list of token ids, or a list of those (a batch: one choice per
 * prompt and sample). */
static int parse_prompt(json_t *root, struct folio_oai_request *r, struct folio_oai_error *e)
{
    json_t *p = field(root, "prompt");
    if (!p)
        return fail(e, 400, "prompt", "'prompt' is required");
    bool batch = json_is_array(p) && json_array_size(p) > 0 &&
                 (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0)));
    if (!json_is_string(p) && !json_is_array(p))
        return fail(e, 400, "prompt",
                    "'prompt' must be a string, a list of token ids or a list of those");
    if (json_is_array(p) && json_array_size(p) == 0)
        return fail(e, 400, "prompt", "'prompt' is an empty list");
    size_t n = batch ? json_array_size(p) : 1;
    if (n > FOLIO_OAI_MAX_CHOICES)
        return fail(e, 400, "prompt", "'prompt' holds %zu prompts; at most %d are allowed", n,
                    FOLIO_OAI_MAX_CHOICES);
    if (!(r->prompts = calloc(n, sizeof *r->prompts)))
        return fail(e, 500, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        r->num_prompts++;
        if (parse_one_prompt(batch ? json_array_get(p, i) : p, i, &r->prompts[i], e) != 0)
            return -1;
    }
    return 0;
}

/* content: a string, null, or a list of {"type": "text", "text": ...} parts
 * that are joined with "\n" (as vLLM joins text parts). */
static int parse_content(json_t *c, size_t i, char **out, struct folio_oai_error *e)
{
    if (!c) {
        *out = strdup("");
        return *out ? 0 : fail(e, 500, NULL, "out of memory");
    }
    if (json_is_string(c)) {
        *out = dup_json_string(c, NULL);
        return *out ? 0 : fail(e, 500, NULL, "out of memory");
    }
    if (!json_is_array(c))
        return fail(e, 400, "messages",
                    "'messages[%zu].content' must be a string or a list of "
                    "content parts",
                    i);
    struct folio_jw b;
    folio_jw_init(&b);
    size_t j;
    json_t *part;
    json_array_foreach(c, j, part)
    {
        json_t *type = json_object_get(part, "type");
        json_t *text = json_object_get(part, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") != 0 ||
            !json_is_string(text)) {
            folio_jw_free(&b);
            return fail(e, 400, "messages",
                        "'messages[%zu].content[%zu]': only parts of type "
                        "\"text\" with a string \"text\" are supported",
                        i, j);
        }
        if (j > 0)
            folio_jw_raw(&b, "\n", 1);
        folio_jw_raw(&b, json_string_value(text), json_string_length(text));
    }
    *out = folio_jw_take(&b, NULL);
    return *out ? 0 : fail(e, 500, NULL, "out of memory");
}

static int parse_messages(json_t *root, struct folio_oai_request *r, struct folio_oai_error *e)
{
    json_t *m = field(root, "messages");
    if (!m)
        return fail(e, 400, "messages", "'messages' is required");
    if (!json_is_array(m) || json_array_size(m) == 0)
        return fail(e, 400, "messages", "'messages' must be a non-empty list");
    size_t n = json_array_size(m);
    r->messages = calloc(n, sizeof *r->messages);
    r->template_messages = json_array();
    if (!r->messages || !r->template_messages)
        return fail(e, 500, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *msg = json_array_get(m, i);
        if (!json_is_object(msg))
            return fail(e, 400, "messages", "'messages[%zu]' must be an object", i);
        json_t *role = json_object_get(msg, "role");
        if (!json_is_string(role))
            return fail(e, 400, "messages", "'messages[%zu].role' must be a string", i);
        struct folio_oai_message *out = &r->messages[i];
        if (!(out->role = dup_json_string(role, NULL)))
            return fail(e, 500, NULL, "out of memory");
        r->num_messages++;
        if (parse_content(field(msg, "content"), i, &out->content, e) != 0)
            return -1;
        /* What the template sees: the role, the content as text and the tool fields. */
        json_t *tm = json_pack("{s:O, s:s}", "role", role, "content", out->content);
        if (!tm || json_array_append_new(r->template_messages, tm) != 0)
            return fail(e, 400, "messages", "'messages[%zu].content' is not valid UTF-8", i);
        if (folio_oai_message_tool_fields(msg, i, tm, e) != 0)
            return -1;
    }
    return 0;
}

/* n, best_of (>= n; only = n, Folio does not rank candidates) and echo. */
static int parse_choices(json_t *root, struct folio_oai_request *r, struct folio_oai_error *e)
{
    int32_t best_of = -1;
    if (get_int(root, "n", 1, FOLIO_OAI_MAX_N, &r->n, e) ||
        get_int(root, "best_of", 1, INT32_MAX, &best_of, e))
        return -1;
    if (best_of >= 0 && best_of < r->n)
        return fail(e, 400, "best_of", "'best_of' (%d) must be at least 'n' (%d)", best_of, r->n);
    if (best_of > r->n)
        return fail(e, 400, "best_of",
                    "'best_of' greater than 'n' is not supported (got best_of %d, n %d)", best_of,
                    r->n);
    size_t prompts = r->num_prompts ? r->num_prompts : 1;
    if (prompts * (size_t)r->n > FOLIO_OAI_MAX_CHOICES)
        return fail(e, 400, "n", "%zu prompts times n = %d make more than %d choices", prompts,
                    r->n, FOLIO_OAI_MAX_CHOICES);
    if (get_bool(root, "echo", &r->echo, e))
        return -1;
    if (r->echo && r->endpoint == FOLIO_OAI_CHAT)
        return fail(e, 400, "echo", "'echo' is not supported for chat completions");
    /* vLLM's prompt_logprobs (token-id keyed, with ranks) is another shape of
     * what echo with logprobs gives. */
    if (field(root, "prompt_logprobs"))
        return fail(e, 400, "prompt_logprobs",
                    "'prompt_logprobs' is not supported; use 'echo': true with 'logprobs' on "
                    "/v1/completions");
    return 0;
}

/* logit_bias: {"token id": bias in [-100, 100]}. */
static int parse_logit_bias(json_t *root, struct folio_oai_request *r, struct folio_oai_error *e)
{
    json_t *v = field(root, "logit_bias");
    if (!v)
        return 0;
    if (!json_is_object(v))
        return fail(e, 400, "logit_bias", "'logit_bias' must be an object of token id: bias");
    size_t n = json_object_size(v);
    if (n > FOLIO_MAX_LOGIT_BIAS)
        return fail(e, 400, "logit_bias", "'logit_bias' has %zu entries; at most %d are allowed", n,
                    FOLIO_MAX_LOGIT_BIAS);
    r->logit_bias = malloc((n ? n : 1) * sizeof *r->logit_bias);
    if (!r->logit_bias)
        return fail(e, 500, NULL, "out of memory");
    const char *key;
    json_t *b;
    json_object_foreach(v, key, b)
    {
        char *end;
        long long id = strtoll(key, &end, 10);
        if (!*key || *end || id < 0 || id > INT32_MAX)
            return fail(e, 400, "logit_bias", "'logit_bias' key '%s' is not a token id", key);
        if (!json_is_number(b) || !isfinite(json_number_value(b)) ||
            fabs(json_number_value(b)) > FOLIO_LOGIT_BIAS_MAX)
            return fail(e, 400, "logit_bias", "'logit_bias[%s]' must be a number in [-100, 100]",
                        key);
        r->logit_bias[r->num_logit_bias++] =
            (struct folio_logit_bias){(int32_t)id, (float)json_number_value(b)};
    }
    return 0;
}

/* The fields that decide which tokens end the text and how they show. */
static int parse_token_controls(json_t *root, struct folio_oai_request *r,
                                struct folio_oai_error *e)
{
    json_t *v;
    if ((v = field(root, "stop_token_ids"))) {
        if (!json_is_array(v))
            return fail(e, 400, "stop_token_ids", "'stop_token_ids' must be a list of integers");
        if (json_array_size(v) > FOLIO_MAX_STOP_TOKEN_IDS)
            return fail(e, 400, "stop_token_ids",
                        "'stop_token_ids' has %zu entries; at most %d are allowed",
                        json_array_size(v), FOLIO_MAX_STOP_TOKEN_IDS);
        if (parse_int_list(v, "stop_token_ids", 0, INT32_MAX, &r->stop_token_ids,
                           &r->num_stop_token_ids, e))
            return -1;
    }
    if (get_bool(root, "ignore_eos", &r->ignore_eos, e) ||
        get_bool(root, "skip_special_tokens", &r->skip_special_tokens, e) ||
        get_bool(root, "spaces_between_special_tokens", &r->spaces_between_special_tokens, e) ||
        get_bool(root, "include_stop_str_in_output", &r->include_stop_str_in_output, e))
        return -1;
    return parse_logit_bias(root, r, e);
}

static int parse_fields(json_t *root, struct folio_oai_request *r, struct folio_oai_error *e)
{
    const bool chat = r->endpoint == FOLIO_OAI_CHAT;
    json_t *v;

    if ((v = field(root, "model"))) {
        if (!json_is_string(v))
            return fail(e, 400, "model", "'model' must be a string");
        if (!(r->model = dup_json_string(v, NULL)))
            return fail(e, 500, NULL, "out of memory");
    }
    if (chat ? parse_messages(root, r, e) : parse_prompt(root, r, e))
        return -1;
    if (chat && get_bool(root, "add_generation_prompt", &r->add_generation_prompt, e))
        return -1;

    if (parse_choices(root, r, e))
        return -1;

    if (get_bool(root, "stream", &r->stream, e))
        return -1;
    if ((v = field(root, "stream_options"))) {
        if (!json_is_object(v))
            return fail(e, 400, "stream_options", "'stream_options' must be an object");
        if (get_bool(v, "include_usage", &r->include_usage, e) ||
            get_bool(v, "continuous_usage_stats", &r->continuous_usage, e))
            return -1;
        r->continuous_usage &= r->include_usage; /* vLLM's: only with include_usage */
    }

    /* max_completion_tokens is the newer name; it wins when both are given. */
    if (get_int(root, "max_tokens", 1, INT32_MAX, &r->max_tokens, e) ||
        get_int(root, "max_completion_tokens", 1, INT32_MAX, &r->max_tokens, e) ||
        get_int(root, "min_tokens", 0, INT32_MAX, &r->min_tokens, e))
        return -1;
    if (r->max_tokens >= 0 && r->min_tokens > r->max_tokens)
        return fail(e, 400, "min_tokens", "'min_tokens' (%d) must not exceed 'max_tokens' (%d)",
                    r->min_tokens, r->max_tokens);
    if (parse_stop(root, r, e))
        return -1;
    if (parse_token_controls(root, r, e))
        return -1;

    if (get_float(root, "temperature", 0, false, 1e6, &r->temperature, e) ||
        get_float(root, "top_p", 0, true, 1, &r->top_p, e) ||
        get_float(root, "min_p", 0, false, 1, &r->min_p, e) ||
        get_float(root, "presence_penalty", -2, false, 2, &r->presence_penalty, e) ||
        get_float(root, "frequency_penalty", -2, false, 2, &r->frequency_penalty, e) ||
        get_float(root, "repetition_penalty", 0, true, 1e6, &r->repetition_penalty, e) ||
        get_int(root, "top_k", -1, INT32_MAX, &r->top_k, e))
        return -1;
    if ((v = field(root, "seed"))) {
        long long s;
        if (as_int64(v, &s) != 0)
            return fail(e, 400, "seed", "'seed' must be an integer");
        r->has_seed = true;
        r->seed = (uint64_t)s;
    }

    if (chat) {
        bool want = false;
        int32_t top = 0;
        if (get_bool(root, "logprobs", &want, e) ||
            get_int(root, "top_logprobs", 0, FOLIO_MAX_LOGPROBS, &top, e))
            return -1;
        if (top > 0 && !want)
            return fail(e, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r->logprobs = want ? top : -1;
    } else if (get_int(root, "logprobs", 0, FOLIO_MAX_LOGPROBS, &r->logprobs, e)) {
        return -1;
    }
    if (folio_oai_parse_structured(root, &r->grammar, e))
        return -1;
    return chat ? folio_oai_parse_tools(root, &r->tools, &r->grammar, e) : 0;
}

int folio_oai_parse_request(enum folio_oai_endpoint ep, const char *body, size_t len,
                            const struct folio_sampling_defaults *defaults,
                            struct folio_oai_request *r, struct folio_oai_error *e)
{
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->endpoint = ep;
    r->add_generation_prompt = true;
    r->max_tokens = folio_oai_default_max_tokens(ep);
    r->skip_special_tokens = true;
    r->spaces_between_special_tokens = true;
    r->n = 1;
    struct folio_sampling_params p;
    folio_sampling_defaults_apply(defaults, &p);
    r->temperature = p.temperature;
    r->top_p = p.top_p;
    r->top_k = p.top_k;
    r->min_p = p.min_p;
    r->repetition_penalty = p.repetition_penalty;
    r->logprobs = -1;

    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    /* U+0000 is refused rather than carried: prompts, chat messages and
     * names travel as C strings through the chat template and the logs, so
     * a NUL would silently cut the text after it. It has no place in text a
     * model should read; the message says what and where, so the client can
     * strip it (jansson's own text names a library flag instead). */
    if (!root && json_error_code(&jerr) == json_error_null_character)
        return fail(e, 400, NULL,
                    "a JSON string in the request holds the character U+0000 (written \\u0000) "
                    "at line %d, column %d; Folio does not accept NUL characters in text: "
                    "remove them",
                    jerr.line, jerr.column);
    if (!root)
        return fail(e, 400, NULL, "request body is not valid JSON: %s (line %d, column %d)",
                    jerr.text, jerr.line, jerr.column);
    int rc = 0;
    if (!json_is_object(root))
        rc = fail(e, 400, NULL, "request body must be a JSON object");
    else if (folio_oai_check_fields(ep, root, e) != 0)
        rc = -1;
    else
        rc = parse_fields(root, r, e);
    json_decref(root);
    return rc;
}

void folio_oai_request_free(struct folio_oai_request *r)
{
    free(r->model);
    for (size_t i = 0; i < r->num_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    free(r->logit_bias);
    for (size_t i = 0; i < r->num_messages; i++) {
        free(r->messages[i].role);
        free(r->messages[i].content);
    }
    free(r->messages);
    json_decref(r->template_messages);
    folio_oai_tools_free(&r->tools);
    for (size_t i = 0; i < r->num_stop; i++)
        free(r->stop[i]);
    free(r->stop);
    free(r->stop_len);
    free(r->stop_token_ids);
    folio_oai_grammar_free(&r->grammar);
    memset(r, 0, sizeof *r);
}

void folio_oai_seq_params(const struct folio_oai_request *r, uint32_t sample_index,
                          int32_t max_tokens, struct folio_seq_params *out)
{
    *out = (struct folio_seq_params){
        .sampling = {.temperature = r->temperature,
                     .top_k = r->top_k,
                     .top_p = r->top_p,
                     .min_p = r->min_p,
                     .repetition_penalty = r->repetition_penalty,
                     .frequency_penalty = r->frequency_penalty,
                     .presence_penalty = r->presence_penalty,
                     .seed = r->seed + sample_index,
                     .num_logprobs = r->logprobs < 0 ? 0 : r->logprobs},
        .has_seed = r->has_seed,
        .max_tokens = max_tokens,
        .min_tokens = r->min_tokens,
        .stop_ids = r->stop_token_ids,
        .num_stop_ids = (int32_t)r->num_stop_token_ids,
        .ignore_eos = r->ignore_eos,
        .logit_bias = r->logit_bias,
        .num_logit_bias = (int32_t)r->num_logit_bias,
        .prompt_logprobs = r->echo && r->logprobs >= 0,
        .grammar = {.on = r->grammar.on,
                    .kind = r->grammar.kind,
                    .text = r->grammar.text,
                    .len = (int32_t)r->grammar.len},
    };
}

/* ---- responses ---------------------------------------------------------- */

const char *folio_oai_error_type(int status)
{
    switch (status) {
    case 400:
    case 405:
    case 413:
        return "invalid_request_error";
    case 404:
        return "not_found_error";
    case 429:
        return "rate_limit_error";
    case 503:
        return "service_unavailable_error";
    default:
        return status >= 500 ? "internal_server_error" : "invalid_request_error";
    }
}

/* Length of the valid UTF-8 character at s (shortest form, no surrogates,
 * at most U+10FFFF), or 0 when s does not start one. */
static size_t utf8_char_len(const unsigned char *s, size_t n)
{
    size_t k;
    uint32_t cp, min;
    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xe0) == 0xc0)
        k = 2, cp = s[0] & 0x1f, min = 0x80;
    else if ((s[0] & 0xf0) == 0xe0)
        k = 3, cp = s[0] & 0x0f, min = 0x800;
    else if ((s[0] & 0xf8) == 0xf0)
        k = 4, cp = s[0] & 0x07, min = 0x10000;
    else
        return 0;
    if (k > n)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    return cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? 0 : k;
}

/* An error message may quote the client's bytes cut short (jansson's "near
 * '...'" ends at the error position, inside a multi-byte character, and
 * snprintf truncates anywhere), but the body must be valid UTF-8 JSON: each
 * byte that does not start a whole valid character is written as U+FFFD. */
static void write_message_string(struct folio_jw *b, const char *s)
{
    size_t n = strlen(s);
    char *fixed = malloc(3 * n + 1);
    if (!fixed) {
        b->failed = true;
        return;
    }
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_char_len((const unsigned char *)s + i, n - i);
        if (k) {
            memcpy(fixed + o, s + i, k);
            o += k, i += k;
        } else {
            memcpy(fixed + o, "\xef\xbf\xbd", 3);
            o += 3, i++;
        }
    }
    folio_jw_string(b, fixed, o);
    free(fixed);
}

static void write_error_object(struct folio_jw *b, int status, const char *message,
                               const char *param)
{
    folio_jw_str(b, "{\"error\":{\"message\":");
    write_message_string(b, message);
    folio_jw_str(b, ",\"type\":");
    const char *type = folio_oai_error_type(status);
    folio_jw_string(b, type, strlen(type));
    folio_jw_str(b, ",\"param\":");
    if (param && *param)
        folio_jw_string(b, param, strlen(param));
    else
        folio_jw_str(b, "null");
    folio_jw_printf(b, ",\"code\":%d}}", status);
}

void folio_oai_write_error(struct folio_jw *b, int status, const char *message, const char *param)
{
    write_error_object(b, status, message, param);
}

void folio_oai_write_stream_error(struct folio_jw *b, int status, const char *message)
{
    folio_jw_str(b, "data: ");
    write_error_object(b, status, message, NULL);
    folio_jw_str(b, "\n\n");
}

void folio_oai_make_id(enum folio_oai_endpoint ep, uint64_t request_id, uint64_t salt, char *out,
                       size_t outlen)
{
    /* splitmix64 of the salt (pid and start time) so ids differ across
     * restarts, followed by the request id itself for grepping logs. */
    uint64_t z = salt + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    snprintf(out, outlen, "%s%016llx%016llx", ep == FOLIO_OAI_CHAT ? "chatcmpl-" : "cmpl-",
             (unsigned long long)z, (unsigned long long)request_id);
}

static void write_head(struct folio_jw *b, const struct folio_oai_response_ctx *c, bool chunk)
{
    folio_jw_str(b, "{\"id\":");
    folio_jw_string(b, c->id, strlen(c->id));
    if (c->endpoint == FOLIO_OAI_CHAT)
        folio_jw_str(b, chunk ? ",\"object\":\"chat.completion.chunk\""
                              : ",\"object\":\"chat.completion\"");
    else
        folio_jw_str(b, ",\"object\":\"text_completion\"");
    folio_jw_printf(b, ",\"created\":%lld,\"model\":", (long long)c->created);
    folio_jw_string(b, c->model, strlen(c->model));
}

static void write_usage(struct folio_jw *b, const struct folio_oai_usage *u)
{
    folio_jw_printf(b,
                    "{\"prompt_tokens\":%u,\"total_tokens\":%u,\"completion_tokens\":%u,"
                    "\"prompt_tokens_details\":",
                    u->prompt_tokens, u->prompt_tokens + u->completion_tokens,
                    u->completion_tokens);
    if (u->cached_tokens)
        folio_jw_printf(b, "{\"cached_tokens\":%u}}", u->cached_tokens);
    else
        folio_jw_str(b, "null}");
}

static void write_finish(struct folio_jw *b, const char *finish_reason)
{
    folio_jw_str(b, ",\"finish_reason\":");
    if (finish_reason)
        folio_jw_string(b, finish_reason, strlen(finish_reason));
    else
        folio_jw_str(b, "null");
}

static void write_top_chat(struct folio_jw *b, const char *text, size_t len, float logprob)
{
    folio_jw_str(b, "{\"token\":");
    folio_jw_string(b, text, len);
    folio_jw_str(b, ",\"logprob\":");
    folio_jw_double(b, logprob);
    folio_jw_str(b, ",\"bytes\":[");
    for (size_t i = 0; i < len; i++)
        folio_jw_printf(b, i ? ",%u" : "%u", (unsigned char)text[i]);
    folio_jw_str(b, "]");
}

/* Chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]}.
 * Completions: {text_offset, token_logprobs, tokens, top_logprobs}. */
static void write_logprobs(struct folio_jw *b, enum folio_oai_endpoint ep,
                           const struct folio_oai_token_logprob *lp, size_t n, size_t text_offset)
{
    if (!lp) {
        folio_jw_str(b, "null");
        return;
    }
    if (ep == FOLIO_OAI_CHAT) {
        folio_jw_str(b, "{\"content\":[");
        for (size_t i = 0; i < n; i++) {
            if (i)
                folio_jw_raw(b, ",", 1);
            write_top_chat(b, lp[i].text, lp[i].len, lp[i].logprob);
            folio_jw_str(b, ",\"top_logprobs\":[");
            for (uint32_t k = 0; k < lp[i].num_top; k++) {
                if (k)
                    folio_jw_raw(b, ",", 1);
                write_top_chat(b, lp[i].top[k].text, lp[i].top[k].len, lp[i].top[k].logprob);
                folio_jw_raw(b, "}", 1);
            }
            folio_jw_str(b, "]}");
        }
        folio_jw_str(b, "]}");
        return;
    }
    folio_jw_str(b, "{\"text_offset\":[");
    size_t off = text_offset;
    for (size_t i = 0; i < n; i++) {
        folio_jw_printf(b, i ? ",%zu" : "%zu", off);
        off += lp[i].len;
    }
    folio_jw_str(b, "],\"token_logprobs\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            folio_jw_raw(b, ",", 1);
        if (isnan(lp[i].logprob))
            folio_jw_str(b, "null");
        else
            folio_jw_double(b, lp[i].logprob);
    }
    folio_jw_str(b, "],\"tokens\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            folio_jw_raw(b, ",", 1);
        folio_jw_string(b, lp[i].text, lp[i].len);
    }
    folio_jw_str(b, "],\"top_logprobs\":[");
    for (size_t i = 0; i < n; i++) {
        if (isnan(lp[i].logprob)) {
            folio_jw_str(b, i ? ",null" : "null");
            continue;
        }
        folio_jw_str(b, i ? ",{" : "{");
        for (uint32_t k = 0; k < lp[i].num_top; k++) {
            if (k)
                folio_jw_raw(b, ",", 1);
            folio_jw_string(b, lp[i].top[k].text, lp[i].top[k].len);
            folio_jw_raw(b, ":", 1);
            folio_jw_double(b, lp[i].top[k].logprob);
        }
        folio_jw_raw(b, "}", 1);
    }
    folio_jw_str(b, "]}");
}

static void write_chunk(struct folio_jw *b, const struct folio_oai_response_ctx *c, bool role_chunk,
                        const char *text, size_t len, const struct folio_oai_chat_parts *parts,
                        const char *finish_reason, const struct folio_oai_token_logprob *lp,
                        size_t num_lp, size_t text_offset, const struct folio_oai_usage *usage)
{
    folio_jw_str(b, "data: ");
    write_head(b, c, true);
    folio_jw_printf(b, ",\"choices\":[{\"index\":%u,", c->index);
    if (c->endpoint == FOLIO_OAI_CHAT) {
        folio_oai_write_chat_delta(b, role_chunk, text, len, parts, finish_reason);
    } else {
        folio_jw_str(b, "\"text\":");
        folio_jw_string(b, text, len);
        folio_jw_raw(b, ",", 1);
    }
    folio_jw_str(b, "\"logprobs\":");
    write_logprobs(b, c->endpoint, lp, num_lp, text_offset);
    write_finish(b, finish_reason);
    folio_jw_str(b, "}]");
    if (usage) {
        folio_jw_str(b, ",\"usage\":");
        write_usage(b, usage);
    } else if (c->include_usage) {
        folio_jw_str(b, ",\"usage\":null");
    }
    folio_jw_str(b, "}\n\n");
}

void folio_oai_write_chunk(struct folio_jw *b, const struct folio_oai_response_ctx *c,
                           bool role_chunk, const char *text, size_t len, const char *finish_reason,
                           const struct folio_oai_token_logprob *lp, size_t num_lp,
                           size_t text_offset, const struct folio_oai_usage *usage)
{
    write_chunk(b, c, role_chunk, text, len, NULL, finish_reason, lp, num_lp, text_offset, usage);
}

void folio_oai_write_chat_chunk(struct folio_jw *b, const struct folio_oai_response_ctx *c,
                                bool role_chunk, const char *text, size_t len,
                                const struct folio_oai_chat_parts *parts, const char *finish_reason,
                                const struct folio_oai_token_logprob *lp, size_t num_lp,
                                const struct folio_oai_usage *usage)
{
    write_chunk(b, c, role_chunk, text, len, parts, finish_reason, lp, num_lp, 0, usage);
}

void folio_oai_write_usage_chunk(struct folio_jw *b, const struct folio_oai_response_ctx *c,
                                 const struct folio_oai_usage *usage)
{
    folio_jw_str(b, "data: ");
    write_head(b, c, true);
    folio_jw_str(b, ",\"choices\":[],\"usage\":");
    write_usage(b, usage);
    folio_jw_str(b, "}\n\n");
}

void folio_oai_write_response(struct folio_jw *b, const struct folio_oai_response_ctx *c,
                              const struct folio_oai_choice *choices, size_t num_choices,
                              const struct folio_oai_usage *usage)
{
    write_head(b, c, false);
    folio_jw_str(b, ",\"choices\":[");
    for (size_t i = 0; i < num_choices; i++) {
        const struct folio_oai_choice *ch = &choices[i];
        folio_jw_printf(b, "%s{\"index\":%zu,", i ? "," : "", i);
        if (c->endpoint == FOLIO_OAI_CHAT) {
            folio_oai_write_chat_message(b, ch->text, ch->len, ch->parts);
        } else {
            folio_jw_str(b, "\"text\":");
            folio_jw_string(b, ch->text, ch->len);
            folio_jw_raw(b, ",", 1);
        }
        folio_jw_str(b, "\"logprobs\":");
        write_logprobs(b, c->endpoint, ch->lp, ch->num_lp, 0);
        write_finish(b, ch->finish_reason);
        folio_jw_raw(b, "}", 1);
    }
    folio_jw_str(b, "],\"usage\":");
    write_usage(b, usage);
    folio_jw_str(b, "}");
}

void folio_oai_write_models(struct folio_jw *b, const char *model, int64_t created,
                            int32_t max_model_len)
{
    folio_jw_str(b, "{\"object\":\"list\",\"data\":[{\"id\":");
    folio_jw_string(b, model, strlen(model));
    folio_jw_printf(b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"folio\",\"root\":",
                    (long long)created);
    folio_jw_string(b, model, strlen(model));
    folio_jw_printf(b, ",\"parent\":null,\"max_model_len\":%d}]}", max_model_len);
}
