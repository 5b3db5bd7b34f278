/* `folio chat`: an interactive chat in the terminal. Each line typed is a
 * user message; the whole conversation goes through the model's chat
 * template and the reply streams to stdout as it is generated. The KV cache
 * of the conversation so far is kept between turns, so each turn prefills
 * only the new messages. /exit or end of input (Ctrl-D) ends it; /reset
 * starts a new conversation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "default_model.h"
#include "local_session.h"
#include "options.h"

struct chat_args {
    const char *model_dir;
    bool demo;
    const char *system;
    const char *backend;
    int64_t threads, max_tokens, max_context, top_k, seed;
    double temperature, top_p, min_p;
    bool have_seed, stats;
};

/* Low-temperature nucleus sampling by default, as small chat models' cards advise: greedy
 * decoding loops on them. */
#define C(f) FOLIO_OPT_FIELD(struct chat_args, f)
static const struct folio_opt chat_flags[] = {
    {"--model", FOLIO_OPT_STR, C(model_dir), NULL, 0, 0, NULL,
     "model directory or .gguf file with a chat template (default: SmolLM2-135M-Instruct, "
     "fetched by deploy/setup.sh)"},
    {"--demo", FOLIO_OPT_BOOL, C(demo), "false", 0, 0, NULL,
     "the random demo model made at build time (for tests)"},
    {"--system", FOLIO_OPT_STR, C(system), NULL, 0, 0, NULL,
     "a system message to start the conversation with"},
    {"--max-tokens", FOLIO_OPT_INT, C(max_tokens), "1024", 1, INT32_MAX / 4, NULL,
     "tokens per reply at most"},
    {"--max-context", FOLIO_OPT_INT, C(max_context), "4096", 16, INT32_MAX / 4, NULL,
     "tokens of conversation kept; older turns are dropped to make room"},
    {"--temperature", FOLIO_OPT_NUM, C(temperature), "0.2", 0, 1e6, NULL, "0 is greedy"},
    {"--top-p", FOLIO_OPT_NUM, C(top_p), "0.9", 1e-9, 1, NULL, "nucleus sampling (1: off)"},
    {"--top-k", FOLIO_OPT_INT, C(top_k), "0", 0, INT32_MAX, NULL,
     "keep the K most likely tokens (0: off)"},
    {"--min-p", FOLIO_OPT_NUM, C(min_p), "0", 0, 1, NULL,
     "drop tokens below M times the most likely one (0: off)"},
    {"--seed", FOLIO_OPT_INT, C(seed), NULL, 0, 9e18, NULL,
     "sampling seed (default: drawn from the clock)"},
    {"--stats", FOLIO_OPT_BOOL, C(stats), "false", 0, 0, NULL,
     "token counts and speed on stderr after each reply"},
    {"--threads", FOLIO_OPT_INT, C(threads), "0", 0, 4096, NULL, "CPU threads (0: all cores)"},
    {"--backend", FOLIO_OPT_CHOICE, C(backend), "cpu", 0, 0, "cpu|cpu-ref|cuda",
     "the worker backend (cpu-ref: the CPU's f32 reference)"},
};

/* Returns 0 to go on, 1 after --help, -1 on a bad argument. */
static int parse_args(int argc, char **argv, struct chat_args *a)
{
    enum { NUM_FLAGS = sizeof chat_flags / sizeof *chat_flags };
    const char *given[NUM_FLAGS];
    memset(a, 0, sizeof *a);
    struct folio_opt_group g = {NULL, chat_flags, NUM_FLAGS, a, given};
    int rc = folio_opts_parse(
        "folio chat",
        "usage: folio chat [--model DIR | --demo] [options]\n\n"
        "Chats with the model in the terminal: type a message and press Enter; the reply\n"
        "streams as it is generated. /reset starts over; /exit or Ctrl-D ends.",
        &g, 1, argc, argv);
    if (rc != 0)
        return rc;
    if (a->model_dir && a->demo) {
        fprintf(stderr, "folio chat: --model and --demo exclude each other\n");
        return -1;
    }
    if (a->max_tokens >= a->max_context) {
        fprintf(stderr, "folio chat: --max-tokens (%lld) must be below --max-context (%lld)\n",
                (long long)a->max_tokens, (long long)a->max_context);
        return -1;
    }
    for (size_t i = 0; i < NUM_FLAGS; i++)
        if (!strcmp(chat_flags[i].name, "--seed"))
            a->have_seed = given[i] != NULL;
    return 0;
}

/* The conversation: messages[0] is the system message when there is one. */
struct history {
    struct folio_chat_message *msgs;
    size_t n, cap, first_turn; /* first_turn: index of the oldest message that may be dropped */
};

static int history_add(struct history *h, const char *role, const char *content)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        struct folio_chat_message *m = realloc(h->msgs, cap * sizeof *m);
        if (!m)
            return -1;
        h->msgs = m;
        h->cap = cap;
    }
    char *copy = strdup(content);
    if (!copy)
        return -1;
    h->msgs[h->n++] = (struct folio_chat_message){role, copy};
    return 0;
}

