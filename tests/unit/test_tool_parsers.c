/* The tool-call and reasoning parsers (frontend/chat_output.c and the
 * parsers under it) over recorded model outputs: each output's whole parse
 * is checked against what it must give, then the same output is replayed
 * split at every byte (one piece per byte), at every single split point (two
 * pieces), at every pair of split points for short outputs (three pieces),
 * and token by token as the Llama-2 tokenizer's streaming detokenizer cuts
 * it; each time the deltas' concatenation must equal the whole parse byte
 * for byte (content, reasoning, every call's id, name and arguments). The
 * byte-wise and token-wise replays also go through the SSE writer: the
 * chunks, read back as JSON and joined as a client joins them, must give the
 * message the non-streaming response writes. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat_output.h"
#include "check.h"
#include "openai_api.h"
#include "tokenizer.h"

struct want_call {
    const char *name, *args;
};

struct tcase {
    const char *label;
    const char *parser; /* NULL, hermes, llama3_json, mistral, required, named */
    enum folio_reasoning_kind reasoning;
    const char *text;
    const char *content, *reasoning_text;
    struct want_call calls[4];
    size_t max_calls;
};

#define WEATHER_PARIS "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"

static const struct tcase cases[] = {
    /* ---- hermes: Qwen2.5's and the ChatML tool template's format ---- */
    {"hermes one call (Qwen2.5)",
     "hermes",
     0,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
     "\"celsius\"}}\n</tool_call>",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
     0},
    {"hermes text then two calls",
     "hermes",
     0,
     "Let me check both.\n<tool_call>\n" WEATHER_PARIS
     "\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": "
     "\"Europe/Paris\"}}\n</tool_call>",
     "Let me check both.",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{\"tz\": \"Europe/Paris\"}"}},
     0},
    {"hermes plain answer",
     "hermes",
     0,
     "The weather in Paris is sunny.\n\n",
     "The weather in Paris is sunny.\n\n",
     NULL,
     {{0}},
     0},
    {"hermes call cut by max_tokens is text",
     "hermes",
     0,
     "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
     "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
     NULL,
     {{0}},
     0},
    {"hermes malformed call is text",
     "hermes",
     0,
     "<tool_call>{name: get_weather}</tool_call> sorry",
     "<tool_call>{name: get_weather}</tool_call> sorry",
     NULL,
     {{0}},
     0},
    {"hermes object without a name is text",
     "hermes",
     0,
     "<tool_call>{\"arguments\": {}}</tool_call>",
     "<tool_call>{\"arguments\": {}}</tool_call>",
     NULL,
     {{0}},
     0},
    {"hermes closing tags missing",
     "hermes",
     0,
     "<tool_call>\n" WEATHER_PARIS "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{}"}},
     0},
    {"hermes closing tag cut short",
     "hermes",
     0,
     "<tool_call>" WEATHER_PARIS "</tool_c",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}},
     0},
    {"hermes tags inside strings",
     "hermes",
     0,
     "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"</tool_call> <tool_call> "
     "\\\"quoted\\\" \\\\\"}}</tool_call>",
     "",
     NULL,
     {{"search", "{\"q\": \"</tool_call> <tool_call> \\\"quoted\\\" \\\\\"}"}},
     0},
    {"hermes a tag-like word is text",
     "hermes",
     0,
     "Use a <tool> or <tool_cal here <",
     "Use a <tool> or <tool_cal here <",
     NULL,
     {{0}},
     0},
    {"hermes text after the call",
     "hermes",
     0,
     "<tool_call>" WEATHER_PARIS "</tool_call>\n\nI asked for the weather.",
     "I asked for the weather.",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}},
     0},
    {"hermes escaped name, unicode and numbers",
     "hermes",
     0,
     "<tool_call>{\"arguments\": {\"city\": \"S\xc3\xa3o Paulo \xe6\x9d\xb1\xe4\xba\xac\", \"n\": "
     "[-1.5e3, 0, 12.25, true, false, null], \"o\": {\"a\": {\"b\": []}}}, \"name\": "
     "\"get_\\u0077eather\"}</tool_call>",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"S\xc3\xa3o Paulo \xe6\x9d\xb1\xe4\xba\xac\", \"n\": [-1.5e3, "
                      "0, 12.25, true, false, null], \"o\": {\"a\": {\"b\": []}}}"}},
     0},
    {"hermes arguments absent",
     "hermes",
     0,
     "<tool_call>{\"name\": \"now\"}</tool_call>",
     "",
     NULL,
     {{"now", "{}"}},
     0},
    {"hermes arguments not an object is text",
     "hermes",
     0,
     "<tool_call>{\"name\": \"f\", \"arguments\": \"x\"}</tool_call>",
     "<tool_call>{\"name\": \"f\", \"arguments\": \"x\"}</tool_call>",
     NULL,
     {{0}},
     0},
    {"hermes parallel_tool_calls false keeps the first",
     "hermes",
     0,
     "<tool_call>" WEATHER_PARIS "</tool_call><tool_call>{\"name\": \"get_time\", \"arguments\": "
     "{}}</tool_call>",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}},
     1},
    {"hermes after qwen3 reasoning",
     "hermes",
     FOLIO_REASONING_QWEN3,
     "<think>\nThe user wants the weather. I call "
     "get_weather.\n</think>\n\n<tool_call>\n" WEATHER_PARIS "\n</tool_call>",
     "",
     "\nThe user wants the weather. I call get_weather.\n",
     {{"get_weather", "{\"city\": \"Paris\"}"}},
     0},
    {"hermes tags in the reasoning are reasoning",
     "hermes",
     FOLIO_REASONING_DEEPSEEK_R1,
     "I could write <tool_call>{\"name\": \"x\"}</tool_call> here.</think>No call needed.",
     "No call needed.",
     "I could write <tool_call>{\"name\": \"x\"}</tool_call> here.",
     {{0}},
     0},

    /* ---- llama3_json: Llama 3.x ---- */
    {"llama3 one call",
     "llama3_json",
     0,
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}},
     0},
    {"llama3 python_tag and two calls",
     "llama3_json",
     0,
     "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; "
     "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{\"tz\": \"CET\"}"}},
     0},
    {"llama3 plain answer",
     "llama3_json",
     0,
     "  Paris is the capital of France.",
     "  Paris is the capital of France.",
     NULL,
     {{0}},
     0},
    {"llama3 JSON that is not a call",
     "llama3_json",
     0,
     "{\"answer\": 42} is my reply",
     "{\"answer\": 42} is my reply",
     NULL,
     {{0}},
     0},
    {"llama3 call cut short is text",
     "llama3_json",
     0,
     "{\"name\": \"get_weather\", \"parameters\": {\"ci",
     "{\"name\": \"get_weather\", \"parameters\": {\"ci",
     NULL,
     {{0}},
     0},
    {"llama3 call then text",
     "llama3_json",
     0,
     "{\"name\": \"get_weather\", \"parameters\": {}}\n\nThat asks for the weather.",
     "That asks for the weather.",
     NULL,
     {{"get_weather", "{}"}},
     0},
    {"llama3 a tag alone is text",
     "llama3_json",
     0,
     "<|python_tag|>",
     "<|python_tag|>",
     NULL,
     {{0}},
     0},
    {"llama3 a call later in the text is text",
     "llama3_json",
     0,
     "Call: {\"name\": \"f\", \"parameters\": {}}",
     "Call: {\"name\": \"f\", \"parameters\": {}}",
     NULL,
     {{0}},
     0},

    /* ---- mistral ---- */
    {"mistral one call",
     "mistral",
     0,
     "[TOOL_CALLS][" WEATHER_PARIS "]",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}},
     0},
    {"mistral text and two calls",
     "mistral",
     0,
     "Sure. [TOOL_CALLS] [" WEATHER_PARIS ", {\"name\": \"get_time\", \"arguments\": {}}]",
     "Sure.",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{}"}},
     0},
    {"mistral one object",
     "mistral",
     0,
     "[TOOL_CALLS]" WEATHER_PARIS,
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}},
     0},
    {"mistral list cut short gives back its rest",
     "mistral",
     0,
     "[TOOL_CALLS][" WEATHER_PARIS ", {\"name\": \"get_ti",
     ", {\"name\": \"get_ti",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}},
     0},
    {"mistral plain", "mistral", 0, "Bonjour [TOOL]", "Bonjour [TOOL]", NULL, {{0}}, 0},
    {"mistral a list of strings is text",
     "mistral",
     0,
     "[TOOL_CALLS][\"a\"]",
     "[TOOL_CALLS][\"a\"]",
     NULL,
     {{0}},
     0},

    /* ---- tool_choice "required" and a named function (grammar-constrained) ---- */
    {"required one call",
     "required",
     0,
     "[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}]",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}},
     0},
    {"required two calls, whitespace",
     "required",
     0,
     "[\n  {\"name\": \"get_weather\",\n   \"parameters\": {\"city\": \"Paris\", \"days\": 3}},\n"
     "  {\"name\": \"get_time\", \"parameters\": {}}\n]\n",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\", \"days\": 3}"}, {"get_time", "{}"}},
     0},
    {"required parameters before name",
     "required",
     0,
     "[{\"parameters\": {\"city\": \"Paris\"}, \"name\": \"get_weather\"}]",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}},
     0},
    {"required cut by max_tokens",
     "required",
     0,
     "[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Pa",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Pa"}},
     0},
    {"named",
     "named",
     0,
     "{\"city\": \"Paris\", \"unit\": \"celsius\"}",
     "",
     NULL,
     {{"get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
     0},
    {"named empty", "named", 0, "", "", NULL, {{"get_weather", ""}}, 0},

    /* ---- reasoning alone ---- */
    {"deepseek_r1 without the open tag",
     NULL,
     FOLIO_REASONING_DEEPSEEK_R1,
     "Let me think: 2 + 2.</think>The answer is 4.",
     "The answer is 4.",
     "Let me think: 2 + 2.",
     {{0}},
     0},
    {"deepseek_r1 with the open tag",
     NULL,
     FOLIO_REASONING_DEEPSEEK_R1,
     "<think>\nhmm </thin </think>\n\nHi",
     "\n\nHi",
     "\nhmm </thin ",
     {{0}},
     0},
    {"deepseek_r1 never closed",
     NULL,
     FOLIO_REASONING_DEEPSEEK_R1,
     "thinking forever <th",
     "",
     "thinking forever <th",
     {{0}},
     0},
    {"deepseek_r1 closed at once",
     NULL,
     FOLIO_REASONING_DEEPSEEK_R1,
     "</think>x",
     "x",
     "",
     {{0}},
     0},
    {"qwen3", NULL, FOLIO_REASONING_QWEN3, "<think>a < b</think>b > a", "b > a", "a < b", {{0}}, 0},
    {"qwen3 without thinking",
     NULL,
     FOLIO_REASONING_QWEN3,
     "<thinking> is not the tag",
     "<thinking> is not the tag",
     "",
     {{0}},
     0},
    {"qwen3 unclosed",
     NULL,
     FOLIO_REASONING_QWEN3,
     "<think>still going",
     "",
     "still going",
     {{0}},
     0},
    {"qwen3 a prefix of the tag", NULL, FOLIO_REASONING_QWEN3, "<thi", "<thi", "", {{0}}, 0},
};

static struct folio_tokenizer *tok;

static const struct folio_tool_parser_ops *parser_of(const char *name)
{
    if (!name)
        return NULL;
    if (!strcmp(name, "required"))
        return &folio_tool_parser_required;
    if (!strcmp(name, "named"))
        return &folio_tool_parser_named;
    return folio_tool_parser_find(name);
}

static void init_output(struct folio_chat_output *o, const struct tcase *tc)
{
    struct folio_chat_output_cfg cfg = {.reasoning = tc->reasoning,
                                        .parser = parser_of(tc->parser),
                                        .function = "get_weather",
                                        .max_calls = tc->max_calls,
                                        .id_seed = 12345};
    CHECK(folio_chat_output_init(o, &cfg) == 0);
}

/* A message as flat strings, for comparing. */
struct flat {
    struct folio_jw content, reasoning;
    struct folio_jw id[8], name[8], args[8];
    size_t num_calls;
};

static void flat_init(struct flat *f)
{
    memset(f, 0, sizeof *f);
}

static void flat_free(struct flat *f)
{
    folio_jw_free(&f->content);
    folio_jw_free(&f->reasoning);
    for (size_t i = 0; i < 8; i++) {
        folio_jw_free(&f->id[i]);
        folio_jw_free(&f->name[i]);
        folio_jw_free(&f->args[i]);
    }
}

static void flat_add(struct flat *f, const struct folio_oai_chat_parts *p, const char *content,
                     size_t len)
{
    folio_jw_raw(&f->content, content, len);
    folio_jw_raw(&f->reasoning, p->reasoning, p->reasoning_len);
    for (size_t i = 0; i < p->num_calls; i++) {
        const struct folio_oai_tool_call *t = &p->calls[i];
        CHECK(t->index < 8);
        if (t->index >= 8)
            continue;
        if (t->id) {
            CHECK(t->index == f->num_calls); /* calls begin in order, once each */
            f->num_calls = t->index + 1;
            folio_jw_str(&f->id[t->index], t->id);
            folio_jw_str(&f->name[t->index], t->name);
        } else {
            CHECK(t->index + 1 == f->num_calls); /* only the last call grows */
        }
        folio_jw_raw(&f->args[t->index], t->args, t->args_len);
    }
}

static bool same(const struct folio_jw *a, const struct folio_jw *b)
{
    return a->len == b->len && (a->len == 0 || !memcmp(a->data, b->data, a->len));
}

static bool flat_equal(const struct flat *a, const struct flat *b)
{
    bool eq = same(&a->content, &b->content) && same(&a->reasoning, &b->reasoning) &&
              a->num_calls == b->num_calls;
    for (size_t i = 0; eq && i < a->num_calls; i++)
        eq = same(&a->id[i], &b->id[i]) && same(&a->name[i], &b->name[i]) &&
             same(&a->args[i], &b->args[i]);
    return eq;
}

static bool is(const struct folio_jw *a, const char *s)
{
    return a->len == strlen(s) && (a->len == 0 || !memcmp(a->data, s, a->len));
}

/* The whole text at once, as a non-streaming request parses it. */
static void whole(const struct tcase *tc, struct flat *f)
{
    struct folio_chat_output o;
    init_output(&o, tc);
    folio_chat_output_push(&o, tc->text, strlen(tc->text));
    folio_chat_output_finish(&o);
    struct folio_oai_chat_parts p;
    const char *content;
    size_t len;
    folio_chat_output_message(&o, true, &p, &content, &len);
    flat_add(f, &p, content, len);
    CHECK(!o.sink.failed);
    folio_chat_output_free(&o);
}

/* The text in pieces (cuts: the end of each piece but the last), deltas
 * taken after each push and after the finish. */
static void pieces(const struct tcase *tc, const size_t *cuts, size_t ncuts, struct flat *f)
{
    struct folio_chat_output o;
    init_output(&o, tc);
    size_t at = 0, n = strlen(tc->text);
    struct folio_oai_chat_parts p;
    const char *content;
    size_t len;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : n;
        folio_chat_output_push(&o, tc->text + at, end - at);
        at = end;
        folio_chat_output_take(&o, true, &p, &content, &len);
        flat_add(f, &p, content, len);
    }
    folio_chat_output_finish(&o);
    folio_chat_output_take(&o, true, &p, &content, &len);
    flat_add(f, &p, content, len);
    folio_chat_output_free(&o);
}

