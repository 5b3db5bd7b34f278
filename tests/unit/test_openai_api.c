/* The OpenAI request parser and response writers of frontend/openai_api.c:
 * what GuideLLM, the openai client and curl send, the errors for bad input,
 * and chunks/responses that parse back as the JSON OpenAI's servers write. */
#include <jansson.h>
#include <string.h>

#include "check.h"
#include "openai_api.h"

static int parse(enum folio_oai_endpoint ep, const char *body, struct folio_oai_request *r,
                 struct folio_oai_error *e)
{
    return folio_oai_parse_request(ep, body, strlen(body), NULL, r, e);
}

/* Parses the request, expects a 400 whose message contains want. */
static void expect_error(enum folio_oai_endpoint ep, const char *body, int status, const char *want)
{
    struct folio_oai_request r;
    struct folio_oai_error e;
    int rc = parse(ep, body, &r, &e);
    CHECK(rc == -1);
    CHECK(e.status == status);
    if (!strstr(e.message, want))
        fprintf(stderr, "body %s: message '%s' lacks '%s'\n", body, e.message, want);
    CHECK(strstr(e.message, want) != NULL);
    folio_oai_request_free(&r);
}

static void test_guidellm_completion(void)
{
    const char *body =
        "{\"model\":\"tiny\",\"prompt\":\"Hello world\",\"max_tokens\":16,\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true},"
        "\"ignore_eos\":true,\"stop\":null,\"temperature\":0}";
    struct folio_oai_request r;
    struct folio_oai_error e;
    CHECK(parse(FOLIO_OAI_COMPLETIONS, body, &r, &e) == 0);
    CHECK(r.model && !strcmp(r.model, "tiny"));
    CHECK(r.num_prompts == 1 && r.prompts[0].len == 11 &&
          !memcmp(r.prompts[0].text, "Hello world", 11));
    CHECK(r.n == 1 && !r.echo && r.num_logit_bias == 0);
    CHECK(r.max_tokens == 16);
    CHECK(r.stream && r.include_usage && r.continuous_usage && r.ignore_eos);
    CHECK(r.num_stop == 0);
    CHECK(r.temperature == 0.0f);
    CHECK(r.top_p == 1.0f && r.top_k == -1 && r.repetition_penalty == 1.0f);
    CHECK(r.logprobs == -1);
    folio_oai_request_free(&r);
}

static void test_defaults_and_fields(void)
{
    struct folio_oai_request r;
    struct folio_oai_error e;
    CHECK(parse(FOLIO_OAI_COMPLETIONS, "{\"prompt\":[\"one\"]}", &r, &e) == 0);
    CHECK(r.max_tokens == 16 && !r.stream && r.temperature == 1.0f && r.skip_special_tokens);
    CHECK(r.num_prompts == 1 && r.prompts[0].len == 3);
    folio_oai_request_free(&r);

    CHECK(parse(FOLIO_OAI_COMPLETIONS, "{\"prompt\":[1,2,3],\"stop\":\"\\n\\n\"}", &r, &e) == 0);
    CHECK(r.num_prompts == 1 && !r.prompts[0].text && r.prompts[0].num_ids == 3 &&
          r.prompts[0].ids[2] == 3);
    CHECK(r.num_stop == 1 && r.stop_len[0] == 2 && !strcmp(r.stop[0], "\n\n"));
    folio_oai_request_free(&r);

    CHECK(parse(FOLIO_OAI_COMPLETIONS,
                "{\"prompt\":[[5,6]],\"stop\":[\"a\",\"bc\"],\"stop_token_ids\":[2,7],"
                "\"min_tokens\":3,\"max_completion_tokens\":9,\"max_tokens\":4,\"seed\":-1,"
                "\"top_k\":40,\"top_p\":0.9,\"min_p\":0.05,\"presence_penalty\":0.5,"
                "\"frequency_penalty\":-0.5,\"repetition_penalty\":1.1,\"logprobs\":3,"
                "\"n\":1}",
                &r, &e) == 0);
    CHECK(r.num_prompts == 1 && r.prompts[0].num_ids == 2 && r.prompts[0].ids[0] == 5);
    CHECK(r.num_stop == 2 && !strcmp(r.stop[1], "bc"));
    CHECK(r.num_stop_token_ids == 2 && r.stop_token_ids[1] == 7);
    CHECK(r.min_tokens == 3 && r.max_tokens == 9);
    CHECK(r.has_seed && r.seed == UINT64_MAX);
    CHECK(r.top_k == 40 && r.top_p > 0.89f && r.min_p > 0.04f);
    CHECK(r.logprobs == 3);
    folio_oai_request_free(&r);

    /* A batch of prompts, n samples each, echo, logit_bias, vLLM's output flags. */
    CHECK(parse(FOLIO_OAI_COMPLETIONS,
                "{\"prompt\":[\"a\",[7,8],\"bc\"],\"n\":3,\"best_of\":3,\"echo\":true,"
                "\"logit_bias\":{\"5\":100,\"9\":-100},\"include_stop_str_in_output\":true,"
                "\"spaces_between_special_tokens\":false}",
                &r, &e) == 0);
    CHECK(r.num_prompts == 3 && r.n == 3 && r.echo);
    CHECK(r.prompts[1].num_ids == 2 && r.prompts[1].ids[1] == 8 && r.prompts[2].len == 2);
    CHECK(r.num_logit_bias == 2 && r.logit_bias[0].token == 5 && r.logit_bias[1].value == -100);
    CHECK(r.include_stop_str_in_output && !r.spaces_between_special_tokens);
    folio_oai_request_free(&r);

    /* max_tokens as 10.0 is an integer to pydantic, so it is here too. */
    CHECK(parse(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":10.0}", &r, &e) == 0);
    CHECK(r.max_tokens == 10);
    folio_oai_request_free(&r);
}

