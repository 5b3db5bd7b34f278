/* The chat-template interpreter through its C API: TinyLlama's template from
 * the shared tokenizer_config.json, syntax errors with positions, the
 * raise_exception message, limits against hostile templates, and reuse of a
 * compiled template after failed renders. (tests/test_chat_template.py
 * compares renderings with Python jinja2.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "chat_template.h"
#include "check.h"

static char err[512];

static struct folio_chat_template *compile(const char *src)
{
    struct folio_chat_template *t = NULL;
    if (folio_chat_template_compile(src, &t, err, sizeof(err)) != 0) {
        fprintf(stderr, "compile failed: %s\n", err);
        return NULL;
    }
    return t;
}

/* Renders src over vars (JSON text); returns the output or NULL (err set). */
static char *render_json(const char *src, const char *vars_json,
                         const struct folio_chat_template_limits *limits)
{
    struct folio_chat_template *t = NULL;
    if (folio_chat_template_compile(src, &t, err, sizeof(err)) != 0)
        return NULL;
    json_t *vars = json_loads(vars_json, 0, NULL);
    char *out = NULL;
    size_t len = 0;
    int rc = folio_chat_template_render_json(t, vars, limits, &out, &len, err, sizeof(err));
    json_decref(vars);
    folio_chat_template_free(t);
    if (rc != 0)
        return NULL;
    CHECK(strlen(out) == len);
    return out;
}

static void test_tinyllama(void)
{
    const char *path = "assets/models/llama2-tokenizer/tokenizer_config.json";
    json_t *cfg = json_load_file(path, 0, NULL);
    CHECK(cfg != NULL);
    if (!cfg)
        return;
    struct folio_chat_template *t =
        compile(json_string_value(json_object_get(cfg, "chat_template")));
    CHECK(t != NULL);
    if (t) {
        struct folio_chat_message msgs[] = {
            {"system", "You are helpful."},
            {"user", "Hi {{ there }}"},
            {"assistant", "Hello!"},
            {"user", "héllo 🎉"},
        };
        char *out;
        size_t len;
        CHECK(folio_chat_template_render(t, msgs, 4, true, "<s>", "</s>", &out, &len, err,
                                         sizeof(err)) == 0);
        const char *want = "<|system|>\nYou are helpful.</s>\n<|user|>\nHi {{ there }}</s>\n"
                           "<|assistant|>\nHello!</s>\n<|user|>\nhéllo 🎉</s>\n<|assistant|>\n";
        CHECK(strcmp(out, want) == 0);
        CHECK(len == strlen(want));
        free(out);
        /* Without the generation prompt the last turn ends the text. */
        CHECK(folio_chat_template_render(t, msgs, 2, false, "<s>", "</s>", &out, &len, err,
                                         sizeof(err)) == 0);
        CHECK(strcmp(out, "<|system|>\nYou are helpful.</s>\n<|user|>\nHi {{ there }}</s>\n") == 0);
        free(out);
        /* No messages at all renders nothing. */
        CHECK(folio_chat_template_render(t, NULL, 0, true, "<s>", "</s>", &out, &len, err,
                                         sizeof(err)) == 0);
        CHECK(len == 0);
        free(out);
    }
    folio_chat_template_free(t);
    json_decref(cfg);
}

static void test_null_content_is_none(void)
{
    struct folio_chat_template *t =
        compile("{% for m in messages %}{{ m.role }}:{{ m.content is none }};{% endfor %}"
                "{{ bos_token is defined }}");
    CHECK(t != NULL);
    if (!t)
        return;
    struct folio_chat_message msgs[] = {{"user", NULL}, {"assistant", "x"}};
    char *out;
    size_t len;
    CHECK(folio_chat_template_render(t, msgs, 2, false, NULL, NULL, &out, &len, err, sizeof(err)) ==
          0);
    CHECK(strcmp(out, "user:True;assistant:False;False") == 0);
    free(out);
    /* A message without a role is refused before rendering. */
    struct folio_chat_message bad[] = {{NULL, "x"}};
    CHECK(folio_chat_template_render(t, bad, 1, false, NULL, NULL, &out, &len, err, sizeof(err)) ==
          -1);
    CHECK(strstr(err, "message 0") != NULL);
    folio_chat_template_free(t);
}

