/* `folio generate`: complete one prompt (or answer one chat message) on one
 * backend, streaming the text to stdout and the timings to stderr. The
 * smallest end-to-end path through the model directory, the tokenizer and a
 * worker backend, with no scheduler. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "default_model.h"
#include "local_session.h"

struct generate_args {
    const char *model_dir;
    const char *prompt;
    long max_tokens;
    double temperature, top_p, min_p;
    long top_k;
    unsigned long long seed;
    bool have_seed;
    bool ignore_eos;
    bool demo;
    bool chat;
    const char *system;
    long threads;
    const char *backend;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: folio generate [--model DIR] --prompt TEXT --max-tokens N [options]\n"
            "\n"
            "Completes TEXT with the model in DIR and prints the completion to stdout as it is\n"
            "generated; prompt/generated token counts, prefill time and decode tokens/s go to\n"
            "stderr. Without --model: SmolLM2-135M-Instruct, fetched by deploy/setup.sh.\n"
            "\n"
            "  --model DIR          model directory (config.json, *.safetensors, tokenizer.json),\n"
            "                       or a .gguf file (or a folder holding one)\n"
            "  --demo               the random demo model made at build time (for tests)\n"
            "  --prompt TEXT        the prompt (BOS added as the tokenizer config says)\n"
            "  --chat               TEXT is a user message, sent through the chat template\n"
            "  --system TEXT        with --chat: a system message first\n"
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
        bool *flag = !strcmp(f, "--ignore-eos") ? &a->ignore_eos
                     : !strcmp(f, "--demo")     ? &a->demo
                     : !strcmp(f, "--chat")     ? &a->chat
                                                : NULL;
        if (flag) {
            *flag = true;
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
        } else if (!strcmp(f, "--system")) {
            a->system = v;
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
    if (!a->prompt || a->max_tokens < 0) {
        fprintf(stderr, "folio generate: --prompt and --max-tokens are required (see --help)\n");
        return -1;
    }
    if (a->model_dir && a->demo) {
        fprintf(stderr, "folio generate: --model and --demo exclude each other\n");
        return -1;
    }
    if (a->system && !a->chat) {
        fprintf(stderr, "folio generate: --system goes with --chat\n");
        return -1;
    }
    if (strcmp(a->backend, "cpu") && strcmp(a->backend, "cuda")) {
        fprintf(stderr, "folio generate: --backend must be cpu or cuda, got '%s'\n", a->backend);
        return -1;
    }
    return 0;
}

/* Writes the text that became complete; stdout is flushed so that the
 * completion streams. */
static void emit(const char *s, size_t n, void *arg)
{
    (void)arg;
    fwrite(s, 1, n, stdout);
    fflush(stdout);
}

int folio_generate_main(int argc, char **argv)
{
    struct generate_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc != 0)
        return prc > 0 ? 0 : 2;

    char err[512];
    if (!a.model_dir && !(a.model_dir = folio_default_model(a.demo, err, sizeof err))) {
        fprintf(stderr, "folio generate: %s\n", err);
        return 2;
    }
    size_t prompt_len = strlen(a.prompt);
    struct folio_session_options so = {.model_dir = a.model_dir,
                                       .backend = a.backend,
                                       .threads = (int)a.threads,
                                       /* room for this prompt: no more tokens than bytes, plus
                                        * the special tokens and a chat template's frame */
                                       .max_context = (int)(prompt_len + 256 + a.max_tokens)};
    struct folio_session *s = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    struct folio_generation g = {0};
    int rc = 1;
    if (folio_session_open(&so, &s, err, sizeof err) != 0)
        goto fail;
    if (a.chat) {
        struct folio_chat_message msgs[2] = {{"system", a.system}, {"user", a.prompt}};
        ids = folio_session_chat_prompt(s, a.system ? msgs : msgs + 1, a.system ? 2 : 1, &n, err,
                                        sizeof err);
    } else {
        ids = folio_session_encode(s, a.prompt, &n, err, sizeof err);
    }
    if (!ids)
        goto fail;
    if (n == 0) {
        snprintf(err, sizeof err,
                 "the prompt gives no tokens (and the tokenizer adds no BOS); "
                 "give a non-empty --prompt");
        goto fail;
    }
    uint64_t seed = a.have_seed ? a.seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    struct folio_sampling_params sp = {.temperature = (float)a.temperature,
                                       .top_k = (int32_t)a.top_k,
                                       .top_p = (float)a.top_p,
                                       .min_p = (float)a.min_p,
                                       .repetition_penalty = 1.0f,
                                       .seed = seed};
    if (folio_session_generate(s, ids, n, a.max_tokens, &sp, a.ignore_eos, emit, NULL, &g, err,
                               sizeof err) != 0)
        goto fail;
    emit("\n", 1, NULL);
    fprintf(stderr,
            "prompt tokens: %zu, generated tokens: %ld\n"
            "prefill: %.1f ms (%.1f tokens/s)\n"
            "decode: %.1f tokens/s (%ld tokens in %.1f ms after the first)\n",
            n, g.generated, g.prefill_s * 1e3, (double)n / g.prefill_s,
            g.generated > 1 ? (double)(g.generated - 1) / g.decode_s : 0.0, g.generated - 1,
            g.decode_s * 1e3);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "folio generate: %s\n", err);
done:
    free(g.text);
    free(ids);
    folio_session_close(s);
    return rc;
}