static bool pieces_equal(const struct tcase *tc, const struct flat *want, const size_t *cuts,
                         size_t ncuts)
{
    struct flat f;
    flat_init(&f);
    pieces(tc, cuts, ncuts, &f);
    bool eq = flat_equal(&f, want);
    flat_free(&f);
    return eq;
}

/* ---- through the SSE writer, read back as a client reads it ---- */

static const struct folio_oai_response_ctx RCTX = {FOLIO_OAI_CHAT, "chatcmpl-x", 1, "m", false, 0};

/* Joins the chunks' deltas into a message object {content, reasoning_content, tool_calls}. */
static void join_chunk(json_t *msg, const char *sse, size_t len)
{
    CHECK(len > 8 && !memcmp(sse, "data: ", 6));
    json_t *chunk = json_loadb(sse + 6, len - 6, 0, NULL);
    CHECK(chunk != NULL);
    json_t *delta = json_object_get(json_array_get(json_object_get(chunk, "choices"), 0), "delta");
    static const char *const text_keys[] = {"content", "reasoning_content"};
    for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(delta, text_keys[k]);
        if (!json_is_string(v))
            continue;
        json_t *have = json_object_get(msg, text_keys[k]);
        char *joined = malloc(json_string_length(have) + json_string_length(v) + 1);
        memcpy(joined, json_string_value(have), json_string_length(have));
        memcpy(joined + json_string_length(have), json_string_value(v), json_string_length(v) + 1);
        json_object_set_new(msg, text_keys[k],
                            json_stringn(joined, json_string_length(have) + json_string_length(v)));
        free(joined);
    }
    size_t i;
    json_t *tc;
    json_array_foreach(json_object_get(delta, "tool_calls"), i, tc)
    {
        json_t *calls = json_object_get(msg, "tool_calls");
        size_t index = (size_t)json_integer_value(json_object_get(tc, "index"));
        json_t *fn = json_object_get(tc, "function");
        if (json_object_get(tc, "id")) {
            CHECK(index == json_array_size(calls));
            json_t *call = json_deep_copy(tc);
            json_object_del(call, "index");
            json_array_append_new(calls, call);
            continue;
        }
        json_t *call = json_array_get(calls, index);
        CHECK(call != NULL);
        json_t *cfn = json_object_get(call, "function");
        json_t *have = json_object_get(cfn, "arguments"), *add = json_object_get(fn, "arguments");
        size_t a = json_string_length(have), b = json_string_length(add);
        char *joined = malloc(a + b + 1);
        memcpy(joined, json_string_value(have), a);
        memcpy(joined + a, json_string_value(add), b + 1);
        json_object_set_new(cfn, "arguments", json_stringn(joined, a + b));
        free(joined);
    }
    json_decref(chunk);
}

