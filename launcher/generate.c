/* `folio generate`: complete one prompt on one backend, streaming the text to
 * stdout and the timings to stderr. The smallest end-to-end path through the
 * model directory, the tokenizer and a worker backend, with no scheduler. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "commands.h"
#include "model.h"
#include "options.h"
#include "tokenizer.h"
#include "clock.h"

/* Prefill chunk: bounds the step's scratch memory on long prompts. */
#define GENERATE_PREFILL_CHUNK 512

struct generate_args {
    const char *model_dir;
    const char *prompt;
    int64_t max_tokens;
    double temperature, top_p, min_p;
    int64_t top_k;
    int64_t seed;
    bool have_seed;
    bool ignore_eos;
    int64_t threads;
    const char *backend;
};

#define G(f) FOLIO_OPT_FIELD(struct generate_args, f)
static const struct folio_opt generate_flags[] = {
    {"--model", FOLIO_OPT_STR, G(model_dir), NULL, 0, 0, NULL,
     "model directory (config.json, *.safetensors, tokenizer.json); required"},
    {"--prompt", FOLIO_OPT_STR, G(prompt), NULL, 0, 0, NULL,
     "the prompt (BOS added as the tokenizer config says); required"},
    {"--max-tokens", FOLIO_OPT_INT, G(max_tokens), NULL, 1, INT32_MAX / 2, NULL,
     "tokens to generate at most; required"},
    {"--temperature", FOLIO_OPT_NUM, G(temperature), "0", 0, 1e6, NULL, "0 is greedy"},
    {"--top-k", FOLIO_OPT_INT, G(top_k), "0", -1, INT32_MAX, NULL,
     "keep the K most likely tokens (0 or -1: off)"},
    {"--top-p", FOLIO_OPT_NUM, G(top_p), "1", 1e-9, 1, NULL, "nucleus sampling (1: off)"},
    {"--min-p", FOLIO_OPT_NUM, G(min_p), "0", 0, 1, NULL,
     "drop tokens below M times the most likely one (0: off)"},
    {"--seed", FOLIO_OPT_INT, G(seed), NULL, 0, 9e18, NULL,
     "sampling seed (default: drawn from the clock)"},
    {"--ignore-eos", FOLIO_OPT_BOOL, G(ignore_eos), "false", 0, 0, NULL,
     "go on past the end-of-sequence token"},
    {"--threads", FOLIO_OPT_INT, G(threads), "0", 0, 4096, NULL, "CPU threads (0: all cores)"},
    {"--backend", FOLIO_OPT_CHOICE, G(backend), "cpu", 0, 0, "cpu|cuda", "the worker backend"},
};

/* Returns 0 to go on, 1 after --help, -1 on a bad argument. */
static int parse_args(int argc, char **argv, struct generate_args *a)
{
    enum { NUM_FLAGS = sizeof generate_flags / sizeof *generate_flags };
    const char *given[NUM_FLAGS];
    memset(a, 0, sizeof *a);
    struct folio_opt_group g = {NULL, generate_flags, NUM_FLAGS, a, given};
    int rc = folio_opts_parse(
        "folio generate",
        "usage: folio generate --model DIR --prompt TEXT --max-tokens N [options]\n\n"
        "Completes TEXT with the model in DIR (Hugging Face layout) and prints the completion\n"
        "to stdout as it is generated; prompt/generated token counts, prefill time and decode\n"
        "tokens/s go to stderr.",
        &g, 1, argc, argv);
    if (rc != 0)
        return rc;
    if (!a->model_dir || !a->prompt || !a->max_tokens) {
        fprintf(stderr, "folio generate: --model, --prompt and --max-tokens are required (see "
                        "--help)\n");
        return -1;
    }
    for (size_t i = 0; i < NUM_FLAGS; i++)
        if (!strcmp(generate_flags[i].name, "--seed"))
            a->have_seed = given[i] != NULL;
    return 0;
}

