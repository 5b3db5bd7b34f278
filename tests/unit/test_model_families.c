/* The Llama family beyond Llama-2 as config.json and the checkpoint describe
 * it: Qwen2's q/k/v biases (bound by name, shapes checked), Llama-3's list of
 * end-of-sequence ids joined by generation_config.json's, and sliding windows
 * refused only where they are shorter than the context served. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model.h"
#include "model_config.h"
#include "tmp_files.h"

static char err[1024];

static int load(const char *dir, const char *config, struct folio_model_config *c)
{
    write_text(dir, "config.json", config);
    err[0] = '\0';
    return folio_model_config_load(dir, c, err, sizeof err);
}

#define SIZES                                                                                      \
    "\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,"                        \
    "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":1000"

static void test_qwen2_config(void)
{
    char *dir = make_dir_named("family");
    struct folio_model_config c;
    /* Qwen2.5's own fields: a window named but switched off. */
    CHECK(load(dir,
               "{\"model_type\":\"qwen2\"," SIZES ",\"use_sliding_window\":false,"
               "\"sliding_window\":32768,\"max_window_layers\":21,\"rope_theta\":1000000.0}",
               &c) == 0);
    CHECK(strcmp(c.model_type, "qwen2") == 0 && c.qkv_bias && c.sliding_window == 0);
    CHECK(folio_model_config_check_context(&c, 1 << 20, err, sizeof err) == 0);
    /* Switched on, the window counts. */
    CHECK(load(dir,
               "{\"model_type\":\"qwen2\"," SIZES ",\"use_sliding_window\":true,"
               "\"sliding_window\":4096}",
               &c) == 0);
    CHECK(c.sliding_window == 4096);
    CHECK(load(dir, "{\"model_type\":\"llama\"," SIZES "}", &c) == 0 && !c.qkv_bias);
    /* Llama's attention_bias also puts one on o_proj, which no backend adds. */
    CHECK(load(dir, "{\"model_type\":\"llama\"," SIZES ",\"attention_bias\":true}", &c) == -1);
    CHECK(strstr(err, "\"attention_bias\"") != NULL);
    remove_dir(dir);
}

static void test_sliding_window(void)
{
    char *dir = make_dir_named("family");
    struct folio_model_config c;
    /* Mistral-7B-v0.1: a 4096 window in a 32768 context. */
    CHECK(load(dir,
               "{\"model_type\":\"mistral\"," SIZES ",\"max_position_embeddings\":32768,"
               "\"sliding_window\":4096}",
               &c) == 0);
    CHECK(c.sliding_window == 4096);
    CHECK(folio_model_config_check_context(&c, 4096, err, sizeof err) == 0);
    CHECK(folio_model_config_check_context(&c, 32768, err, sizeof err) == -1);
    CHECK(strstr(err, "\"sliding_window\" is 4096") && strstr(err, "32768") &&
          strstr(err, "at most 4096"));
    CHECK(load(dir, "{\"model_type\":\"mistral\"," SIZES ",\"sliding_window\":null}", &c) == 0);
    CHECK(c.sliding_window == 0);
    CHECK(load(dir, "{\"model_type\":\"mistral\"," SIZES ",\"sliding_window\":-5}", &c) == -1);
    CHECK(strstr(err, "\"sliding_window\"") != NULL);
    remove_dir(dir);
}

static void test_generation_config_eos(void)
{
    char *dir = make_dir_named("family");
    struct folio_model_config c;
    /* Llama-3-Instruct: config.json names <|end_of_text|>, generation_config.json adds
     * <|eot_id|>, which ends every assistant turn. */
    write_text(dir, "generation_config.json",
               "{\"bos_token_id\":1,\"eos_token_id\":[900,909],\"do_sample\":true}");
    CHECK(load(dir, "{\"model_type\":\"llama\"," SIZES ",\"eos_token_id\":900}", &c) == 0);
    CHECK(c.num_eos_token_ids == 2 && c.eos_token_ids[0] == 900 && c.eos_token_ids[1] == 909);
    write_text(dir, "generation_config.json", "{\"eos_token_id\":999}");
    CHECK(load(dir, "{\"model_type\":\"llama\"," SIZES ",\"eos_token_id\":[900,908,909]}", &c) ==
          0);
    CHECK(c.num_eos_token_ids == 4 && c.eos_token_ids[3] == 999);
    write_text(dir, "generation_config.json", "{\"eos_token_id\":5000}");
    CHECK(load(dir, "{\"model_type\":\"llama\"," SIZES "}", &c) == -1);
    CHECK(strstr(err, "generation_config.json") && strstr(err, "\"eos_token_id\""));
    write_text(dir, "generation_config.json", "{\"eos_token_id\": [1,");
    CHECK(load(dir, "{\"model_type\":\"llama\"," SIZES "}", &c) == -1);
    CHECK(strstr(err, "generation_config.json") != NULL);
    remove_dir(dir);
}

/* The fixture's Qwen2-shaped checkpoint opens with its biases bound; without
 * them it is an error naming the tensor. */
static void test_qwen2_checkpoint(void)
{
    char *dir = make_dir_named("family");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 tests/fixtures/make_tiny_model.py %s --qwen2 --layers 2 --hidden 32 "
             "--heads 4 --kv-heads 2 --intermediate 48 --vocab 512 --seed 3 >/dev/null",
             dir);
    CHECK(system(cmd) == 0);
    struct folio_model *m = NULL;
    int rc = folio_model_open(dir, &m, err, sizeof err);
    CHECK(rc == 0);
    if (rc != 0)
        fprintf(stderr, "  %s\n", err);
    for (int l = 0; m && l < m->config.num_layers; l++) {
        const struct folio_layer_weights *w = &m->layers[l];
        CHECK(w->bq && w->bk && w->bv);
        CHECK(w->bq && w->bq->ndim == 1 && w->bq->shape[0] == 32);
        CHECK(w->bk && w->bk->ndim == 1 && w->bk->shape[0] == 16);
    }
    folio_model_close(m);
    /* The same weights read as Llama have no biases to bind. */
    snprintf(cmd, sizeof cmd,
             "sed -i 's/\"model_type\": \"qwen2\"/\"model_type\": \"llama\"/' %s/config.json", dir);
    CHECK(system(cmd) == 0);
    CHECK(folio_model_open(dir, &m, err, sizeof err) == 0);
    CHECK(m && m->layers[0].bq == NULL);
    folio_model_close(m);
    /* A Qwen2 config over a checkpoint without biases. */
    snprintf(cmd, sizeof cmd,
             "python3 tests/fixtures/make_tiny_model.py %s --layers 2 --hidden 32 --heads 4 "
             "--kv-heads 2 --intermediate 48 --vocab 512 --seed 3 >/dev/null && sed -i "
             "'s/\"model_type\": \"llama\"/\"model_type\": \"qwen2\"/' %s/config.json",
             dir, dir);
    CHECK(system(cmd) == 0);
    CHECK(folio_model_open(dir, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "model.layers.0.self_attn.q_proj.bias") && strstr(err, "not found"));
    remove_dir(dir);
}

int main(void)
{
    test_qwen2_config();
    test_sliding_window();
    test_generation_config_eos();
    test_qwen2_checkpoint();
    return check_report();
}
