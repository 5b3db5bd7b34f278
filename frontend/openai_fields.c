/* Which request fields Folio accepts, per endpoint, and the 400 for every
 * field it does not implement. OpenAI's API answers an unknown field with 400
 * "Unrecognized request argument supplied: NAME"; vLLM ignores unknown fields
 * with a warning. A client that sends a field expects it to take effect, so
 * Folio follows OpenAI: a field is ignored only where OpenAI's own API ignores
 * it, and everything else it does not implement is a 400 that names it.
 *
 * The table, per field (C: /v1/completions, H: /v1/chat/completions):
 *
 *  field                         ep   rule
 *  model, stream, stream_options, max_tokens, temperature, top_p, seed, stop,
 *  presence_penalty, frequency_penalty, logprobs                 CH  parsed
 *  prompt                        C    parsed
 *  messages, add_generation_prompt, top_logprobs,
 *  max_completion_tokens         H(C) parsed
 *  n, echo, logit_bias, min_tokens, stop_token_ids, ignore_eos, top_k, min_p,
 *  repetition_penalty, include_stop_str_in_output, skip_special_tokens,
 *  spaces_between_special_tokens, prompt_logprobs   (vLLM's)  CH  parsed
 *  best_of                       CH   400 unless equal to n (no ranking)
 *  user                          CH   ignored: OpenAI's end-user id for abuse
 *                                     monitoring, no effect on the output
 *  metadata                      H    ignored: tags of stored completions
 *  request_id                    CH   ignored: vLLM's log name; Folio logs
 *                                     its own id
 *  service_tier                  CH   "auto" and "default" accepted (one tier)
 *  store                         H    false accepted; true is 400 (no storage)
 *  response_format, structured_outputs, guided_json, guided_regex,
 *  guided_choice, guided_grammar  CH   parsed (structured_output.c)
 *  tools, tool_choice, parallel_tool_calls  H  parsed (tool_request.c)
 *  function_call                 H    "none" accepted; others 400
 *  modalities                    H    ["text"] accepted; others 400
 *  use_beam_search false, length_penalty 1, return_tokens_as_token_ids false,
 *  detokenize true, continue_final_message false, priority 0,
 *  add_special_tokens (C true, H false)                CH  accepted; others 400
 *  suffix, functions, audio, prediction,
 *  reasoning_effort, web_search_options, guided_decoding_backend,
 *  guided_whitespace_pattern, truncate_prompt_tokens,
 *  allowed_token_ids, bad_words, logits_processors, chat_template,
 *  chat_template_kwargs, documents, mm_processor_kwargs, cache_salt,
 *  kv_transfer_params, vllm_xargs                       CH  400 when not null
 *  anything else                 CH   400 "Unrecognized request argument"
 *
 * In messages, "role", "content" and "name" are read, an assistant's
 * "tool_calls" and "reasoning_content" and a tool's "tool_call_id": any other
 * key with a value (function_call, audio, refusal...) is a 400, and content
 * parts other than text (image_url, input_audio, file...) are a 400 that
 * names the part's type. */
#include "openai_fields.h"

#include <stdio.h>
#include <string.h>

enum { EP_C = 1, EP_H = 2, EP_CH = 3 };

enum rule {
    PARSED,  /* openai_api.c reads and validates it */
    IGNORED, /* OpenAI ignores it too (see the table above) */
    REJECT,  /* any value but null is a 400 */
    CHECKED, /* check() decides */
};

struct ctx {
    enum folio_oai_endpoint ep;
    json_t *root;
};

struct field_rule {
    const char *name;
    unsigned endpoints;
    enum rule rule;
    int (*check)(json_t *v, const char *name, const struct ctx *c, struct folio_oai_error *e);
};

/* Every error here is a 400. */
#define fail(e, param, ...) folio_oai_fail(e, 400, param, __VA_ARGS__)