/* The message the non-streaming writer gives, as a client reads it
 * (content and reasoning_content null as ""; no tool_calls as []). */
static json_t *response_message(const struct tcase *tc)
{
    struct folio_chat_output o;
    init_output(&o, tc);
    folio_chat_output_push(&o, tc->text, strlen(tc->text));
    folio_chat_output_finish(&o);
    struct folio_oai_chat_parts p;
    struct folio_oai_choice ch = {.finish_reason = "stop", .parts = &p};
    folio_chat_output_message(&o, true, &p, &ch.text, &ch.len);
    struct folio_jw b;
    folio_jw_init(&b);
    struct folio_oai_usage u = {1, 1, 0};
    folio_oai_write_response(&b, &RCTX, &ch, 1, &u);
    json_t *r = json_loadb(b.data, b.len, 0, NULL);
    CHECK(r != NULL);
    json_t *msg = json_deep_copy(
        json_object_get(json_array_get(json_object_get(r, "choices"), 0), "message"));
    json_decref(r);
    folio_jw_free(&b);
    folio_chat_output_free(&o);
    if (json_is_null(json_object_get(msg, "content")))
        json_object_set_new(msg, "content", json_string(""));
    if (json_is_null(json_object_get(msg, "reasoning_content")))
        json_object_set_new(msg, "reasoning_content", json_string(""));
    if (!json_object_get(msg, "tool_calls"))
        json_object_set_new(msg, "tool_calls", json_array());
    json_object_del(msg, "role");
    return msg;
}

