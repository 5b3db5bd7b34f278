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
#include "options.h"

struct generate_args {
    const char *model_dir;
    const char *prompt;
    int64_t max_tokens;
    double temperature, top_p, min_p;
    int64_t top_k;
    int64_t seed;
    bool have_seed;
    bool ignore_eos;
    bool demo;
    bool chat;
    const char *system;
    int64_t threads;
    const char *backend;
};

#define G(f) FOLIO_OPT_FIELD(struct generate_args, f)
static const struct folio_opt generate_flags[] = {
    {"--model", FOLIO_OPT_STR, G(model_dir), NULL, 0, 0, NULL,
     "model directory (config.json, *.safetensors, tokenizer.json), or a .gguf file (or a "
     "folder holding one) (default: SmolLM2-135M-Instruct, fetched by deploy/setup.sh)"},
    {"--demo", FOLIO_OPT_BOOL, G(demo), "false", 0, 0, NULL,
     "the random demo model made at build time (for tests)"},
    {"--prompt", FOLIO_OPT_STR, G(prompt), NULL, 0, 0, NULL,
     "the prompt (BOS added as the tokenizer config says); required"},
    {"--chat", FOLIO_OPT_BOOL, G(chat), "false", 0, 0, NULL,
     "the prompt is a user message, sent through the chat template"},
    {"--system", FOLIO_OPT_STR, G(system), NULL, 0, 0, NULL, "with --chat: a system message first"},
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
    {"--backend", FOLIO_OPT_CHOICE, G(backend), "cpu", 0, 0, "cpu|cpu-ref|cuda",
     "the worker backend (cpu-ref: the CPU's f32 reference)"},
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
        "usage: folio generate [--model DIR] --prompt TEXT --max-tokens N [options]\n\n"
        "Completes TEXT with the model in DIR and prints the completion to stdout as it is\n"
        "generated; prompt/generated token counts, prefill time and decode tokens/s go to\n"
        "stderr.",
        &g, 1, argc, argv);
    if (rc != 0)
        return rc;
    if (!a->prompt || !a->max_tokens) {
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
    for (size_t i = 0; i < NUM_FLAGS; i++)
        if (!strcmp(generate_flags[i].name, "--seed"))
            a->have_seed = given[i] != NULL;
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
    uint64_t seed =
        a.have_seed ? (uint64_t)a.seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
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