static int unsupported(struct folio_oai_error *e, const char *name)
{
    return fail(e, name, "'%s' is not supported by this server", name);
}

static bool is_string(json_t *v, const char *s)
{
    return json_is_string(v) && !strcmp(json_string_value(v), s);
}

/* best_of picks the best of several samples by likelihood: Folio does not
 * rank, so only best_of == n (every sample returned) means what it says. */
static int check_best_of(json_t *v, const char *name, const struct ctx *c,
                         struct folio_oai_error *e)
{
    json_t *nv = json_object_get(c->root, "n");
    long long n = json_is_integer(nv) ? json_integer_value(nv) : 1;
    if (!json_is_integer(v))
        return fail(e, name, "'best_of' must be an integer");
    long long b = json_integer_value(v);
    if (b < n)
        return fail(e, name, "'best_of' (%lld) must be at least 'n' (%lld)", b, n);
    if (b > n)
        return fail(e, name,
                    "'best_of' greater than 'n' is not supported by this server (best_of %lld, "
                    "n %lld)",
                    b, n);
    return 0;
}

static int check_none_choice(json_t *v, const char *name, const struct ctx *c,
                             struct folio_oai_error *e)
{
    (void)c;
    if (is_string(v, "none"))
        return 0;
    return fail(e, name, "'%s' is not supported by this server (only \"none\")", name);
}

static int check_modalities(json_t *v, const char *name, const struct ctx *c,
                            struct folio_oai_error *e)
{
    (void)c;
    if (json_is_array(v) && json_array_size(v) == 1 && is_string(json_array_get(v, 0), "text"))
        return 0;
    return fail(e, name, "'modalities' other than [\"text\"] are not supported by this server");
}

static int check_service_tier(json_t *v, const char *name, const struct ctx *c,
                              struct folio_oai_error *e)
{
    (void)c;
    if (is_string(v, "auto") || is_string(v, "default"))
        return 0;
    return fail(e, name, "'service_tier' must be \"auto\" or \"default\" (one tier here)");
}

/* A vLLM or OpenAI option whose default is the only behaviour Folio has:
 * the default is accepted, any other value named in a 400. */
static int check_default(json_t *v, const char *name, const struct ctx *c,
                         struct folio_oai_error *e)
{
    static const struct {
        const char *name;
        int kind; /* 0 false, 1 true, 2 number */
        double number;
    } defaults[] = {
        {"use_beam_search", 0, 0},
        {"return_tokens_as_token_ids", 0, 0},
        {"continue_final_message", 0, 0},
        {"store", 0, 0},
        {"detokenize", 1, 0},
        {"length_penalty", 2, 1.0},
        {"priority", 2, 0},
    };
    if (!strcmp(name, "add_special_tokens")) {
        /* vLLM's defaults: completions add BOS, chat leaves it to the template. */
        bool want = c->ep == FOLIO_OAI_COMPLETIONS;
        if (json_is_boolean(v) && json_is_true(v) == want)
            return 0;
        return fail(e, name, "'add_special_tokens' other than %s is not supported on this endpoint",
                    want ? "true" : "false");
    }
    for (size_t i = 0; i < sizeof defaults / sizeof *defaults; i++) {
        if (strcmp(name, defaults[i].name) != 0)
            continue;
        bool ok = defaults[i].kind == 2
                      ? json_is_number(v) && json_number_value(v) == defaults[i].number
                      : json_is_boolean(v) && json_is_true(v) == defaults[i].kind;
        if (ok)
            return 0;
        if (defaults[i].kind == 2)
            return fail(e, name, "'%s' other than %g is not supported by this server", name,
                        defaults[i].number);
        return fail(e, name, "'%s' other than %s is not supported by this server", name,
                    defaults[i].kind ? "true" : "false");
    }
    return unsupported(e, name);
}

