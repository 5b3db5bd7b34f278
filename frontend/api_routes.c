#include "api_routes.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_prompt.h"

#define fail folio_oai_fail

static json_t *load_object(const char *body, size_t len, struct folio_oai_error *e)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!root) {
        fail(e, 400, NULL, "request body is not valid JSON: %s (line %d, column %d)", jerr.text,
             jerr.line, jerr.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        fail(e, 400, NULL, "request body must be a JSON object");
        return NULL;
    }
    return root;
}

/* The keys a route reads; any other key with a value is named in a 400 (the
 * same policy as the generation endpoints, see openai_fields.c). */
static int check_keys(json_t *root, const char *const *known, struct folio_oai_error *e)
{
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        bool found = false;
        for (const char *const *k = known; *k && !found; k++)
            found = !strcmp(*k, key);
        if (!found && !json_is_null(v))
            return fail(e, 400, key, "Unrecognized request argument supplied: %s", key);
    }
    return 0;
}

static int check_model(const struct folio_api_text_ctx *c, json_t *root, struct folio_oai_error *e)
{
    json_t *m = json_object_get(root, "model");
    if (!m || json_is_null(m))
        return 0;
    if (!json_is_string(m))
        return fail(e, 400, "model", "'model' must be a string");
    if (c->model_ok && !c->model_ok(c->model_ok_arg, json_string_value(m)))
        return fail(e, 404, "model", "The model `%s` does not exist.", json_string_value(m));
    return 0;
}

