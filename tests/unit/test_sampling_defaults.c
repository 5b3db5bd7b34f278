/* A model's recommended sampling settings (vLLM's --generation-config auto):
 * read from generation_config.json and from a GGUF's general.sampling.* keys,
 * checked as a request's would be (a bad value is an error naming the file
 * and the field), and applied by the request parser to the fields a request
 * leaves out: request > model > OpenAI. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model_config.h"
#include "openai_api.h"
#include "tmp_files.h"

static char err[1024];

#define CONFIG                                                                                     \
    "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,"                      \
    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":1000}"

static int load_hf(const char *dir, const char *generation_config, struct folio_model_config *c)
{
    write_text(dir, "config.json", CONFIG);
    write_text(dir, "generation_config.json", generation_config);
    err[0] = '\0';
    return folio_model_config_load(dir, c, err, sizeof err);
}

static void test_generation_config(void)
{
    char *dir = make_dir_named("gen-defaults");
    struct folio_model_config c;
    /* Llama-3.1-Instruct's temperature and top_p, and the other three vLLM reads. */
    CHECK(load_hf(dir,
                  "{\"do_sample\":true,\"temperature\":0.6,\"top_p\":0.9,\"top_k\":20,"
                  "\"min_p\":0.05,\"repetition_penalty\":1.1,\"eos_token_id\":2}",
                  &c) == 0);
    const struct folio_sampling_defaults *d = &c.sampling_defaults;
    CHECK(d->has_temperature && d->temperature == 0.6f && d->has_top_p && d->top_p == 0.9f);
    CHECK(d->has_top_k && d->top_k == 20 && d->has_min_p && d->min_p == 0.05f);
    CHECK(d->has_repetition_penalty && d->repetition_penalty == 1.1f);
    char desc[256];
    folio_sampling_defaults_describe(d, desc, sizeof desc);
    CHECK(strcmp(desc, "temperature 0.6, top_p 0.9, top_k 20, min_p 0.05, "
                       "repetition_penalty 1.1") == 0);
    /* transformers' own defaults are no recommendation (vLLM diffs against them). */
    CHECK(load_hf(dir, "{\"temperature\":1.0,\"top_k\":50,\"top_p\":1.0,\"bos_token_id\":1}", &c) ==
          0);
    CHECK(!d->has_temperature && !d->has_top_k && !d->has_top_p && !d->has_min_p);
    folio_sampling_defaults_describe(d, desc, sizeof desc);
    CHECK(desc[0] == 0);
    /* Greedy is a setting too; null is absent. */
    CHECK(load_hf(dir, "{\"temperature\":0,\"top_p\":null}", &c) == 0);
    CHECK(d->has_temperature && d->temperature == 0 && !d->has_top_p);
    /* Values a request could not send are errors naming the file and field. */
    const char *bad[][2] = {{"{\"temperature\":-0.5}", "temperature"},
                            {"{\"top_p\":0}", "top_p"},
                            {"{\"top_p\":1.5}", "top_p"},
                            {"{\"min_p\":2}", "min_p"},
                            {"{\"repetition_penalty\":0}", "repetition_penalty"},
                            {"{\"top_k\":2.5}", "\"top_k\""},
                            {"{\"temperature\":\"hot\"}", "\"temperature\""}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bool ok = load_hf(dir, bad[i][0], &c) == -1 && strstr(err, "generation_config.json") &&
                  strstr(err, bad[i][1]);
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "  %s: %s\n", bad[i][0], err);
    }
    remove_dir(dir);
}

/* ---- a GGUF with the hyperparameters the config needs and no tensors ---- */

struct buf {
    unsigned char p[4096];
    size_t n;
};

static void put(struct buf *b, const void *src, size_t n)
{
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u32(struct buf *b, uint32_t v)
{
    put(b, &v, 4); /* GGUF is little-endian, as every machine Folio runs on */
}

static void put_str(struct buf *b, const char *s)
{
    uint64_t n = strlen(s);
    put(b, &n, 8);
    put(b, s, n);
}

static void kv_u32(struct buf *b, const char *key, uint32_t v)
{
    put_str(b, key);
    put_u32(b, 4);
    put_u32(b, v);
}

static void kv_i32(struct buf *b, const char *key, int32_t v)
{
    put_str(b, key);
    put_u32(b, 5);
    put(b, &v, 4);
}

static void kv_f32(struct buf *b, const char *key, float v)
{
    put_str(b, key);
    put_u32(b, 6);
    put(b, &v, 4);
}

static void kv_str(struct buf *b, const char *key, const char *v)
{
    put_str(b, key);
    put_u32(b, 8);
    put_str(b, v);
}

/* A GGUF of the required llama keys and num_extra more, which add writes. */
static int load_gguf(const char *dir, int num_extra, void (*add)(struct buf *),
                     struct folio_model_config *c)
{
    struct buf b = {.n = 0};
    uint64_t tensors = 0, kvs = 7 + (uint64_t)num_extra;
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put(&b, &tensors, 8);
    put(&b, &kvs, 8);
    kv_str(&b, "general.architecture", "llama");
    kv_u32(&b, "llama.embedding_length", 64);
    kv_u32(&b, "llama.feed_forward_length", 128);
    kv_u32(&b, "llama.block_count", 2);
    kv_u32(&b, "llama.attention.head_count", 4);
    kv_u32(&b, "llama.vocab_size", 1000);
    kv_u32(&b, "llama.context_length", 256);
    add(&b);
    while (b.n % 32)
        b.p[b.n++] = 0;
    char path[512];
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b.p, 1, b.n, f) == b.n);
    if (f)
        fclose(f);
    err[0] = '\0';
    return folio_model_config_load(path, c, err, sizeof err);
}