static void test_chat(void)
{
    struct folio_oai_request r;
    struct folio_oai_error e;
    const char *body =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"},"
        "{\"type\":\"text\",\"text\":\"there\"}]},{\"role\":\"assistant\",\"content\":null}],"
        "\"logprobs\":true,\"top_logprobs\":2,\"max_completion_tokens\":5}";
    CHECK(parse(FOLIO_OAI_CHAT, body, &r, &e) == 0);
    CHECK(r.num_messages == 3);
    CHECK(!strcmp(r.messages[0].role, "system") && !strcmp(r.messages[0].content, "Be brief."));
    CHECK(!strcmp(r.messages[1].content, "Hi\nthere"));
    CHECK(!strcmp(r.messages[2].content, ""));
    CHECK(r.logprobs == 2 && r.max_tokens == 5 && r.add_generation_prompt);
    folio_oai_request_free(&r);
}

static void test_errors(void)
{
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\"", 400, "not valid JSON");
    expect_error(FOLIO_OAI_COMPLETIONS, "[1]", 400, "JSON object");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"\xff\xfe\"}", 400, "not valid JSON");
    expect_error(FOLIO_OAI_COMPLETIONS, "{}", 400, "'prompt' is required");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"n\":0}", 400, "'n' must be between");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"n\":2,\"best_of\":3}", 400,
                 "'best_of' greater than 'n' is not supported");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"n\":2,\"best_of\":1}", 400,
                 "at least 'n'");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":[\"a\",[]]}", 400, "'prompt[1]' is an empty");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"a\":1}}", 400,
                 "is not a token id");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"3\":101}}", 400,
                 "[-100, 100]");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":5}", 400, "'prompt' must be");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":[1,-2]}", 400, "out of range");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":0}", 400,
                 "'max_tokens' must be between 1");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":\"5\"}", 400,
                 "'max_tokens' must be an integer");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"temperature\":-1}", 400,
                 "'temperature'");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"top_p\":0}", 400, "'top_p'");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"stream\":\"yes\"}", 400,
                 "'stream' must be a boolean");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"stop\":[\"a\",3]}", 400, "stop[1]");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"stop\":\"\"}", 400, "empty");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"logprobs\":21}", 400, "'logprobs'");
    expect_error(FOLIO_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"min_tokens\":5,\"max_tokens\":2}", 400,
                 "'min_tokens'");
    expect_error(FOLIO_OAI_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"echo\":true}", 400,
                 "'echo' is not supported for chat");
    expect_error(FOLIO_OAI_CHAT, "{\"messages\":[]}", 400, "non-empty");
    expect_error(FOLIO_OAI_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", 400, "'messages[0].role'");
    expect_error(FOLIO_OAI_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400,
                 "type 'image_url'");
    expect_error(FOLIO_OAI_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", 400,
                 "needs 'logprobs'");
}