/* The text streamed in the given pieces through the chunk writer. */
static json_t *streamed_message(const struct tcase *tc, const char *const *piece,
                                const size_t *piece_len, size_t n)
{
    struct folio_chat_output o;
    init_output(&o, tc);
    json_t *msg =
        json_pack("{s:s, s:s, s:[]}", "content", "", "reasoning_content", "", "tool_calls");
    struct folio_jw b;
    folio_jw_init(&b);
    struct folio_oai_chat_parts p;
    const char *content;
    size_t len;
    for (size_t i = 0; i <= n; i++) {
        if (i < n)
            folio_chat_output_push(&o, piece[i], piece_len[i]);
        else
            folio_chat_output_finish(&o);
        folio_chat_output_take(&o, true, &p, &content, &len);
        folio_jw_reset(&b);
        folio_oai_write_chat_chunk(&b, &RCTX, i == 0, content, len, &p, i == n ? "stop" : NULL,
                                   NULL, 0, NULL);
        join_chunk(msg, b.data, b.len);
    }
    folio_jw_free(&b);
    folio_chat_output_free(&o);
    return msg;
}

/* ---- the replays ---- */

static void check_case(const struct tcase *tc)
{
    struct flat want;
    flat_init(&want);
    whole(tc, &want);
    /* the whole parse is what the output means */
    bool ok = is(&want.content, tc->content) &&
              is(&want.reasoning, tc->reasoning_text ? tc->reasoning_text : "");
    size_t ncalls = 0;
    while (ncalls < 4 && tc->calls[ncalls].name)
        ncalls++;
    ok &= want.num_calls == ncalls;
    for (size_t i = 0; ok && i < ncalls; i++)
        ok = is(&want.name[i], tc->calls[i].name) && is(&want.args[i], tc->calls[i].args) &&
             want.id[i].len == (tc->parser && !strcmp(tc->parser, "mistral") ? 9u : 46u);
    if (!ok) {
        fprintf(stderr, "%s: content [%.*s] reasoning [%.*s] calls %zu", tc->label,
                (int)want.content.len, want.content.data ? want.content.data : "",
                (int)want.reasoning.len, want.reasoning.data ? want.reasoning.data : "",
                want.num_calls);
        for (size_t i = 0; i < want.num_calls; i++)
            fprintf(stderr, " {%s %s %.*s}", want.id[i].data, want.name[i].data,
                    (int)want.args[i].len, want.args[i].data ? want.args[i].data : "");
        fprintf(stderr, "\n");
    }
    CHECK(ok);

    size_t n = strlen(tc->text);
    /* one byte at a time */
    size_t *cuts = malloc((n + 1) * sizeof *cuts);
    for (size_t i = 0; i + 1 < n; i++)
        cuts[i] = i + 1;
    bool bytewise = pieces_equal(tc, &want, cuts, n > 1 ? n - 1 : 0);
    if (!bytewise)
        fprintf(stderr, "%s: the byte-by-byte stream differs\n", tc->label);
    CHECK(bytewise);
    /* every single split point, and every pair of them for short texts */
    size_t bad = 0;
    for (size_t i = 0; i <= n; i++) {
        bad += !pieces_equal(tc, &want, &i, 1);
        for (size_t j = i; n <= 120 && j <= n; j++) {
            size_t two[2] = {i, j};
            bad += !pieces_equal(tc, &want, two, 2);
        }
    }
    if (bad)
        fprintf(stderr, "%s: %zu split streams differ\n", tc->label, bad);
    CHECK(bad == 0);
    free(cuts);

    /* token by token as the streaming detokenizer gives it, and byte by byte,
     * through the SSE writer */
    size_t nids;
    int32_t *ids = folio_tokenizer_encode(tok, tc->text, n, false, &nids);
    CHECK(ids != NULL);
    const char **piece = calloc(nids + n + 1, sizeof *piece);
    size_t *piece_len = calloc(nids + n + 1, sizeof *piece_len);
    char **owned = calloc(nids + 1, sizeof *owned);
    struct folio_detok *d = folio_detok_new(tok, false);
    struct folio_jw joined;
    folio_jw_init(&joined);
    size_t np = 0;
    for (size_t i = 0; i <= nids; i++) {
        char *t = NULL;
        size_t len = 0;
        CHECK((i < nids ? folio_detok_push(d, ids[i], &t, &len)
                        : folio_detok_finish(d, &t, &len)) == 0);
        owned[i] = t;
        piece[np] = t ? t : "";
        piece_len[np++] = len;
        folio_jw_raw(&joined, t, len);
    }
    CHECK(is(&joined, tc->text)); /* the tokens give back the text */
    json_t *want_msg = response_message(tc);
    json_t *by_token = streamed_message(tc, piece, piece_len, np);
    for (size_t i = 0; i < n; i++) {
        piece[i] = tc->text + i;
        piece_len[i] = 1;
    }
    json_t *by_byte = streamed_message(tc, piece, piece_len, n);
    bool tok_eq = json_equal(want_msg, by_token), byte_eq = json_equal(want_msg, by_byte);
    if (!tok_eq || !byte_eq) {
        char *a = json_dumps(want_msg, 0), *b = json_dumps(tok_eq ? by_byte : by_token, 0);
        fprintf(stderr, "%s: SSE stream %s\n  response: %s\n", tc->label, b, a);
        free(a);
        free(b);
    }
    CHECK(tok_eq && byte_eq);
    json_decref(want_msg);
    json_decref(by_token);
    json_decref(by_byte);
    for (size_t i = 0; i <= nids; i++)
        free(owned[i]);
    free(owned);
    free(piece);
    free(piece_len);
    free(ids);
    folio_detok_free(d);
    folio_jw_free(&joined);
    flat_free(&want);
}