static void history_truncate(struct history *h, size_t n)
{
    while (h->n > n)
        free((char *)h->msgs[--h->n].content);
}

/* Drops the oldest user/assistant exchange; false when only the last message is left. */
static bool history_drop_oldest(struct history *h)
{
    size_t at = h->first_turn, drop = 2;
    if (h->n - at <= drop)
        return false;
    for (size_t i = 0; i < drop; i++)
        free((char *)h->msgs[at + i].content);
    memmove(h->msgs + at, h->msgs + at + drop, (h->n - at - drop) * sizeof *h->msgs);
    h->n -= drop;
    return true;
}

static void stream_out(const char *text, size_t len, void *arg)
{
    (void)arg;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

/* The conversation's prompt, dropping the oldest turns until it leaves room for a reply. */
static int32_t *fit_prompt(struct folio_session *s, struct history *h, int64_t max_tokens,
                           size_t *n, char *err, size_t errlen)
{
    for (;;) {
        int32_t *ids = folio_session_chat_prompt(s, h->msgs, h->n, n, err, errlen);
        if (!ids || (int64_t)*n + max_tokens <= folio_session_max_context(s))
            return ids;
        free(ids);
        if (!history_drop_oldest(h)) {
            snprintf(err, errlen,
                     "the message (%zu tokens with the template) leaves no room for a %lld-token "
                     "reply in the %d-token context",
                     *n, (long long)max_tokens, folio_session_max_context(s));
            return NULL;
        }
        fprintf(stderr, "(the oldest turn was dropped to fit the context)\n");
    }
}

/* One user message in, one reply out. Returns 0, or -1 after a message on stderr (the
 * conversation goes on without that message). */
static int turn(struct folio_session *s, struct history *h, const struct chat_args *a,
                struct folio_sampling_params *sp, const char *line)
{
    char err[512];
    size_t n = 0;
    struct folio_generation g = {0};
    int32_t *ids = NULL;
    if (history_add(h, "user", line) != 0) {
        fprintf(stderr, "folio chat: out of memory\n");
        return -1;
    }
    if (!(ids = fit_prompt(s, h, a->max_tokens, &n, err, sizeof err)))
        goto fail;
    if (folio_session_generate(s, ids, n, a->max_tokens, sp, false, stream_out, NULL, &g, err,
                               sizeof err) != 0) {
        fputc('\n', stdout);
        goto fail;
    }
    fputc('\n', stdout);
    fflush(stdout);
    if (history_add(h, "assistant", g.text) != 0) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    if (a->stats)
        fprintf(stderr, "[prompt %zu tokens (%zu reused), reply %ld tokens%s, %.1f tokens/s]\n", n,
                g.reused_tokens, g.generated, g.stopped ? "" : " (cut at --max-tokens)",
                g.generated > 1 ? (double)(g.generated - 1) / g.decode_s : 0.0);
    sp->seed++;
    free(ids);
    free(g.text);
    return 0;
fail:
    fprintf(stderr, "folio chat: %s\n", err);
    history_truncate(h, h->n - 1); /* the user message, last whatever turns were dropped */
    free(ids);
    free(g.text);
    return -1;
}

int folio_chat_main(int argc, char **argv)
{
    struct chat_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    char err[512];
    if (!a.model_dir && !(a.model_dir = folio_default_model(a.demo, err, sizeof err))) {
        fprintf(stderr, "folio chat: %s\n", err);
        return 2;
    }
    struct folio_session_options so = {.model_dir = a.model_dir,
                                       .backend = a.backend,
                                       .threads = (int)a.threads,
                                       .max_context = (int)a.max_context};
    struct folio_session *s = NULL;
    if (folio_session_open(&so, &s, err, sizeof err) != 0) {
        fprintf(stderr, "folio chat: %s\n", err);
        return 1;
    }
    struct folio_sampling_params sp = {
        .temperature = (float)a.temperature,
        .top_k = (int32_t)a.top_k,
        .top_p = (float)a.top_p,
        .min_p = (float)a.min_p,
        .repetition_penalty = 1.0f,
        .seed = a.have_seed ? (uint64_t)a.seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32),
    };
    struct history h = {0};
    int rc = 0;
    if (a.system && history_add(&h, "system", a.system) != 0)
        rc = 1;
    h.first_turn = h.n;
    bool tty = isatty(STDIN_FILENO);
    if (tty)
        printf("Chatting with %s. /reset starts over, /exit or Ctrl-D ends.\n", a.model_dir);
    char *line = NULL;
    size_t cap = 0;
    while (rc == 0) {
        if (tty) {
            printf(">>> ");
            fflush(stdout);
        }
        ssize_t len = getline(&line, &cap, stdin);
        if (len < 0)
            break;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit"))
            break;
        if (!strcmp(line, "/reset")) {
            history_truncate(&h, h.first_turn);
            continue;
        }
        if (len == 0)
            continue;
        turn(s, &h, &a, &sp, line);
    }
    if (tty)
        putchar('\n');
    free(line);
    history_truncate(&h, 0);
    free(h.msgs);
    folio_session_close(s);
    return rc;
}
