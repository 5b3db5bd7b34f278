/* frontend/api_routes.c: /tokenize (prompt and messages, add_special_tokens),
 * /detokenize, /version and /v1/models/{id}, with their errors, on the
 * Llama-2 tokenizer and a small chat template. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_routes.h"
#include "check.h"

static bool only_tiny(void *arg, const char *model)
{
    (void)arg;
    return !strcmp(model, "tiny/model");
}

/* The JSON answer of a route, or NULL with e filled. */
static json_t *answer(const struct folio_api_text_ctx *c, enum folio_api_route r, const char *in,
                      struct folio_oai_error *e)
{
    struct folio_jw b;
    folio_jw_init(&b);
    json_t *j = NULL;
    if (folio_api_answer(c, r, in, in ? strlen(in) : 0, &b, e) == 0)
        j = json_loadb(b.data, b.len, 0, NULL);
    folio_jw_free(&b);
    return j;
}

static size_t count(json_t *j)
{
    return (size_t)json_integer_value(json_object_get(j, "count"));
}

static void expect_error(const struct folio_api_text_ctx *c, enum folio_api_route r, const char *in,
                         int status, const char *param)
{
    struct folio_oai_error e;
    json_t *j = answer(c, r, in, &e);
    CHECK(j == NULL && e.status == status && !strcmp(e.param, param));
    if (j || e.status != status || strcmp(e.param, param))
        fprintf(stderr, "%s: status %d param '%s': %s\n", in, e.status, e.param, e.message);
    json_decref(j);
}

static void test_tokenize(const struct folio_api_text_ctx *c)
{
    struct folio_oai_error e;
    json_t *a = answer(c, FOLIO_API_TOKENIZE, "{\"prompt\":\"Hello world\"}", &e);
    json_t *b = answer(c, FOLIO_API_TOKENIZE,
                       "{\"prompt\":\"Hello world\",\"add_special_tokens\":false,"
                       "\"model\":\"tiny/model\"}",
                       &e);
    CHECK(a && b && count(a) == count(b) + 1);
    CHECK(json_integer_value(json_array_get(json_object_get(a, "tokens"), 0)) == 1); /* BOS */
    CHECK(json_integer_value(json_object_get(a, "max_model_len")) == 2048);
    CHECK(json_is_null(json_object_get(a, "token_strs")));
    json_t *m = answer(c, FOLIO_API_TOKENIZE,
                       "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello world\"}],"
                       "\"add_generation_prompt\":false}",
                       &e);
    json_t *p = answer(c, FOLIO_API_TOKENIZE, "{\"prompt\":\"<user>Hello world\"}", &e);
    CHECK(m && p && json_equal(json_object_get(m, "tokens"), json_object_get(p, "tokens")));
    json_t *m2 = answer(c, FOLIO_API_TOKENIZE,
                        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello world\"}],"
                        "\"add_generation_prompt\":false,\"add_special_tokens\":false}",
                        &e);
    CHECK(m2 && count(m2) + 1 == count(m));
    json_decref(a), json_decref(b), json_decref(m), json_decref(p), json_decref(m2);

    expect_error(c, FOLIO_API_TOKENIZE, "{\"prompt\":\"x\",\"messages\":[]}", 400, "prompt");
    expect_error(c, FOLIO_API_TOKENIZE, "{}", 400, "");
    expect_error(c, FOLIO_API_TOKENIZE, "{\"prompt\":5}", 400, "prompt");
    expect_error(c, FOLIO_API_TOKENIZE, "{\"prompt\":\"x\",\"bogus\":1}", 400, "bogus");
    expect_error(c, FOLIO_API_TOKENIZE, "{\"prompt\":\"x\",\"return_token_strs\":true}", 400,
                 "return_token_strs");
    expect_error(c, FOLIO_API_TOKENIZE, "{\"prompt\":\"x\",\"model\":\"other\"}", 404, "model");
    expect_error(c, FOLIO_API_TOKENIZE,
                 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400,
                 "messages");
    expect_error(c, FOLIO_API_TOKENIZE, "[1]", 400, "");
}

static void test_detokenize_version_model(const struct folio_api_text_ctx *c)
{
    struct folio_oai_error e;
    json_t *t = answer(c, FOLIO_API_TOKENIZE,
                       "{\"prompt\":\"Grüße, world\",\"add_special_tokens\":false}", &e);
    char *ids = json_dumps(json_object_get(t, "tokens"), JSON_COMPACT);
    char body[512];
    snprintf(body, sizeof body, "{\"tokens\":%s}", ids);
    json_t *d = answer(c, FOLIO_API_DETOKENIZE, body, &e);
    CHECK(d && !strcmp(json_string_value(json_object_get(d, "prompt")), "Grüße, world"));
    free(ids), json_decref(t), json_decref(d);
    expect_error(c, FOLIO_API_DETOKENIZE, "{\"tokens\":[1,32000]}", 400, "tokens");
    expect_error(c, FOLIO_API_DETOKENIZE, "{\"tokens\":\"1\"}", 400, "tokens");

    json_t *v = answer(c, FOLIO_API_VERSION, NULL, &e);
    CHECK(v && !strcmp(json_string_value(json_object_get(v, "version")), FOLIO_VERSION));
    json_t *mdl = answer(c, FOLIO_API_MODEL, "tiny%2Fmodel", &e);
    CHECK(mdl && !strcmp(json_string_value(json_object_get(mdl, "id")), "tiny/model"));
    CHECK(json_integer_value(json_object_get(mdl, "created")) == 1234);
    json_decref(v), json_decref(mdl);
    expect_error(c, FOLIO_API_MODEL, "gpt-4", 404, "model");
}

int main(void)
{
    const char *dir = "assets/models/llama2-tokenizer"; /* ctest runs in the source folder */
    char err[512];
    struct folio_tokenizer *t;
    struct folio_chat_template *tmpl;
    if (folio_tokenizer_load(dir, &t, err, sizeof err) ||
        folio_chat_template_compile(
            "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}", &tmpl, err,
            sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct folio_api_text_ctx c = {
        .tokenizer = t,
        .chat_template = tmpl,
        .max_model_len = 2048,
        .model_ok = only_tiny,
        .model_name = "tiny/model",
        .created = 1234,
    };
    test_tokenize(&c);
    test_detokenize_version_model(&c);
    folio_chat_template_free(tmpl);
    folio_tokenizer_free(t);
    return check_report();
}