static bool is_eos(const struct folio_model_config *c, int32_t eos_tok, int32_t id)
{
    if (id == eos_tok)
        return true;
    for (int i = 0; i < c->num_eos_token_ids; i++)
        if (c->eos_token_ids[i] == id)
            return true;
    return false;
}

static int create_backend(const struct generate_args *a, const struct folio_model *m,
                          const struct folio_backend_options *opt, struct folio_backend **out,
                          char *err, size_t errlen)
{
    if (!strcmp(a->backend, "cuda")) {
#ifdef FOLIO_HAVE_CUDA
        return folio_cuda_backend_create(m, opt, out, err, errlen);
#else
        snprintf(err, errlen,
                 "--backend cuda: this folio was not built with CUDA (nvcc was not found at build "
                 "time); use --backend cpu");
        return -1;
#endif
    }
    return folio_cpu_backend_create(m, opt, out, err, errlen);
}

/* Writes the text that became complete; stdout is flushed so that the
 * completion streams. */
static void emit(const char *s, size_t n)
{
    if (n) {
        fwrite(s, 1, n, stdout);
        fflush(stdout);
    }
}

int folio_generate_main(int argc, char **argv)
{
    struct generate_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc != 0)
        return prc > 0 ? 0 : 2;

    char err[512];
    int rc = 1;
    struct folio_model *model = NULL;
    struct folio_tokenizer *tok = NULL;
    struct folio_backend *be = NULL;
    struct folio_detok *detok = NULL;
    int32_t *prompt_ids = NULL, *blocks = NULL;
    size_t n_prompt = 0;

    if (folio_model_open(a.model_dir, &model, err, sizeof err) != 0) {
        fprintf(stderr, "folio generate: %s\n", err);
        goto done;
    }
    if (folio_tokenizer_load(a.model_dir, &tok, err, sizeof err) != 0) {
        fprintf(stderr, "folio generate: %s\n", err);
        goto done;
    }
    const struct folio_model_config *cfg = &model->config;
    prompt_ids = folio_tokenizer_encode(tok, a.prompt, strlen(a.prompt), true, &n_prompt);
    if (!prompt_ids) {
        fprintf(stderr, "folio generate: out of memory tokenizing the prompt\n");
        goto done;
    }
    if (n_prompt == 0) {
        fprintf(stderr, "folio generate: the prompt gives no tokens (and the tokenizer adds no "
                        "BOS); give a non-empty --prompt\n");
        goto done;
    }
    for (size_t i = 0; i < n_prompt; i++) {
        if (prompt_ids[i] < 0 || prompt_ids[i] >= cfg->vocab_size) {
            fprintf(stderr,
                    "folio generate: the tokenizer gave id %d, outside the model's vocab "
                    "of %d: tokenizer.json does not match config.json\n",
                    prompt_ids[i], cfg->vocab_size);
            goto done;
        }
    }
    long total = (long)n_prompt + a.max_tokens;
    if (total > cfg->max_position_embeddings) {
        fprintf(stderr,
                "folio generate: prompt (%zu tokens) + --max-tokens %ld exceeds the "
                "model's max_position_embeddings %d\n",
                n_prompt, a.max_tokens, cfg->max_position_embeddings);
        goto done;
    }

    int32_t num_blocks = (int32_t)((total + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE);
    int chunk = n_prompt < GENERATE_PREFILL_CHUNK ? (int)n_prompt : GENERATE_PREFILL_CHUNK;
    struct folio_backend_options opt = {
        .max_seqs = 1,
        .max_num_tokens = chunk,
        .num_kv_blocks = num_blocks,
        .num_threads = (int)a.threads,
    };
    if (create_backend(&a, model, &opt, &be, err, sizeof err) != 0) {
        fprintf(stderr, "folio generate: %s\n", err);
        goto done;
    }
    blocks = malloc((size_t)num_blocks * sizeof *blocks);
    detok = folio_detok_new(tok, true);
    if (!blocks || !detok) {
        fprintf(stderr, "folio generate: out of memory\n");
        goto done;
    }
    for (int32_t i = 0; i < num_blocks; i++)
        blocks[i] = i;

    uint64_t seed =
        a.have_seed ? (uint64_t)a.seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    struct folio_step_seq seq = {
        .slot = 0,
        .num_blocks = num_blocks,
        .block_table = blocks,
        .sampling = {.temperature = (float)a.temperature,
                     .top_k = (int32_t)a.top_k,
                     .top_p = (float)a.top_p,
                     .min_p = (float)a.min_p,
                     .repetition_penalty = 1.0f,
                     .seed = seed},
    };
    int32_t sampled = -1;
    float logprob;
    struct folio_step_result res = {.token_ids = &sampled, .logprobs = &logprob};
    struct folio_step_batch batch = {.num_seqs = 1, .seqs = &seq};

    /* Prefill, in chunks; the last one samples the first generated token. */
    double t0 = folio_mono_s();
    for (size_t done_tok = 0; done_tok < n_prompt;) {
        int n = (int)(n_prompt - done_tok < (size_t)chunk ? n_prompt - done_tok : (size_t)chunk);
        done_tok += (size_t)n;
        seq.num_new_tokens = n;
        seq.context_len = (int32_t)done_tok;
        seq.sample = done_tok == n_prompt;
        batch.num_tokens = n;
        batch.token_ids = prompt_ids + done_tok - n;
        if (folio_backend_step(be, &batch, &res, err, sizeof err) != 0) {
            fprintf(stderr, "folio generate: prefill: %s\n", err);
            goto done;
        }
    }
    double t_first = folio_mono_s();

    long generated = 0;
    int32_t eos_tok = folio_tokenizer_eos_id(tok);
    for (;;) {
        generated++;
        bool stop = !a.ignore_eos && is_eos(cfg, eos_tok, sampled);
        if (!stop) {
            char *text = NULL;
            size_t len = 0;
            if (folio_detok_push(detok, sampled, &text, &len) != 0) {
                fprintf(stderr, "folio generate: token %d is outside the tokenizer's vocab\n",
                        sampled);
                free(text);
                goto done;
            }
            emit(text, len);
            free(text);
        }
        if (stop || generated == a.max_tokens)
            break;
        seq.num_new_tokens = 1;
        seq.context_len = (int32_t)(n_prompt + (size_t)generated);
        seq.sample = true;
        seq.output_index = (int32_t)generated;
        batch.num_tokens = 1;
        batch.token_ids = &sampled; /* read by launch before it writes the new one */
        if (folio_backend_step(be, &batch, &res, err, sizeof err) != 0) {
            fprintf(stderr, "folio generate: decode step %ld: %s\n", generated, err);
            goto done;
        }
    }
    double t_end = folio_mono_s();
    char *tail = NULL;
    size_t tail_len = 0;
    if (folio_detok_finish(detok, &tail, &tail_len) == 0)
        emit(tail, tail_len);
    free(tail);
    emit("\n", 1);

    double prefill_s = t_first - t0, decode_s = t_end - t_first;
    fprintf(stderr,
            "prompt tokens: %zu, generated tokens: %ld\n"
            "prefill: %.1f ms (%.1f tokens/s)\n"
            "decode: %.1f tokens/s (%ld tokens in %.1f ms after the first)\n",
            n_prompt, generated, prefill_s * 1e3, (double)n_prompt / prefill_s,
            generated > 1 ? (double)(generated - 1) / decode_s : 0.0, generated - 1,
            decode_s * 1e3);
    rc = 0;
done:
    folio_detok_free(detok);
    free(blocks);
    free(prompt_ids);
    if (be)
        be->ops->destroy(be);
    folio_tokenizer_free(tok);
    folio_model_close(model);
    return rc;
}
