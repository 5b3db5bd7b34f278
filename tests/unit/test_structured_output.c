/* frontend/structured_output.c through the request parser: each place a constraint may come
 * from gives its kind and text (schemas as compact JSON in their key order), the request's
 * sequences carry it (folio_oai_seq_params), and malformed ones, unknown keys and two
 * constraints at once are 400s naming the field. Whether a schema, regex or grammar is valid
 * is the engine's to say (tests/test_structured_outputs.py sends them through a server). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "openai_api.h"

#define C FOLIO_OAI_COMPLETIONS
#define H FOLIO_OAI_CHAT
#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

/* body parses with the constraint (kind, text) from param. */
static void expect(enum folio_oai_endpoint ep, const char *body, enum folio_grammar_kind kind,
                   const char *text, const char *param)
{
    struct folio_oai_request r;
    struct folio_oai_error e;
    int rc = folio_oai_parse_request(ep, body, strlen(body), NULL, &r, &e);
    if (rc != 0)
        fprintf(stderr, "body %s: %s\n", body, e.message);
    CHECK(rc == 0);
    CHECK(r.grammar.on);
    CHECK(r.grammar.kind == kind);
    if (!r.grammar.text || strcmp(r.grammar.text, text) || strcmp(r.grammar.param, param))
        fprintf(stderr, "body %s: text '%s' from '%s'; wanted '%s' from '%s'\n", body,
                r.grammar.text, r.grammar.param, text, param);
    CHECK(r.grammar.text && !strcmp(r.grammar.text, text));
    CHECK(r.grammar.len == strlen(text));
    CHECK(!strcmp(r.grammar.param, param));
    struct folio_seq_params sp;
    folio_oai_seq_params(&r, 1, 10, &sp);
    CHECK(sp.grammar.on && sp.grammar.kind == kind && sp.grammar.len == (int32_t)strlen(text));
    CHECK(!memcmp(sp.grammar.text, text, strlen(text)));
    folio_oai_request_free(&r);
}

static void expect_none(enum folio_oai_endpoint ep, const char *body)
{
    struct folio_oai_request r;
    struct folio_oai_error e;
    CHECK(folio_oai_parse_request(ep, body, strlen(body), NULL, &r, &e) == 0);
    CHECK(!r.grammar.on);
    struct folio_seq_params sp;
    folio_oai_seq_params(&r, 0, 10, &sp);
    CHECK(!sp.grammar.on);
    folio_oai_request_free(&r);
}

static void expect_400(enum folio_oai_endpoint ep, const char *body, const char *param,
                       const char *want)
{
    struct folio_oai_request r;
    struct folio_oai_error e;
    CHECK(folio_oai_parse_request(ep, body, strlen(body), NULL, &r, &e) == -1);
    CHECK(e.status == 400);
    if (strcmp(e.param, param) || !strstr(e.message, want))
        fprintf(stderr, "body %s: param '%s' message '%s'; wanted '%s' / '%s'\n", body, e.param,
                e.message, param, want);
    CHECK(!strcmp(e.param, param));
    CHECK(strstr(e.message, want) != NULL);
    folio_oai_request_free(&r);
}

