/* Fuzzes frontend/openai_api.h: arbitrary bytes as the body of
 * /v1/completions and of /v1/chat/completions. A parse either fails with a
 * 4xx/5xx status and a message whose error JSON (what the client receives) is
 * valid JSON, or gives a request that keeps the documented invariants; the
 * request's text then goes through the response writers, whose output must be
 * valid JSON that carries the text back unchanged. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_writer.h"
#include "openai_api.h"

#define MAX_INPUT (256 << 10)

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_openai_request: %s: %s\n", what, detail ? detail : "");
    abort();
}

static json_t *parse_written(const struct folio_jw *b, size_t skip, const char *what)
{
    if (b->failed)
        fail(what, "writer ran out of memory");
    json_error_t jerr;
    json_t *j = json_loadb(b->data + skip, b->len - skip, 0, &jerr);
    if (!j) {
        fprintf(stderr, "written: %.*s\n", (int)b->len, b->data);
        fail(what, jerr.text);
    }
    return j;
}

static void check_error_body(const struct folio_oai_error *e)
{
    if (e->status < 400 || e->status > 599 || !e->message[0])
        fail("error without a 4xx/5xx status and a message", e->message);
    struct folio_jw b;
    folio_jw_init(&b);
    folio_oai_write_error(&b, e->status, e->message, e->param);
    json_t *j = parse_written(&b, 0, "error body is not valid JSON");
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    /* The message comes back as it is, or with invalid UTF-8 replaced by U+FFFD. */
    if (!msg || (strcmp(msg, e->message) != 0 && !strstr(msg, "\xef\xbf\xbd")))
        fail("error body does not carry the message", e->message);
    json_decref(j);
    folio_jw_free(&b);
}

static void check_request(const struct folio_oai_request *r)
{
    if (r->endpoint == FOLIO_OAI_CHAT) {
        if (r->num_messages == 0 || !r->messages)
            fail("chat request without messages", NULL);
        for (size_t i = 0; i < r->num_messages; i++)
            if (!r->messages[i].role || !r->messages[i].content)
                fail("chat message without role or content", NULL);
    } else if (r->num_prompts == 0 || !r->prompts) {
        fail("completion request without a prompt", NULL);
    }
    for (size_t i = 0; i < r->num_prompts; i++) {
        const struct folio_oai_prompt *p = &r->prompts[i];
        if (p->text ? strlen(p->text) != p->len : p->num_ids == 0 || !p->ids)
            fail("a prompt's text has the wrong length, or its ids are missing", NULL);
    }
    if (r->n < 1 || r->n > FOLIO_OAI_MAX_N ||
        (r->num_prompts ? r->num_prompts : 1) * (size_t)r->n > FOLIO_OAI_MAX_CHOICES)
        fail("n or the number of choices out of range", NULL);
    for (size_t i = 0; i < r->num_logit_bias; i++)
        if (r->logit_bias[i].token < 0 || !(fabsf(r->logit_bias[i].value) <= 100.0f))
            fail("logit_bias entry out of range", NULL);
    if (r->num_stop > FOLIO_OAI_MAX_STOPS)
        fail("more stop strings than allowed", NULL);
    for (size_t i = 0; i < r->num_stop; i++)
        if (!r->stop[i] || r->stop_len[i] == 0 || strlen(r->stop[i]) != r->stop_len[i])
            fail("stop string empty or of the wrong length", NULL);
    if (r->logprobs < -1 || r->logprobs > FOLIO_MAX_LOGPROBS)
        fail("logprobs out of range", NULL);
    if (r->max_tokens < -1 || r->min_tokens < 0 ||
        (r->max_tokens >= 0 && r->min_tokens > r->max_tokens))
        fail("max_tokens/min_tokens out of range", NULL);
    if (!isfinite(r->temperature) || r->temperature < 0 || !isfinite(r->top_p) || r->top_p <= 0 ||
        r->top_p > 1 || !isfinite(r->min_p) || r->min_p < 0 || r->min_p > 1 ||
        !isfinite(r->presence_penalty) || !isfinite(r->frequency_penalty) ||
        !isfinite(r->repetition_penalty) || r->repetition_penalty <= 0)
        fail("sampling parameter out of range", NULL);
}

/* The whole response with the request's own text as the completion. */
static void check_response(const struct folio_oai_request *r)
{
    const char *text = "";
    size_t len = 0;
    if (r->endpoint == FOLIO_OAI_CHAT) {
        text = r->messages[r->num_messages - 1].content;
        len = strlen(text);
    } else if (r->prompts[0].text) {
        text = r->prompts[0].text;
        len = r->prompts[0].len;
    }
    char id[64];
    folio_oai_make_id(r->endpoint, 0x0001000000000001ull, 42, id, sizeof id);
    struct folio_oai_response_ctx c = {r->endpoint,      id, 1700000000, r->model ? r->model : "m",
                                       r->include_usage, 0};
    struct folio_oai_usage u = {7, 3, 1};
    struct folio_oai_token_logprob lp = {.text = text, .len = len, .logprob = -0.5f, .num_top = 1};
    lp.top[0] = (struct folio_oai_top){text, len, -0.5f};
    struct folio_jw b;
    folio_jw_init(&b);
    struct folio_oai_choice ch = {text, len, "stop", r->logprobs >= 0 ? &lp : NULL, 1, NULL};
    folio_oai_write_response(&b, &c, &ch, 1, &u);
    json_t *j = parse_written(&b, 0, "response is not valid JSON");
    json_t *choice = json_array_get(json_object_get(j, "choices"), 0);
    json_t *jt = r->endpoint == FOLIO_OAI_CHAT
                     ? json_object_get(json_object_get(choice, "message"), "content")
                     : json_object_get(choice, "text");
    if (!json_is_string(jt) || json_string_length(jt) != len ||
        memcmp(json_string_value(jt), text, len) != 0)
        fail("response does not carry the text unchanged", NULL);
    json_decref(j);

    folio_jw_reset(&b);
    folio_oai_write_chunk(&b, &c, r->endpoint == FOLIO_OAI_CHAT, text, len, NULL,
                          r->logprobs >= 0 ? &lp : NULL, 1, 0, r->continuous_usage ? &u : NULL);
    if (b.len < 8 || memcmp(b.data, "data: ", 6) != 0 || memcmp(b.data + b.len - 2, "\n\n", 2))
        fail("chunk is not one SSE event", NULL);
    b.len -= 2;
    json_decref(parse_written(&b, 6, "chunk is not valid JSON"));
    folio_jw_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    static const enum folio_oai_endpoint eps[] = {FOLIO_OAI_COMPLETIONS, FOLIO_OAI_CHAT};
    for (int i = 0; i < 2; i++) {
        struct folio_oai_request r;
        struct folio_oai_error e;
        if (folio_oai_parse_request(eps[i], (const char *)data, size, NULL, &r, &e) == 0) {
            if (r.endpoint != eps[i])
                fail("endpoint not kept", NULL);
            check_request(&r);
            check_response(&r);
        } else {
            check_error_body(&e);
        }
        folio_oai_request_free(&r);
    }
    return 0;
}