static void test_syntax_errors(void)
{
    struct folio_chat_template *t = NULL;
    CHECK(folio_chat_template_compile("line one\n{% if x %}\n  {{ x + }}\n{% endif %}", &t, err,
                                      sizeof(err)) == -1);
    CHECK(t == NULL);
    CHECK(strstr(err, "line 3, column") != NULL);

    CHECK(folio_chat_template_compile("{% for m in messages %}\n{{ m }}", &t, err, sizeof(err)) ==
          -1);
    CHECK(strstr(err, "endfor") != NULL);

    CHECK(folio_chat_template_compile("{{ x | shout }}", &t, err, sizeof(err)) == -1);
    CHECK(strstr(err, "no filter named 'shout'") != NULL);

    CHECK(folio_chat_template_compile("{% include 'x' %}", &t, err, sizeof(err)) == -1);
    CHECK(strstr(err, "include") != NULL);

    CHECK(folio_chat_template_compile("{{ 'open", &t, err, sizeof(err)) == -1);
    CHECK(strstr(err, "unterminated string") != NULL);

    CHECK(folio_chat_template_compile(NULL, &t, err, sizeof(err)) == -1);

    /* Parentheses nested past the parser's limit are an error, not a stack overflow. */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 16);
    strcpy(deep, "{{ ");
    memset(deep + 3, '(', depth);
    deep[3 + depth] = '1';
    memset(deep + 4 + depth, ')', depth);
    strcpy(deep + 4 + 2 * depth, " }}");
    CHECK(folio_chat_template_compile(deep, &t, err, sizeof(err)) == -1);
    CHECK(strstr(err, "nested too deeply") != NULL);
    free(deep);
}

static void test_raise_exception(void)
{
    const char *src = "{% for m in messages %}{% if m.role == 'system' %}"
                      "{{ raise_exception('System role not supported') }}{% endif %}"
                      "{{ m.content }}{% endfor %}";
    char *out =
        render_json(src, "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}]}", NULL);
    CHECK(out == NULL);
    CHECK(strcmp(err, "System role not supported") == 0);
    out = render_json(src, "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}]}", NULL);
    CHECK(out && strcmp(out, "u") == 0);
    free(out);
}

static void test_runtime_errors(void)
{
    CHECK(render_json("{{ 'a' + 1 }}", "{}", NULL) == NULL);
    CHECK(strstr(err, "concatenate") != NULL);
    CHECK(render_json("\n\n{{ x.y }}", "{}", NULL) == NULL);
    CHECK(strstr(err, "line 3") != NULL && strstr(err, "'x' is undefined") != NULL);
    CHECK(render_json("{{ 9223372036854775807 + 1 }}", "{}", NULL) == NULL);
    CHECK(strstr(err, "overflow") != NULL);
    CHECK(render_json("{{ x }}", "[1, 2]", NULL) == NULL);
    CHECK(strstr(err, "JSON object") != NULL);
}

static void test_limits(void)
{
    struct folio_chat_template_limits small = {.max_output_bytes = 1000,
                                               .max_memory_bytes = 8 << 20,
                                               .max_steps = 100000,
                                               .max_call_depth = 10};
    /* Work: nested loops stop at the step limit. */
    CHECK(render_json("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                      "{% endfor %}",
                      "{}", &small) == NULL);
    CHECK(strstr(err, "steps") != NULL);
    /* Output: past the byte limit. */
    CHECK(render_json("{% for i in range(2000) %}x{% endfor %}", "{}", &small) == NULL);
    CHECK(strstr(err, "output longer than 1000 bytes") != NULL);
    /* Memory: a string doubled until it no longer fits. */
    CHECK(render_json("{% set ns = namespace(s='x') %}{% for i in range(40) %}"
                      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                      "{}", &small) == NULL);
    CHECK(strstr(err, "memory") != NULL);
    /* Recursion: a macro calling itself forever. */
    CHECK(render_json("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{}", &small) ==
          NULL);
    CHECK(strstr(err, "nested deeper than 10") != NULL);
    /* Repetition sized past the limits fails before allocating. */
    CHECK(render_json("{{ 'x' * 1000000000000 }}", "{}", &small) == NULL);
    /* Within the limits the same kinds of template render. */
    char *out = render_json("{% macro f(n) %}{% if n < 5 %}{{ n }}{{ f(n + 1) }}{% endif %}"
                            "{% endmacro %}{{ f(0) }}",
                            "{}", &small);
    CHECK(out && strcmp(out, "01234") == 0);
    free(out);
}

static void test_reuse_after_errors(void)
{
    struct folio_chat_template *t =
        compile("{% if messages | length > 2 %}{{ raise_exception('too long') }}{% endif %}"
                "{% for m in messages %}[{{ m.content }}]{% endfor %}");
    CHECK(t != NULL);
    if (!t)
        return;
    struct folio_chat_message msgs[] = {{"user", "a"}, {"user", "b"}, {"user", "c"}};
    for (int round = 0; round < 50; round++) {
        char *out = NULL;
        size_t len;
        size_t n = (size_t)(round % 4);
        int rc =
            folio_chat_template_render(t, msgs, n, false, NULL, NULL, &out, &len, err, sizeof(err));
        if (n > 2) {
            CHECK(rc == -1 && strcmp(err, "too long") == 0 && out == NULL);
        } else {
            CHECK(rc == 0 && len == 3 * n);
            free(out);
        }
    }
    folio_chat_template_free(t);
}

int main(void)
{
    test_tinyllama();
    test_null_content_is_none();
    test_syntax_errors();
    test_raise_exception();
    test_runtime_errors();
    test_limits();
    test_reuse_after_errors();
    return check_report();
}