static int get_flag(json_t *root, const char *key, bool *out, struct folio_oai_error *e)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return fail(e, 400, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

/* The messages validated by the chat parser (roles, text parts, the 400s of
 * unsupported parts), with add_generation_prompt. */
static int32_t *messages_ids(const struct folio_api_text_ctx *c, json_t *root, bool add_special,
                             size_t *n, struct folio_oai_error *e)
{
    json_t *sub = json_object();
    json_object_set(sub, "messages", json_object_get(root, "messages"));
    static const char *const keys[] = {"add_generation_prompt", "tools"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        json_t *v = json_object_get(root, keys[k]);
        if (v)
            json_object_set(sub, keys[k], v);
    }
    char *text = json_dumps(sub, JSON_COMPACT);
    json_decref(sub);
    if (!text) {
        fail(e, 500, NULL, "out of memory");
        return NULL;
    }
    struct folio_oai_request r;
    int32_t *ids = NULL;
    if (folio_oai_parse_request(FOLIO_OAI_CHAT, text, strlen(text), NULL, &r, e) == 0) {
        char err[512];
        ids = folio_chat_prompt_ids(c->tokenizer, c->chat_template, &r, add_special, n, err,
                                    sizeof err);
        if (!ids)
            fail(e, err[0] ? 400 : 500, "messages", "%s", err[0] ? err : "out of memory");
    }
    folio_oai_request_free(&r);
    free(text);
    return ids;
}

int folio_api_tokenize(const struct folio_api_text_ctx *c, const char *body, size_t len,
                       struct folio_jw *out, struct folio_oai_error *e)
{
    static const char *const known[] = {"model",
                                        "prompt",
                                        "messages",
                                        "add_special_tokens",
                                        "add_generation_prompt",
                                        "tools",
                                        "return_token_strs",
                                        NULL};
    memset(e, 0, sizeof *e);
    json_t *root = load_object(body, len, e);
    if (!root)
        return -1;
    int rc = -1;
    int32_t *ids = NULL;
    size_t n = 0;
    json_t *prompt = json_object_get(root, "prompt"), *messages = json_object_get(root, "messages");
    bool chat = messages && !json_is_null(messages);
    bool add_special = true, token_strs = false;
    if (check_keys(root, known, e) || check_model(c, root, e) ||
        get_flag(root, "add_special_tokens", &add_special, e) ||
        get_flag(root, "return_token_strs", &token_strs, e))
        goto out;
    if (token_strs) {
        fail(e, 400, "return_token_strs", "'return_token_strs' is not supported by this server");
        goto out;
    }
    if (chat == (prompt && !json_is_null(prompt))) {
        fail(e, 400, chat ? "prompt" : NULL, "give exactly one of 'prompt' and 'messages'");
        goto out;
    }
    if (chat) {
        if (!json_is_array(messages)) {
            fail(e, 400, "messages", "'messages' must be a non-empty list");
            goto out;
        }
        ids = messages_ids(c, root, add_special, &n, e);
    } else if (!json_is_string(prompt)) {
        fail(e, 400, "prompt", "'prompt' must be a string");
        goto out;
    } else {
        ids = folio_tokenizer_encode(c->tokenizer, json_string_value(prompt),
                                     json_string_length(prompt), add_special, &n);
        if (!ids)
            fail(e, 500, NULL, "out of memory");
    }
    if (!ids)
        goto out;
    folio_jw_printf(out, "{\"count\":%zu,\"max_model_len\":%d,\"tokens\":[", n, c->max_model_len);
    for (size_t i = 0; i < n; i++)
        folio_jw_printf(out, i ? ",%d" : "%d", ids[i]);
    folio_jw_str(out, "],\"token_strs\":null}");
    rc = 0;
out:
    free(ids);
    json_decref(root);
    return rc;
}

int folio_api_detokenize(const struct folio_api_text_ctx *c, const char *body, size_t len,
                         struct folio_jw *out, struct folio_oai_error *e)
{
    static const char *const known[] = {"model", "tokens", NULL};
    memset(e, 0, sizeof *e);
    json_t *root = load_object(body, len, e);
    if (!root)
        return -1;
    int rc = -1;
    int32_t *ids = NULL;
    json_t *tokens = json_object_get(root, "tokens");
    if (check_keys(root, known, e) || check_model(c, root, e))
        goto out;
    if (!json_is_array(tokens)) {
        fail(e, 400, "tokens", "'tokens' must be a list of token ids");
        goto out;
    }
    size_t n = json_array_size(tokens);
    int32_t vocab = folio_tokenizer_vocab_size(c->tokenizer);
    if (!(ids = malloc((n ? n : 1) * sizeof *ids))) {
        fail(e, 500, NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(tokens, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= vocab) {
            fail(e, 400, "tokens", "'tokens[%zu]' must be a token id in 0..%d", i, vocab - 1);
            goto out;
        }
        ids[i] = (int32_t)json_integer_value(t);
    }
    size_t tlen = 0;
    char *text = folio_tokenizer_decode(c->tokenizer, ids, n, false, &tlen);
    if (!text) {
        fail(e, 400, "tokens", "'tokens' holds an id the tokenizer does not know");
        goto out;
    }
    folio_jw_str(out, "{\"prompt\":");
    folio_jw_string(out, text, tlen);
    folio_jw_str(out, "}");
    free(text);
    rc = 0;
out:
    free(ids);
    json_decref(root);
    return rc;
}

/* GET /v1/models/{id}: one model object, as in the /v1/models list; 404
 * for another id. The id may be percent-encoded (a "/" in it). */
static int model_by_id(const struct folio_api_text_ctx *c, const char *id, size_t len,
                       struct folio_jw *b, struct folio_oai_error *e)
{
    char name[512];
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < sizeof name; i++) {
        unsigned hi, lo;
        if (id[i] == '%' && i + 2 < len && sscanf(id + i + 1, "%1x%1x", &hi, &lo) == 2) {
            name[n++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            name[n++] = id[i];
        }
    }
    name[n] = 0;
    if (c->model_ok && !c->model_ok(c->model_ok_arg, name))
        return fail(e, 404, "model", "The model `%s` does not exist.", name);
    folio_jw_str(b, "{\"id\":");
    folio_jw_string(b, c->model_name, strlen(c->model_name));
    folio_jw_printf(b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"folio\",\"root\":",
                    (long long)c->created);
    folio_jw_string(b, c->model_name, strlen(c->model_name));
    folio_jw_printf(b, ",\"parent\":null,\"max_model_len\":%d}", c->max_model_len);
    return 0;
}

int folio_api_answer(const struct folio_api_text_ctx *c, enum folio_api_route route, const char *in,
                     size_t len, struct folio_jw *out, struct folio_oai_error *e)
{
    memset(e, 0, sizeof *e);
    switch (route) {
    case FOLIO_API_TOKENIZE:
        return folio_api_tokenize(c, in, len, out, e);
    case FOLIO_API_DETOKENIZE:
        return folio_api_detokenize(c, in, len, out, e);
    case FOLIO_API_VERSION:
        folio_jw_str(out, "{\"version\":\"" FOLIO_VERSION "\"}");
        return 0;
    case FOLIO_API_MODEL:
        return model_by_id(c, in, len, out, e);
    }
    return fail(e, 500, NULL, "unknown route");
}
