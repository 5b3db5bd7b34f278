/* frontend/openai_fields.c: every field Folio does not implement is a 400
 * naming it, the defaults OpenAI's own values are accepted, unknown fields
 * are refused as OpenAI refuses them, and max_tokens defaults per endpoint. */
#include <stdbool.h>
#include <string.h>

#include "check.h"
#include "openai_api.h"

static int parse(enum folio_oai_endpoint ep, const char *body, struct folio_oai_request *r,
                 struct folio_oai_error *e)
{
    return folio_oai_parse_request(ep, body, strlen(body), NULL, r, e);
}

/* A 400 whose param is want_param and whose message contains want. */
static void expect_400(enum folio_oai_endpoint ep, const char *body, const char *want_param,
                       const char *want)
{
    struct folio_oai_request r;
    struct folio_oai_error e;
    CHECK(parse(ep, body, &r, &e) == -1);
    CHECK(e.status == 400);
    if (strcmp(e.param, want_param) || !strstr(e.message, want))
        fprintf(stderr, "body %s: param '%s' message '%s'; wanted '%s' / '%s'\n", body, e.param,
                e.message, want_param, want);
    CHECK(!strcmp(e.param, want_param));
    CHECK(strstr(e.message, want) != NULL);
    folio_oai_request_free(&r);
}

static void expect_ok(enum folio_oai_endpoint ep, const char *body)
{
    struct folio_oai_request r;
    struct folio_oai_error e;
    int rc = parse(ep, body, &r, &e);
    if (rc != 0)
        fprintf(stderr, "body %s: %s\n", body, e.message);
    CHECK(rc == 0);
    folio_oai_request_free(&r);
}

#define C FOLIO_OAI_COMPLETIONS
#define H FOLIO_OAI_CHAT
#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void test_rejected(void)
{
    expect_400(C, "{\"prompt\":\"x\",\"suffix\":\"y\"}", "suffix", "'suffix' is not supported");
    expect_400(C, "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\"}}",
               "response_format", "'response_format.json_schema' must be an object");
    expect_400(H, "{" MSG ",\"response_format\":{\"type\":\"bogus\"}}", "response_format",
               "'bogus'");
    expect_400(H, "{" MSG ",\"response_format\":\"text\"}", "response_format", "an object");
    expect_400(H, "{" MSG ",\"tools\":[]}", "tools", "'tools' is not supported");
    expect_400(H, "{" MSG ",\"tool_choice\":\"auto\"}", "tool_choice", "only \"none\"");
    expect_400(H, "{" MSG ",\"functions\":[{\"name\":\"f\"}]}", "functions", "not supported");
    expect_400(H, "{" MSG ",\"function_call\":\"auto\"}", "function_call", "only \"none\"");
    expect_400(H, "{" MSG ",\"parallel_tool_calls\":false}", "parallel_tool_calls",
               "not supported");
    expect_400(H, "{" MSG ",\"audio\":{\"voice\":\"alloy\"}}", "audio", "not supported");
    expect_400(H, "{" MSG ",\"modalities\":[\"text\",\"audio\"]}", "modalities", "[\"text\"]");
    expect_400(H, "{" MSG ",\"store\":true}", "store", "other than false");
    expect_400(C, "{\"prompt\":\"x\",\"use_beam_search\":true}", "use_beam_search", "false");
    expect_400(C, "{\"prompt\":\"x\",\"guided_decoding_backend\":\"xgrammar\"}",
               "guided_decoding_backend", "not supported");
    expect_400(C, "{\"prompt\":\"x\",\"best_of\":3}", "best_of", "greater than 'n'");
    expect_400(C, "{\"prompt\":\"x\",\"best_of\":2,\"n\":3}", "best_of", "at least 'n'");
    expect_400(C, "{\"prompt\":\"x\",\"frobnicate\":1}", "frobnicate",
               "Unrecognized request argument supplied: frobnicate");
    /* chat-only fields on the completions endpoint are unknown there */
    expect_400(C, "{\"prompt\":\"x\",\"tools\":[]}", "tools", "Unrecognized");
    expect_400(H, "{" MSG ",\"suffix\":\"y\"}", "suffix", "Unrecognized");
    expect_400(H,
               "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\","
               "\"input_audio\":{}}]}]}",
               "messages", "type 'input_audio'");
    expect_400(H, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":\"bob\"}]}",
               "messages", "'messages[0].name'");
    expect_400(H, "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{}]}]}",
               "messages", "'messages[0].tool_calls'");
}

static void test_accepted(void)
{
    expect_ok(H, "{" MSG ",\"response_format\":{\"type\":\"text\"},\"tool_choice\":\"none\","
                 "\"user\":\"u1\",\"metadata\":{\"a\":\"b\"},\"store\":false,"
                 "\"modalities\":[\"text\"],\"service_tier\":\"auto\",\"tools\":null}");
    expect_ok(C, "{\"prompt\":\"x\",\"best_of\":1,\"suffix\":null,\"user\":\"u\","
                 "\"use_beam_search\":false,\"add_special_tokens\":true}");
    expect_ok(H, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":null}]}");
}

static void test_max_tokens_defaults(void)
{
    struct folio_oai_request r;
    struct folio_oai_error e;
    CHECK(parse(C, "{\"prompt\":\"x\"}", &r, &e) == 0);
    CHECK(r.max_tokens == 16);
    folio_oai_request_free(&r);
    CHECK(parse(H, "{" MSG "}", &r, &e) == 0);
    CHECK(r.max_tokens == -1);
    folio_oai_request_free(&r);
    CHECK(parse(C, "{\"prompt\":\"x\",\"max_tokens\":40}", &r, &e) == 0);
    CHECK(r.max_tokens == 40);
    folio_oai_request_free(&r);
}

/* True when s is well-formed UTF-8 (the error body is JSON). */
static bool valid_utf8(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = *p < 0x80 ? 0 : *p >= 0xF0 ? 3 : *p >= 0xE0 ? 2 : *p >= 0xC0 ? 1 : -1;
        if (n < 0)
            return false;
        for (p++; n > 0; n--, p++)
            if ((*p & 0xC0) != 0x80)
                return false;
    }
    return true;
}

/* An unknown field's name longer than the error's buffers, of two-byte
 * characters, cut at an odd byte: the param and message stay valid UTF-8
 * (the fuzzer found the cut in the middle of a character). */
static void test_long_unknown_field_name(void)
{
    char body[1024] = "{\"prompt\":\"x\",\"";
    for (int i = 0; i < 300; i++)
        strcat(body, "\xc3\xa9");
    strcat(body, "\":1}");
    struct folio_oai_request r;
    struct folio_oai_error e;
    CHECK(parse(C, body, &r, &e) == -1);
    CHECK(e.status == 400);
    CHECK(strlen(e.param) > 0 && valid_utf8(e.param));
    CHECK(strstr(e.message, "Unrecognized") != NULL && valid_utf8(e.message));
    char odd[] = "{\"prompt\":\"x\",\"g\xc3\xa9\xc3\xa9\":1}";
    CHECK(parse(C, odd, &r, &e) == -1);
    CHECK(!strcmp(e.param, "g\xc3\xa9\xc3\xa9"));
    folio_oai_request_free(&r);
}

int main(void)
{
    test_rejected();
    test_long_unknown_field_name();
    test_accepted();
    test_max_tokens_defaults();
    return check_report();
}