static const struct field_rule rules[] = {
    /* OpenAI's fields that openai_api.c implements */
    {"model", EP_CH, PARSED, NULL},
    {"stream", EP_CH, PARSED, NULL},
    {"stream_options", EP_CH, PARSED, NULL},
    {"max_tokens", EP_CH, PARSED, NULL},
    {"max_completion_tokens", EP_CH, PARSED, NULL},
    {"temperature", EP_CH, PARSED, NULL},
    {"top_p", EP_CH, PARSED, NULL},
    {"seed", EP_CH, PARSED, NULL},
    {"stop", EP_CH, PARSED, NULL},
    {"presence_penalty", EP_CH, PARSED, NULL},
    {"frequency_penalty", EP_CH, PARSED, NULL},
    {"logprobs", EP_CH, PARSED, NULL},
    {"n", EP_CH, PARSED, NULL},
    {"echo", EP_CH, PARSED, NULL},
    {"logit_bias", EP_CH, PARSED, NULL},
    {"prompt", EP_C, PARSED, NULL},
    {"messages", EP_H, PARSED, NULL},
    {"top_logprobs", EP_H, PARSED, NULL},
    /* vLLM's sampling extensions that Folio implements */
    {"add_generation_prompt", EP_H, PARSED, NULL},
    {"min_tokens", EP_CH, PARSED, NULL},
    {"stop_token_ids", EP_CH, PARSED, NULL},
    {"ignore_eos", EP_CH, PARSED, NULL},
    {"top_k", EP_CH, PARSED, NULL},
    {"min_p", EP_CH, PARSED, NULL},
    {"repetition_penalty", EP_CH, PARSED, NULL},
    {"include_stop_str_in_output", EP_CH, PARSED, NULL},
    {"skip_special_tokens", EP_CH, PARSED, NULL},
    {"spaces_between_special_tokens", EP_CH, PARSED, NULL},
    {"prompt_logprobs", EP_CH, PARSED, NULL},
    /* structured outputs: OpenAI's response_format, vLLM's structured_outputs and guided_* */
    {"response_format", EP_CH, PARSED, NULL},
    {"structured_outputs", EP_CH, PARSED, NULL},
    {"guided_json", EP_CH, PARSED, NULL},
    {"guided_regex", EP_CH, PARSED, NULL},
    {"guided_choice", EP_CH, PARSED, NULL},
    {"guided_grammar", EP_CH, PARSED, NULL},
    /* tool calling (tool_request.c) */
    {"tools", EP_H, PARSED, NULL},
    {"tool_choice", EP_H, PARSED, NULL},
    {"parallel_tool_calls", EP_H, PARSED, NULL},
    /* ignored, as OpenAI ignores them */
    {"user", EP_CH, IGNORED, NULL},
    {"metadata", EP_H, IGNORED, NULL},
    {"request_id", EP_CH, IGNORED, NULL},
    /* accepted only with the one value Folio implements */
    {"best_of", EP_CH, CHECKED, check_best_of},
    {"function_call", EP_H, CHECKED, check_none_choice},
    {"modalities", EP_H, CHECKED, check_modalities},
    {"service_tier", EP_CH, CHECKED, check_service_tier},
    {"store", EP_H, CHECKED, check_default},
    {"use_beam_search", EP_CH, CHECKED, check_default},
    {"length_penalty", EP_CH, CHECKED, check_default},
    {"return_tokens_as_token_ids", EP_CH, CHECKED, check_default},
    {"detokenize", EP_CH, CHECKED, check_default},
    {"continue_final_message", EP_H, CHECKED, check_default},
    {"priority", EP_CH, CHECKED, check_default},
    {"add_special_tokens", EP_CH, CHECKED, check_default},
    /* not implemented: 400 */
    {"suffix", EP_C, REJECT, NULL},
    {"functions", EP_H, REJECT, NULL},
    {"audio", EP_H, REJECT, NULL},
    {"prediction", EP_H, REJECT, NULL},
    {"reasoning_effort", EP_H, REJECT, NULL},
    {"web_search_options", EP_H, REJECT, NULL},
    {"guided_decoding_backend", EP_CH, REJECT, NULL},
    {"guided_whitespace_pattern", EP_CH, REJECT, NULL},
    {"truncate_prompt_tokens", EP_CH, REJECT, NULL},
    {"allowed_token_ids", EP_CH, REJECT, NULL},
    {"bad_words", EP_CH, REJECT, NULL},
    {"logits_processors", EP_CH, REJECT, NULL},
    {"chat_template", EP_H, REJECT, NULL},
    {"chat_template_kwargs", EP_H, REJECT, NULL},
    {"documents", EP_H, REJECT, NULL},
    {"mm_processor_kwargs", EP_CH, REJECT, NULL},
    {"cache_salt", EP_CH, REJECT, NULL},
    {"kv_transfer_params", EP_CH, REJECT, NULL},
    {"vllm_xargs", EP_CH, REJECT, NULL},
};