/* A tool call's JSON scanner on its own: what is valid JSON and what is not. */
static void check_scanner(void)
{
    static const char *const good[] = {"{}", "[]", "{\"a\": [1, -0.5e-3, \"\\u00e9\", {}]}",
                                       "[{\"x\": null}, {\"y\": true}]", "{\"k\" :false } "};
    static const char *const bad[] = {
        "{,}",        "[{},]",           "{\"a\" 1}",        "{'a': 1}",    "{\"a\": 01}",
        "{\"a\": -}", "{\"a\": tru }",   "{\"a\": \"\\x\"}", "{\"a\": 1.}", "\"s\"",
        "[1]",        "{\"a\": \"\n\"}", "{\"a\": 1e}"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        struct folio_tj s;
        struct folio_tj_event ev;
        folio_tj_init(&s, good[i][0] == '[' ? 2 : 1); /* a list's items must be objects */
        enum folio_tj_status st = FOLIO_TJ_MORE;
        size_t k = 0, n = strlen(good[i]);
        while (k < n && st == FOLIO_TJ_MORE)
            st = folio_tj_byte(&s, (unsigned char)good[i][k++], &ev);
        CHECK(st == FOLIO_TJ_DONE);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct folio_tj s;
        struct folio_tj_event ev;
        folio_tj_init(&s, bad[i][0] == '[' ? 2 : 1);
        enum folio_tj_status st = FOLIO_TJ_MORE;
        for (size_t k = 0; bad[i][k] && st == FOLIO_TJ_MORE; k++)
            st = folio_tj_byte(&s, (unsigned char)bad[i][k], &ev);
        if (st != FOLIO_TJ_ERROR)
            fprintf(stderr, "scanner took %s\n", bad[i]);
        CHECK(st == FOLIO_TJ_ERROR);
    }
    /* nesting past the limit is refused, not overflowed */
    struct folio_tj s;
    struct folio_tj_event ev;
    folio_tj_init(&s, 1);
    enum folio_tj_status st = folio_tj_byte(&s, '{', &ev);
    const char *key = "\"a\":";
    for (int d = 0; d < FOLIO_TJ_MAX_DEPTH + 2 && st == FOLIO_TJ_MORE; d++) {
        for (const char *p = key; *p && st == FOLIO_TJ_MORE; p++)
            st = folio_tj_byte(&s, (unsigned char)*p, &ev);
        if (st == FOLIO_TJ_MORE)
            st = folio_tj_byte(&s, '{', &ev);
    }
    CHECK(st == FOLIO_TJ_ERROR);
}

int main(void)
{
    char err[256];
    if (folio_tokenizer_load("assets/models/llama2-tokenizer", &tok, err, sizeof err) != 0) {
        fprintf(stderr, "tokenizer: %s\n", err);
        return 1;
    }
    check_scanner();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_case(&cases[i]);
    CHECK(folio_tool_parser_find("hermes") == &folio_tool_parser_hermes);
    CHECK(folio_tool_parser_find("llama3_json") == &folio_tool_parser_llama3_json);
    CHECK(folio_tool_parser_find("mistral") == &folio_tool_parser_mistral);
    CHECK(folio_tool_parser_find("pythonic") == NULL);
    folio_tokenizer_free(tok);
    return check_report();
}