static json_t *load_chunk(const char *s, size_t len)
{
    CHECK(len > 8 && !strncmp(s, "data: ", 6) && !strcmp(s + len - 2, "\n\n"));
    json_error_t jerr;
    json_t *j = json_loadb(s + 6, len - 8, 0, &jerr);
    if (!j)
        fprintf(stderr, "chunk does not parse: %s: %.*s\n", jerr.text, (int)len, s);
    CHECK(j != NULL);
    return j;
}

static void test_chunks(void)
{
    struct folio_oai_response_ctx c = {FOLIO_OAI_CHAT, "chatcmpl-1", 1700000000,
                                       "tiny\"m",      true,         0};
    struct folio_jw b;
    folio_jw_init(&b);
    folio_oai_write_chunk(&b, &c, true, "", 0, NULL, NULL, 0, 0, NULL);
    json_t *j = load_chunk(b.data, b.len);
    CHECK(!strcmp(json_string_value(json_object_get(j, "object")), "chat.completion.chunk"));
    CHECK(!strcmp(json_string_value(json_object_get(j, "model")), "tiny\"m"));
    CHECK(json_integer_value(json_object_get(j, "created")) == 1700000000);
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    json_t *delta = json_object_get(ch, "delta");
    CHECK(!strcmp(json_string_value(json_object_get(delta, "role")), "assistant"));
    CHECK(json_is_null(json_object_get(ch, "finish_reason")));
    CHECK(json_is_null(json_object_get(j, "usage")));
    json_decref(j);

    /* Text with quotes, newlines and a control byte survives the round trip. */
    folio_jw_reset(&b);
    struct folio_oai_usage u = {7, 3, 0};
    folio_oai_write_chunk(&b, &c, false, "a\"b\n\x01\xc3\xa9", 7, "stop", NULL, 0, 0, &u);
    j = load_chunk(b.data, b.len);
    ch = json_array_get(json_object_get(j, "choices"), 0);
    delta = json_object_get(ch, "delta");
    CHECK(!strcmp(json_string_value(json_object_get(delta, "content")), "a\"b\n\x01\xc3\xa9"));
    CHECK(json_object_get(delta, "role") == NULL);
    CHECK(!strcmp(json_string_value(json_object_get(ch, "finish_reason")), "stop"));
    CHECK(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")) == 10);
    json_decref(j);

    /* The closing chat chunk without text has an empty delta. */
    folio_jw_reset(&b);
    folio_oai_write_chunk(&b, &c, false, "", 0, "length", NULL, 0, 0, NULL);
    j = load_chunk(b.data, b.len);
    delta = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta");
    CHECK(json_is_object(delta) && json_object_size(delta) == 0);
    json_decref(j);

    folio_jw_reset(&b);
    folio_oai_write_usage_chunk(&b, &c, &u);
    j = load_chunk(b.data, b.len);
    CHECK(json_array_size(json_object_get(j, "choices")) == 0);
    CHECK(json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")) == 7);
    json_decref(j);

    /* Completions chunk with logprobs. */
    struct folio_oai_response_ctx cc = {FOLIO_OAI_COMPLETIONS, "cmpl-1", 1, "m", false, 0};
    struct folio_oai_token_logprob lp[2] = {
        {"He", 2, -0.5f, 1, {{"He", 2, -0.5f}}},
        {"llo", 3, -1.0f / 0.0f, 0, {{0}}},
    };
    folio_jw_reset(&b);
    folio_oai_write_chunk(&b, &cc, false, "Hello", 5, NULL, lp, 2, 10, NULL);
    j = load_chunk(b.data, b.len);
    CHECK(!strcmp(json_string_value(json_object_get(j, "object")), "text_completion"));
    CHECK(json_object_get(j, "usage") == NULL);
    ch = json_array_get(json_object_get(j, "choices"), 0);
    CHECK(!strcmp(json_string_value(json_object_get(ch, "text")), "Hello"));
    json_t *l = json_object_get(ch, "logprobs");
    CHECK(json_integer_value(json_array_get(json_object_get(l, "text_offset"), 1)) == 12);
    CHECK(json_real_value(json_array_get(json_object_get(l, "token_logprobs"), 1)) == -9999.0);
    CHECK(json_real_value(json_object_get(json_array_get(json_object_get(l, "top_logprobs"), 0),
                                          "He")) == -0.5);
    json_decref(j);

    folio_jw_reset(&b);
    folio_oai_write_stream_error(&b, 503, "worker died");
    j = load_chunk(b.data, b.len);
    CHECK(json_integer_value(json_object_get(json_object_get(j, "error"), "code")) == 503);
    json_decref(j);
    folio_jw_free(&b);
}

static void test_responses(void)
{
    struct folio_jw b;
    folio_jw_init(&b);
    struct folio_oai_usage u = {4, 2, 0};
    struct folio_oai_response_ctx c = {FOLIO_OAI_CHAT, "chatcmpl-x", 5, "m", false, 0};
    struct folio_oai_token_logprob lp = {"hi", 2, -0.25f, 1, {{"hi", 2, -0.25f}}};
    struct folio_oai_choice ch2[2] = {{"hi", 2, "length", &lp, 1, NULL},
                                      {"yo", 2, "stop", &lp, 1, NULL}};
    folio_oai_write_response(&b, &c, ch2, 2, &u);
    json_error_t jerr;
    json_t *j = json_loadb(b.data, b.len, 0, &jerr);
    CHECK(j != NULL);
    CHECK(!strcmp(json_string_value(json_object_get(j, "object")), "chat.completion"));
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(ch, "message"), "content")),
                  "hi"));
    json_t *content = json_object_get(json_object_get(ch, "logprobs"), "content");
    CHECK(json_array_size(content) == 1);
    CHECK(json_array_size(json_object_get(json_array_get(content, 0), "bytes")) == 2);
    json_t *second = json_array_get(json_object_get(j, "choices"), 1);
    CHECK(json_integer_value(json_object_get(second, "index")) == 1);
    CHECK(!strcmp(json_string_value(json_object_get(second, "finish_reason")), "stop"));
    CHECK(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")) == 6);
    json_decref(j);

    folio_jw_reset(&b);
    folio_oai_write_error(&b, 404, "The model 'x' does not exist.", "model");
    j = json_loadb(b.data, b.len, 0, &jerr);
    json_t *err = json_object_get(j, "error");
    CHECK(!strcmp(json_string_value(json_object_get(err, "type")), "not_found_error"));
    CHECK(!strcmp(json_string_value(json_object_get(err, "param")), "model"));
    CHECK(json_integer_value(json_object_get(err, "code")) == 404);
    json_decref(j);

    folio_jw_reset(&b);
    folio_oai_write_models(&b, "tiny", 9, 2048);
    j = json_loadb(b.data, b.len, 0, &jerr);
    CHECK(!strcmp(
        json_string_value(json_object_get(json_array_get(json_object_get(j, "data"), 0), "id")),
        "tiny"));
    json_decref(j);

    char id[64];
    folio_oai_make_id(FOLIO_OAI_CHAT, 0x0001000000000007ull, 42, id, sizeof id);
    CHECK(!strncmp(id, "chatcmpl-", 9) && strlen(id) == 9 + 32);
    folio_oai_make_id(FOLIO_OAI_COMPLETIONS, 7, 42, id, sizeof id);
    CHECK(!strncmp(id, "cmpl-", 5));
    folio_jw_free(&b);
}