static const struct field_rule *find_rule(const char *name, enum folio_oai_endpoint ep)
{
    unsigned bit = ep == FOLIO_OAI_CHAT ? EP_H : EP_C;
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++)
        if ((rules[i].endpoints & bit) && !strcmp(rules[i].name, name))
            return &rules[i];
    return NULL;
}

/* messages[i]: the keys the template is given (tool_request.c checks the
 * tool ones); any other key with a value would be dropped on the way to the
 * template, so it is a 400. */
static int check_message(json_t *msg, size_t i, struct folio_oai_error *e)
{
    const char *role = json_string_value(json_object_get(msg, "role"));
    bool assistant = role && !strcmp(role, "assistant"), tool = role && !strcmp(role, "tool");
    const char *key;
    json_t *v;
    json_object_foreach(msg, key, v)
    {
        if (!strcmp(key, "role") || !strcmp(key, "content") || !strcmp(key, "name") ||
            json_is_null(v))
            continue;
        if ((assistant && (!strcmp(key, "tool_calls") || !strcmp(key, "reasoning_content"))) ||
            (tool && !strcmp(key, "tool_call_id")))
            continue;
        return fail(e, "messages", "'messages[%zu].%s' is not supported by this server", i, key);
    }
    json_t *content = json_object_get(msg, "content");
    if (!json_is_array(content))
        return 0;
    size_t j;
    json_t *part;
    json_array_foreach(content, j, part)
    {
        json_t *type = json_object_get(part, "type");
        if (json_is_string(type) && strcmp(json_string_value(type), "text") != 0)
            return fail(e, "messages",
                        "'messages[%zu].content[%zu]': content parts of type '%s' are not "
                        "supported by this server (only 'text')",
                        i, j, json_string_value(type));
    }
    return 0;
}

int folio_oai_check_fields(enum folio_oai_endpoint ep, json_t *root, struct folio_oai_error *e)
{
    const struct ctx c = {ep, root};
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        const struct field_rule *r = find_rule(key, ep);
        if (!r)
            return fail(e, key, "Unrecognized request argument supplied: %s", key);
        if (json_is_null(v) || r->rule == PARSED || r->rule == IGNORED)
            continue;
        if (r->rule == REJECT ? unsupported(e, key) : r->check(v, key, &c, e))
            return -1;
    }
    json_t *msgs = json_object_get(root, "messages");
    if (ep == FOLIO_OAI_CHAT && json_is_array(msgs)) {
        size_t i;
        json_array_foreach(msgs, i, v)
        {
            if (json_is_object(v) && check_message(v, i, e) != 0)
                return -1;
        }
    }
    return 0;
}

int32_t folio_oai_default_max_tokens(enum folio_oai_endpoint ep)
{
    /* OpenAI's legacy completions and vLLM default to 16; chat (both) runs
     * to the end of the context. */
    return ep == FOLIO_OAI_COMPLETIONS ? FOLIO_OAI_COMPLETIONS_DEFAULT_MAX_TOKENS : -1;
}
