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
#include "tokenizer.h"
#include "clock.h"

/* Prefill chunk: bounds the step's scratch memory on long prompts. */
#define GENERATE_PREFILL_CHUNK 512

struct generate_args {
    const char *model_dir;
    const char *prompt;
    long max_tokens;
    double temperature, top_p, min_p;
    long top_k;
    unsigned long long seed;
    bool have_seed;
    bool ignore_eos;
    long threads;
    const char *backend;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: folio generate --model DIR --prompt TEXT --max-tokens N [options]\n"
            "\n"
            "Completes TEXT with the model in DIR (Hugging Face layout) and prints the completion\n"
            "to stdout as it is generated; prompt/generated token counts, prefill time and decode\n"
            "tokens/s go to stderr.\n"
            "\n"
            "  --model DIR          model directory (config.json, *.safetensors, tokenizer.json),\n"
            "                       or a .gguf file (or a folder holding one)\n"
            "  --prompt TEXT        the prompt (BOS added as the tokenizer config says)\n"
            "  --max-tokens N       tokens to generate at most (>= 1)\n"
            "  --temperature T      0 (the default) is greedy\n"
            "  --top-k K            keep the K most likely tokens (0: off)\n"
            "  --top-p P            nucleus sampling, in (0, 1] (1: off)\n"
            "  --min-p M            drop tokens below M times the most likely one (0: off)\n"
            "  --seed S             sampling seed (default: drawn from the clock)\n"
            "  --ignore-eos         go on past the end-of-sequence token\n"
            "  --threads N          CPU threads (0: all cores; the default)\n"
            "  --backend cpu|cuda   the worker backend (default cpu)\n");
}

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "folio generate: %s needs an integer in [%ld, %ld], got '%s'\n", flag, lo,
                hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_double(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "folio generate: %s needs a number in [%g, %g], got '%s'\n", flag, lo, hi,
                s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Returns 0 to go on, 1 after --help, -1 on a bad argument. */
static int parse_args(int argc, char **argv, struct generate_args *a)
{
    *a = (struct generate_args){.max_tokens = -1, .top_p = 1.0, .backend = "cpu"};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(f, "--ignore-eos")) {
            a->ignore_eos = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "folio generate: %s needs a value (see --help)\n", f);
            return -1;
        }
        const char *v = argv[++i];
        long seed_hi;
        int rc = 0;
        if (!strcmp(f, "--model")) {
            a->model_dir = v;
        } else if (!strcmp(f, "--prompt")) {
            a->prompt = v;
        } else if (!strcmp(f, "--max-tokens")) {
            rc = parse_long(f, v, 1, INT32_MAX / 2, &a->max_tokens);
        } else if (!strcmp(f, "--temperature")) {
            rc = parse_double(f, v, 0, 1e6, &a->temperature);
        } else if (!strcmp(f, "--top-p")) {
            rc = parse_double(f, v, 1e-9, 1, &a->top_p);
        } else if (!strcmp(f, "--min-p")) {
            rc = parse_double(f, v, 0, 1, &a->min_p);
        } else if (!strcmp(f, "--top-k")) {
            rc = parse_long(f, v, -1, INT32_MAX, &a->top_k);
        } else if (!strcmp(f, "--seed")) {
            rc = parse_long(f, v, 0, LONG_MAX, &seed_hi);
            a->seed = (unsigned long long)seed_hi;
            a->have_seed = true;
        } else if (!strcmp(f, "--threads")) {
            rc = parse_long(f, v, 0, 4096, &a->threads);
        } else if (!strcmp(f, "--backend")) {
            a->backend = v;
        } else {
            fprintf(stderr, "folio generate: unknown option '%s' (see --help)\n", f);
            return -1;
        }
        if (rc != 0)
            return -1;
    }
    if (!a->model_dir || !a->prompt || a->max_tokens < 0) {
        fprintf(stderr, "folio generate: --model, --prompt and --max-tokens are required (see "
                        "--help)\n");
        return -1;
    }
    if (strcmp(a->backend, "cpu") && strcmp(a->backend, "cuda")) {
        fprintf(stderr, "folio generate: --backend must be cpu or cuda, got '%s'\n", a->backend);
        return -1;
    }
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

    uint64_t seed = a.have_seed ? a.seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
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