/* Python's splitlines (httpx's SSE reader) breaks lines at U+0085, U+2028
 * and U+2029: they must leave the writer escaped, and parse back unchanged. */
static void test_unicode_line_breaks_escaped(void)
{
    const char text[] = "a\xc2\x85"
                        "b\xe2\x80\xa8"
                        "c\xe2\x80\xa9"
                        "d\xe2\x80\xaa"
                        "e";
    struct folio_jw b;
    folio_jw_init(&b);
    folio_jw_string(&b, text, sizeof text - 1);
    CHECK(strstr(b.data, "\\u0085") && strstr(b.data, "\\u2028") && strstr(b.data, "\\u2029"));
    CHECK(!strstr(b.data, "\xe2\x80\xa8") && !strstr(b.data, "\xc2\x85"));
    CHECK(strstr(b.data, "\xe2\x80\xaa") != NULL); /* other characters pass as they are */
    json_t *v = json_loads(b.data, JSON_DECODE_ANY, NULL);
    CHECK(v && json_is_string(v) && !strcmp(json_string_value(v), text));
    json_decref(v);
    folio_jw_free(&b);
}

int main(void)
{
    test_unicode_line_breaks_escaped();
    test_guidellm_completion();
    test_defaults_and_fields();
    test_chat();
    test_errors();
    test_chunks();
    test_responses();
    return check_report();
}