static void add_all(struct buf *b)
{
    kv_f32(b, "general.sampling.temp", 0.7f);
    kv_f32(b, "general.sampling.top_p", 0.8f);
    kv_i32(b, "general.sampling.top_k", 40);
    kv_f32(b, "general.sampling.min_p", 0.1f);
    kv_f32(b, "general.sampling.penalty_repeat", 1.05f);
}

static void add_none(struct buf *b)
{
    (void)b;
}

static void add_bad_top_p(struct buf *b)
{
    kv_f32(b, "general.sampling.top_p", 0.0f);
}

static void add_string_temp(struct buf *b)
{
    kv_str(b, "general.sampling.temp", "0.7");
}

static void test_gguf(void)
{
    char *dir = make_dir_named("gen-defaults");
    struct folio_model_config c;
    const struct folio_sampling_defaults *d = &c.sampling_defaults;
    int rc = load_gguf(dir, 5, add_all, &c);
    CHECK(rc == 0);
    if (rc != 0)
        fprintf(stderr, "  %s\n", err);
    CHECK(d->has_temperature && d->temperature == 0.7f && d->has_top_p && d->top_p == 0.8f);
    CHECK(d->has_top_k && d->top_k == 40 && d->has_min_p && d->min_p == 0.1f);
    CHECK(d->has_repetition_penalty && d->repetition_penalty == 1.05f);
    CHECK(load_gguf(dir, 0, add_none, &c) == 0);
    CHECK(!d->has_temperature && !d->has_top_p && !d->has_top_k && !d->has_min_p &&
          !d->has_repetition_penalty);
    CHECK(load_gguf(dir, 1, add_bad_top_p, &c) == -1 && strstr(err, "model.gguf") &&
          strstr(err, "general.sampling") && strstr(err, "top_p"));
    CHECK(load_gguf(dir, 1, add_string_temp, &c) == -1 &&
          strstr(err, "'general.sampling.temp' must be a number"));
    remove_dir(dir);
}

/* ---- the parser: request > model > OpenAI ---- */

static void parse(const char *body, const struct folio_sampling_defaults *d,
                  struct folio_oai_request *r)
{
    struct folio_oai_error e;
    int rc = folio_oai_parse_request(FOLIO_OAI_CHAT, body, strlen(body), d, r, &e);
    CHECK(rc == 0);
    if (rc != 0)
        fprintf(stderr, "  %s: %s\n", body, e.message);
}

static void test_precedence(void)
{
    const char *msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]";
    char body[256];
    struct folio_oai_request r;
    struct folio_sampling_defaults d = {.has_temperature = true,
                                        .temperature = 0.6f,
                                        .has_top_k = true,
                                        .top_k = 20,
                                        .has_repetition_penalty = true,
                                        .repetition_penalty = 1.1f};
    /* Left out: the model's where it has one, OpenAI's elsewhere. */
    snprintf(body, sizeof body, "{%s}", msgs);
    parse(body, &d, &r);
    CHECK(r.temperature == 0.6f && r.top_k == 20 && r.repetition_penalty == 1.1f);
    CHECK(r.top_p == 1.0f && r.min_p == 0.0f);
    folio_oai_request_free(&r);
    /* The request's own values win; null means left out. */
    snprintf(body, sizeof body, "{%s,\"temperature\":0,\"top_k\":-1,\"top_p\":0.5}", msgs);
    parse(body, &d, &r);
    CHECK(r.temperature == 0.0f && r.top_k == -1 && r.top_p == 0.5f &&
          r.repetition_penalty == 1.1f);
    folio_oai_request_free(&r);
    snprintf(body, sizeof body, "{%s,\"temperature\":null}", msgs);
    parse(body, &d, &r);
    CHECK(r.temperature == 0.6f);
    folio_oai_request_free(&r);
    /* No model defaults: OpenAI's. */
    snprintf(body, sizeof body, "{%s}", msgs);
    parse(body, NULL, &r);
    CHECK(r.temperature == 1.0f && r.top_p == 1.0f && r.top_k == -1 && r.min_p == 0.0f &&
          r.repetition_penalty == 1.0f);
    folio_oai_request_free(&r);
}

int main(void)
{
    test_generation_config();
    test_gguf();
    test_precedence();
    return check_report();
}