static void test_sources(void)
{
    expect_none(H, "{" MSG ",\"response_format\":{\"type\":\"text\"}}");
    expect_none(H, "{" MSG ",\"response_format\":null,\"guided_json\":null,"
                   "\"structured_outputs\":{\"regex\":null}}");
    expect(H, "{" MSG ",\"response_format\":{\"type\":\"json_object\"}}", FOLIO_GRAMMAR_JSON_OBJECT,
           "", "response_format");
    /* the schema's keys keep their order: the output's properties follow it */
    expect(H,
           "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
           "\"p\",\"strict\":true,\"description\":\"d\",\"schema\":{\"type\":\"object\","
           "\"properties\":{\"z\":{\"type\":\"integer\"},\"a\":{\"type\":\"string\"}}}}}}",
           FOLIO_GRAMMAR_JSON_SCHEMA,
           "{\"type\":\"object\",\"properties\":{\"z\":{\"type\":\"integer\"},\"a\":{\"type\":"
           "\"string\"}}}",
           "response_format");
    expect(C,
           "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
           "{\"name\":\"n\",\"schema\":{\"type\":\"integer\"},\"strict\":null}}}",
           FOLIO_GRAMMAR_JSON_SCHEMA, "{\"type\":\"integer\"}", "response_format");
    expect(C, "{\"prompt\":\"x\",\"structured_outputs\":{\"json\":{\"type\":\"boolean\"}}}",
           FOLIO_GRAMMAR_JSON_SCHEMA, "{\"type\":\"boolean\"}", "structured_outputs.json");
    expect(C,
           "{\"prompt\":\"x\",\"structured_outputs\":{\"json\":\"{\\\"type\\\": \\\"null\\\"}\"}}",
           FOLIO_GRAMMAR_JSON_SCHEMA, "{\"type\": \"null\"}", "structured_outputs.json");
    expect(H, "{" MSG ",\"structured_outputs\":{\"regex\":\"[a-z]+\",\"choice\":null}}",
           FOLIO_GRAMMAR_REGEX, "[a-z]+", "structured_outputs.regex");
    expect(H, "{" MSG ",\"structured_outputs\":{\"choice\":[\"yes\",\"no\"]}}",
           FOLIO_GRAMMAR_CHOICE, "[\"yes\",\"no\"]", "structured_outputs.choice");
    expect(H, "{" MSG ",\"structured_outputs\":{\"grammar\":\"start: \\\"a\\\"+\"}}",
           FOLIO_GRAMMAR_LARK, "start: \"a\"+", "structured_outputs.grammar");
    expect(H, "{" MSG ",\"structured_outputs\":{\"json_object\":true}}", FOLIO_GRAMMAR_JSON_OBJECT,
           "", "structured_outputs.json_object");
    expect_none(H, "{" MSG ",\"structured_outputs\":{\"json_object\":false}}");
    expect(C, "{\"prompt\":\"x\",\"guided_json\":{\"type\":\"object\"}}", FOLIO_GRAMMAR_JSON_SCHEMA,
           "{\"type\":\"object\"}", "guided_json");
    expect(C, "{\"prompt\":\"x\",\"guided_regex\":\"\\\\d{3}\"}", FOLIO_GRAMMAR_REGEX, "\\d{3}",
           "guided_regex");
    expect(C, "{\"prompt\":\"x\",\"guided_choice\":[\"a\",\"b c\"]}", FOLIO_GRAMMAR_CHOICE,
           "[\"a\",\"b c\"]", "guided_choice");
    expect(C, "{\"prompt\":\"x\",\"guided_grammar\":\"start: /[0-9]+/\"}", FOLIO_GRAMMAR_LARK,
           "start: /[0-9]+/", "guided_grammar");
}

static void test_refused(void)
{
    expect_400(H, "{" MSG ",\"response_format\":{\"type\":\"json_object\"},\"guided_regex\":\"a\"}",
               "guided_regex", "'response_format' and 'guided_regex'");
    expect_400(C, "{\"prompt\":\"x\",\"structured_outputs\":{\"regex\":\"a\",\"choice\":[\"a\"]}}",
               "structured_outputs.choice",
               "'structured_outputs.regex' and 'structured_outputs.choice'");
    expect_400(C, "{\"prompt\":\"x\",\"guided_json\":{},\"structured_outputs\":{\"json\":{}}}",
               "guided_json", "one structured output constraint");
    expect_400(H,
               "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
               "{\"name\":\"n\"}}}",
               "response_format", "'response_format.json_schema.schema' must be a JSON schema");
    expect_400(H,
               "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
               "{\"name\":3,\"schema\":{}}}}",
               "response_format", "'response_format.json_schema.name' must be a string");
    expect_400(H,
               "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
               "{\"schema\":{},\"strict\":\"yes\"}}}",
               "response_format", "strict' must be a boolean");
    expect_400(H,
               "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
               "{\"schema\":{},\"extra\":1}}}",
               "response_format", "'response_format.json_schema.extra' is not supported");
    expect_400(H, "{" MSG ",\"response_format\":{\"type\":\"structural_tag\"}}", "response_format",
               "'structural_tag' is not supported");
    expect_400(C, "{\"prompt\":\"x\",\"structured_outputs\":{\"whitespace_pattern\":\" \"}}",
               "structured_outputs", "'structured_outputs.whitespace_pattern' is not supported");
    expect_400(C, "{\"prompt\":\"x\",\"structured_outputs\":[]}", "structured_outputs",
               "must be an object");
    expect_400(C, "{\"prompt\":\"x\",\"guided_regex\":3}", "guided_regex", "must be a string");
    expect_400(C, "{\"prompt\":\"x\",\"guided_choice\":\"a\"}", "guided_choice",
               "must be a list of strings");
    expect_400(C, "{\"prompt\":\"x\",\"guided_json\":3}", "guided_json", "must be a JSON schema");
    expect_400(C, "{\"prompt\":\"x\",\"structured_outputs\":{\"json_object\":1}}",
               "structured_outputs.json_object", "must be a boolean");
    /* past FOLIO_MAX_GRAMMAR_BYTES */
    size_t n = FOLIO_MAX_GRAMMAR_BYTES + 1;
    char *body = malloc(n + 64);
    int at = sprintf(body, "{\"prompt\":\"x\",\"guided_regex\":\"");
    memset(body + at, 'a', n);
    strcpy(body + at + n, "\"}");
    expect_400(C, body, "guided_regex", "at most 262144 are allowed");
    free(body);
}

int main(void)
{
    test_sources();
    test_refused();
    return check_report();
}
