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
    expect_400(H, "{" MSG ",\"functions\":[{\"name\":\"f\"}]}", "functions", "not supported");
    expect_400(H, "{" MSG ",\"function_call\":\"auto\"}", "function_call", "only \"none\"");
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
    expect_400(H, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]}",
               "messages", "'messages[0].tool_calls'");
    expect_400(H, "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{}]}]}",
               "messages", "'messages[0].tool_calls[0]'");
    expect_400(H, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"function_call\":{}}]}",
               "messages", "'messages[0].function_call'");
}

#define TOOL(name, params)                                                                         \
    "{\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"parameters\":" params "}}"
#define WEATHER                                                                                    \
    TOOL("get_weather", "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}")

/* tools, tool_choice, parallel_tool_calls and the tool fields of messages. */
static void test_tools(void)
{
    expect_400(H, "{" MSG ",\"tools\":[]}", "tools", "non-empty list");
    expect_400(H, "{" MSG ",\"tools\":[{\"type\":\"retrieval\"}]}", "tools[0]", "\"function\"");
    expect_400(H, "{" MSG ",\"tools\":[" TOOL("get weather", "{}") "]}", "tools[0].function.name",
               "letters, digits");
    expect_400(H, "{" MSG ",\"tools\":[" WEATHER "," WEATHER "]}", "tools[1].function.name",
               "already tools[0]");
    expect_400(H, "{" MSG ",\"tools\":[" TOOL("f", "[1]") "]}", "tools[0].function.parameters",
               "a JSON schema object");
    expect_400(H, "{" MSG ",\"tools\":[" TOOL("f", "{\"properties\":[]}") "]}",
               "tools[0].function.parameters", "properties");
    expect_400(H, "{" MSG ",\"tools\":[" TOOL("f", "{\"required\":[1]}") "]}",
               "tools[0].function.parameters", "required[0]");
    expect_400(H, "{" MSG ",\"tools\":[" WEATHER "],\"tool_choice\":\"any\"}", "tool_choice",
               "\"any\"");
    expect_400(H,
               "{" MSG ",\"tools\":[" WEATHER "],\"tool_choice\":{\"type\":\"function\","
               "\"function\":{\"name\":\"get_time\"}}}",
               "tool_choice", "'get_time', which is not in 'tools'");
    expect_400(H, "{" MSG ",\"tool_choice\":\"required\"}", "tool_choice", "needs 'tools'");
    expect_400(H, "{" MSG ",\"tools\":[" WEATHER "],\"parallel_tool_calls\":1}",
               "parallel_tool_calls", "boolean");
    expect_400(H,
               "{" MSG ",\"tools\":[" WEATHER "],\"tool_choice\":\"required\","
               "\"response_format\":{\"type\":\"json_object\"}}",
               "tool_choice", "one structured output constraint");
    expect_400(H, "{\"messages\":[{\"role\":\"tool\",\"content\":\"21 C\"}]}", "messages",
               "'messages[0].tool_call_id' is required");
    expect_400(H,
               "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c1\","
               "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{x\"}}]}]}",
               "messages", "arguments' is not valid JSON");

    struct folio_oai_request r;
    struct folio_oai_error e;
    /* tools without tool_choice: auto, as OpenAI's default */
    CHECK(parse(H, "{" MSG ",\"tools\":[" WEATHER "]}", &r, &e) == 0);
    CHECK(r.tools.choice == FOLIO_TOOL_CHOICE_AUTO && r.tools.num_tools == 1 && r.tools.parallel);
    CHECK(!r.grammar.on);
    folio_oai_request_free(&r);
    /* required: vLLM's list-of-calls schema as the constraint */
    CHECK(parse(H,
                "{" MSG ",\"tools\":[" WEATHER "],\"tool_choice\":\"required\","
                "\"parallel_tool_calls\":false}",
                &r, &e) == 0);
    CHECK(r.tools.choice == FOLIO_TOOL_CHOICE_REQUIRED && !r.tools.parallel);
    CHECK(r.grammar.on && r.grammar.kind == FOLIO_GRAMMAR_JSON_SCHEMA);
    CHECK(r.grammar.text && strstr(r.grammar.text, "\"enum\":[\"get_weather\"]") &&
          strstr(r.grammar.text, "\"maxItems\":1") && strstr(r.grammar.text, "\"minItems\":1"));
    CHECK(!strcmp(r.grammar.param, "tool_choice"));
    folio_oai_request_free(&r);
    /* a named function: its parameters are the constraint */
    CHECK(parse(H,
                "{" MSG ",\"tools\":[" WEATHER "],\"tool_choice\":{\"type\":\"function\","
                "\"function\":{\"name\":\"get_weather\"}}}",
                &r, &e) == 0);
    CHECK(r.tools.choice == FOLIO_TOOL_CHOICE_NAMED && !strcmp(r.tools.function, "get_weather"));
    CHECK(r.grammar.on &&
          !strcmp(r.grammar.text, "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                                  "\"string\"}}}"));
    folio_oai_request_free(&r);
    /* the round trip's messages: the assistant's call (arguments parsed for the
     * template) and the tool's answer */
    CHECK(parse(H,
                "{\"messages\":[{\"role\":\"user\",\"content\":\"w?\",\"name\":\"bob\"},"
                "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
                "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
                "\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"
                "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"21 C\"}],"
                "\"tools\":[" WEATHER "]}",
                &r, &e) == 0);
    json_t *m = r.template_messages;
    CHECK(json_array_size(m) == 3);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(m, 0), "name")), "bob"));
    json_t *call = json_array_get(json_object_get(json_array_get(m, 1), "tool_calls"), 0);
    json_t *args = json_object_get(json_object_get(call, "function"), "arguments");
    CHECK(json_is_object(args) &&
          !strcmp(json_string_value(json_object_get(args, "city")), "Paris"));
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(m, 2), "tool_call_id")), "c1"));
    folio_oai_request_free(&r);
}

static void test_accepted(void)
{
    expect_ok(H, "{" MSG ",\"response_format\":{\"type\":\"text\"},\"tool_choice\":\"none\","
                 "\"user\":\"u1\",\"metadata\":{\"a\":\"b\"},\"store\":false,"
                 "\"modalities\":[\"text\"],\"service_tier\":\"auto\",\"tools\":null}");
    expect_ok(C, "{\"prompt\":\"x\",\"best_of\":1,\"suffix\":null,\"user\":\"u\","
                 "\"use_beam_search\":false,\"add_special_tokens\":true}");
    expect_ok(H, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":null}]}");
    expect_ok(H, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":\"bob\"}]}");
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
    test_tools();
    test_max_tokens_defaults();
    return check_report();
}
