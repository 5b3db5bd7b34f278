/* `folio serve`: starts one scheduler (which starts and supervises its
 * worker) and N frontends as child processes, restarts a child that dies
 * (with back-off), and on SIGTERM or SIGINT drains and stops them all,
 * leaving no shared-memory segment or socket file behind.
 *
 * The launcher keeps no request state: it only execs, waits and cleans up, so
 * that each program can equally run alone (docker-compose style) with the
 * same flags this file passes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "commands.h"
#include "default_model.h"
#include "gguf.h"
#include "model_config.h"
#include "options.h"
#include "program_flags.h"
#include "scheduler_watch.h"
#include "spec_config.h"

#define MAX_ARGS 96
#define BACKOFF_MIN_S 0.1
#define BACKOFF_MAX_S 5.0
#define HEALTHY_AFTER_S 30.0      /* a child up this long has its back-off reset */
#define EXIT_USAGE 2              /* a child that exits 2 was misconfigured: not restarted */
#define SCHED_SILENT_S 5.0        /* a scheduler that answered once, silent this long: restarted */
#define SCHED_FIRST_ANSWER_S 60.0 /* the same for one that never answered since it started */

struct child {
    char name[32];
    char *argv[MAX_ARGS];
    int argc;
    pid_t pid;
    double started_at;
    double backoff_s;
    double restart_at; /* > 0: waiting to be restarted then */
    bool failed;       /* misconfigured: stays down */
};

/* Every flag of `folio serve`: its own, then the ones it checks and hands on
 * to the scheduler (engine) and to each frontend (http), as given. */
struct serve_options {
    int64_t frontends;
    bool demo;
    struct folio_common_flags common;
    struct folio_engine_flags engine;
    struct folio_http_flags http;
    const char *common_given[8], *engine_given[32], *http_given[32];
    const char *model;   /* --model, or the default model */
    char api_keys[4096]; /* --api-key values and FOLIO_API_KEY, one a line */
};

static const struct folio_opt serve_flag_table[] = {
    {"--frontends", FOLIO_OPT_INT, FOLIO_OPT_FIELD(struct serve_options, frontends), NULL, 1,
     FOLIO_MAX_FRONTENDS, NULL,
     "HTTP frontend processes sharing the port (SO_REUSEPORT); default one per 4 cores, 1-4"},
    {"--demo", FOLIO_OPT_BOOL, FOLIO_OPT_FIELD(struct serve_options, demo), "false", 0, 0, NULL,
     "serve the random demo model made at build time (for tests), not the default model"},
};

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    char stamp[32];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03ldZ folio-serve[%d] ", stamp, ts.tv_nsec / 1000000, (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* --api-key values and FOLIO_API_KEY as the frontends read them (one key a
 * line), so that no key is on a command line that other users can read. */
static int collect_api_keys(struct serve_options *o)
{
    size_t len = 0;
    const char *env = getenv("FOLIO_API_KEY");
    for (int i = -1; i < o->http.api_key.n; i++) {
        const char *k = i < 0 ? env : o->http.api_key.v[i];
        if (!k || !*k)
            continue;
        if (strchr(k, '\n') || len + strlen(k) + 2 > sizeof o->api_keys) {
            fprintf(stderr, "folio serve: --api-key: a key holds a newline, or the keys are "
                            "too long\n");
            return -1;
        }
        len += (size_t)snprintf(o->api_keys + len, sizeof o->api_keys - len, "%s%s",
                                len ? "\n" : "", k);
    }
    o->http.api_key.n = 0; /* handed on through the environment only */
    return 0;
}

/* What only the model knows: --max-model-len within its context, and a budget that holds
 * it when prompts are not chunked. */
static int check_against_model(struct serve_options *o)
{
    char cfg[PATH_MAX], err[512];
    snprintf(cfg, sizeof cfg, "%s/config.json", o->model);
    if (access(cfg, R_OK) != 0) {
        fprintf(stderr,
                "folio serve: %s: %s (is --model a Hugging Face model directory or a .gguf "
                "file?)\n",
                cfg, strerror(errno));
        return -1;
    }
    struct folio_model_config mc;
    if (folio_model_config_load(o->model, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "folio serve: --model %s: %s\n", o->model, err);
        return -1;
    }
    if (o->engine.max_model_len > mc.max_position_embeddings) {
        fprintf(stderr,
                "folio serve: --max-model-len must be in 16..%d (the model's context), got "
                "%lld\n",
                mc.max_position_embeddings, (long long)o->engine.max_model_len);
        return -1;
    }
    int64_t len = o->engine.max_model_len ? o->engine.max_model_len : mc.max_position_embeddings;
    int64_t budget = o->engine.max_num_batched_tokens;
    if (!o->engine.enable_chunked_prefill && budget && budget < len) {
        fprintf(stderr,
                "folio serve: --max-num-batched-tokens %lld is below the model length served "
                "(%lld): with --no-enable-chunked-prefill each prompt runs whole in one step; "
                "raise it or lower --max-model-len\n",
                (long long)budget, (long long)len);
        return -1;
    }
    return 0;
}

/* 0 to serve, 1 when --help was printed, -1 on a bad flag (printed). */
/* One frontend streams tens of thousands of token events a second on one core;
 * a saturated GPU produces more, and the client, scheduler and worker need cores
 * too, so a frontend per 4 cores and at most 4. */
static int64_t default_frontends(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long n = cores / 4;
    return n < 1 ? 1 : n > 4 ? 4 : n;
}

static int parse_options(int argc, char **argv, struct serve_options *o)
{
    memset(o, 0, sizeof *o);
    o->engine.step_timeout = -1;
    struct folio_opt_group groups[] = {
        {NULL, serve_flag_table, sizeof serve_flag_table / sizeof *serve_flag_table, o, NULL},
        {NULL, folio_common_flag_table, folio_common_flag_count, &o->common, o->common_given},
        {"engine (folio-scheduler and its worker)", folio_engine_flag_table,
         folio_engine_flag_count, &o->engine, o->engine_given},
        {"HTTP (each folio-frontend)", folio_http_flag_table, folio_http_flag_count, &o->http,
         o->http_given},
    };
    _Static_assert(sizeof o->engine_given / sizeof *o->engine_given >= 20 &&
                       sizeof o->http_given / sizeof *o->http_given >= 17,
                   "room for every flag's given text");
    int rc = folio_opts_parse(
        "folio serve",
        "usage: folio serve [--model DIR | --demo] [options]\n\n"
        "Serves the model in DIR (Hugging Face layout, or a .gguf file or a folder holding one)\n"
        "over an OpenAI-compatible API. Without --model it serves SmolLM2-135M-Instruct, which\n"
        "deploy/setup.sh fetches; --demo serves the small demo model made at build time\n"
        "(random weights, for tests). The server listens on every interface\n"
        "(--host 0.0.0.0) unless --host says otherwise: set --api-key (or FOLIO_API_KEY) or\n"
        "--host 127.0.0.1 on a machine others can reach.",
        groups, sizeof groups / sizeof *groups, argc, argv);
    if (rc != 0)
        return rc;
    if (!o->http.tls_cert != !o->http.tls_key) {
        fprintf(stderr, "folio serve: --tls-cert and --tls-key go together\n");
        return -1;
    }
    if (o->http.enable_auto_tool_choice && !o->http.tool_call_parser) {
        fprintf(stderr, "folio serve: --enable-auto-tool-choice needs --tool-call-parser\n");
        return -1;
    }
    const char *files[][2] = {{"--chat-template", o->http.chat_template},
                              {"--tls-cert", o->http.tls_cert},
                              {"--tls-key", o->http.tls_key}};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        if (files[i][1] && access(files[i][1], R_OK) != 0) {
            fprintf(stderr, "folio serve: %s %s: %s\n", files[i][0], files[i][1], strerror(errno));
            return -1;
        }
    struct folio_spec_config spec;
    char spec_err[512];
    if (folio_spec_config_parse(o->engine.speculative_config, &spec, spec_err, sizeof spec_err) !=
        0) {
        fprintf(stderr, "folio serve: %s\n", spec_err);
        return -1;
    }
    if (!o->frontends)
        o->frontends = default_frontends();
    o->model = o->common.model;
    if (o->common.model && o->demo) {
        fprintf(stderr, "folio serve: --model and --demo exclude each other\n");
        return -1;
    }
    if (!o->model) {
        char err[512];
        o->model = folio_default_model(o->demo, err, sizeof err);
        if (!o->model) {
            fprintf(stderr, "folio serve: %s\n", err);
            return -1;
        }
        logf_("no --model: serving %s", o->model);
    }
    if (collect_api_keys(o) != 0)
        return -1;
    char path[PATH_MAX], err[512];
    int is_gguf = folio_gguf_resolve(o->model, path, sizeof path, err, sizeof err);
    if (is_gguf != 0) { /* the scheduler checks --max-model-len against its metadata */
        if (is_gguf < 0)
            fprintf(stderr, "folio serve: %s\n", err);
        return is_gguf < 0 ? -1 : 0;
    }
    return check_against_model(o);
}

static void add_arg(struct child *c, const char *a)
{
    c->argv[c->argc++] = strdup(a);
    c->argv[c->argc] = NULL;
}

static void add_flag(struct child *c, const char *flag, const char *value)
{
    add_arg(c, flag);
    add_arg(c, value);
}

/* The flags of one table that the user gave, as given. */
static void add_forwarded(struct child *c, const struct folio_opt *table, size_t n, void *values,
                          const char **given)
{
    struct folio_opt_group g = {NULL, table, n, values, given};
    const char *args[64];
    int k = folio_opts_forward(&g, args, 64);
    for (int i = 0; i < k && c->argc + 1 < MAX_ARGS; i++)
        add_arg(c, args[i]);
}

static int start_child(struct child *c)
{
    pid_t pid = fork();
    if (pid < 0) {
        logf_("fork for %s failed: %s", c->name, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* Its own process group (with the worker the scheduler starts), so a
         * terminal's ^C reaches only the launcher, which then drains in order;
         * and if the launcher dies, its children follow instead of lingering. */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        execv(c->argv[0], c->argv);
        fprintf(stderr, "folio serve: exec %s: %s\n", c->argv[0], strerror(errno));
        _exit(127);
    }
    c->pid = pid;
    c->started_at = folio_mono_s();
    c->restart_at = 0;
    logf_("started %s pid=%d", c->name, (int)pid);
    return 0;
}

static void describe_status(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
}

/* Removes the run directory's files and every shm segment of this instance. */
static void cleanup(const char *run_dir, const char *instance)
{
    DIR *d = opendir("/dev/shm");
    if (d) {
        size_t n = strlen(instance);
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strncmp(e->d_name, instance, n) && e->d_name[n] == '-') {
                char path[PATH_MAX];
                snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
                unlink(path);
            }
        }
        closedir(d);
    }
    d = opendir(run_dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            unlinkat(dirfd(d), e->d_name, 0);
        }
        closedir(d);
        rmdir(run_dir);
    }
}

/* The children's drain, shorter than the launcher's own: they end what is
 * still open (an error event and [DONE] for a stream) before the launcher's
 * SIGKILL would cut it. Whole seconds: the frontend takes no fractions. */
static int child_drain_seconds(double drain)
{
    return (int)(drain >= 4 ? drain - 1 : drain / 2);
}

/* The ctl URL the scheduler listens on: its default in the run directory
 * (folio serve passes it no --ctl-url). */
static void scheduler_ctl_url(const char *run_dir, char *out, size_t len)
{
    snprintf(out, len, "ipc://%s/scheduler-ctl.ipc", run_dir);
}

/* A scheduler that is alive but has not answered the heartbeat for too long
 * (stopped, deadlocked) is killed with its worker; the usual restart follows. */
static void check_scheduler_heartbeat(struct child *s, struct folio_sched_watch *w)
{
    if (!w || s->pid <= 0)
        return;
    double now = folio_mono_s(), last = folio_sched_watch_last_answer(w);
    bool answered = last > s->started_at;
    double silent = now - (answered ? last : s->started_at);
    if (silent < (answered ? SCHED_SILENT_S : SCHED_FIRST_ANSWER_S))
        return;
    logf_("%s pid=%d not answering for %.1f s (stopped or hung): SIGKILL and restart", s->name,
          (int)s->pid, silent);
    kill(-s->pid, SIGKILL);
    kill(s->pid, SIGKILL);
    s->started_at = now; /* no second kill while it is reaped */
}

int folio_serve_main(int argc, char **argv)
{
    /* A closed stdout or stderr (`folio serve | head`) must not kill the
     * server: log writes fail with EPIPE instead. Children inherit this. */
    signal(SIGPIPE, SIG_IGN);
    static struct serve_options o;
    int prc = parse_options(argc, argv, &o);
    if (prc != 0)
        return prc > 0 ? 0 : EXIT_USAGE;
    char child_drain[32];
    snprintf(child_drain, sizeof child_drain, "%d", child_drain_seconds(o.common.drain_seconds));
    /* The children's flags came from this command line: their errors name it. */
    setenv("FOLIO_PROG", "folio serve", 1);
    if (o.api_keys[0])
        setenv("FOLIO_API_KEY", o.api_keys, 1);

    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "folio serve: cannot find its own executable: %s\n", strerror(errno));
        return 1;
    }
    self[n] = 0;
    *strrchr(self, '/') = 0;

    char run_dir[PATH_MAX], instance[64], pidbuf[16];
    snprintf(instance, sizeof instance, "folio-%d", (int)getpid());
    snprintf(run_dir, sizeof run_dir, "/tmp/%s", instance);
    if (mkdir(run_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "folio serve: mkdir %s: %s\n", run_dir, strerror(errno));
        return 1;
    }
    snprintf(pidbuf, sizeof pidbuf, "%d", (int)getpid());

    /* Signals arrive through a signalfd, so the loop below is the only place
     * that reacts to them. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        fprintf(stderr, "folio serve: signalfd: %s\n", strerror(errno));
        return 1;
    }

    int nchildren = 1 + (int)o.frontends;
    struct child *children = calloc(nchildren, sizeof *children);
    if (!children)
        return 1;

    struct child *s = &children[0];
    snprintf(s->name, sizeof s->name, "folio-scheduler");
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/folio-scheduler", self);
    add_arg(s, path);
    add_flag(s, "--model", o.model);
    add_flag(s, "--run-dir", run_dir);
    add_flag(s, "--instance", instance);
    add_flag(s, "--drain-seconds", child_drain);
    add_forwarded(s, folio_engine_flag_table, folio_engine_flag_count, &o.engine, o.engine_given);

    for (int i = 0; i < (int)o.frontends; i++) {
        struct child *f = &children[1 + i];
        char id[16];
        snprintf(id, sizeof id, "%d", i);
        snprintf(f->name, sizeof f->name, "folio-frontend-%d", i);
        snprintf(path, sizeof path, "%s/folio-frontend", self);
        add_arg(f, path);
        add_flag(f, "--model", o.model);
        add_flag(f, "--frontend-id", id);
        add_flag(f, "--run-dir", run_dir);
        add_flag(f, "--instance", instance);
        add_flag(f, "--drain-seconds", child_drain);
        add_forwarded(f, folio_http_flag_table, folio_http_flag_count, &o.http, o.http_given);
    }

    int rc = 0;
    for (int i = 0; i < nchildren; i++) {
        children[i].backoff_s = BACKOFF_MIN_S;
        if (start_child(&children[i]) != 0)
            rc = 1;
    }

    char ctl_url[PATH_MAX + 32], werr[256];
    scheduler_ctl_url(run_dir, ctl_url, sizeof ctl_url);
    struct folio_sched_watch *watch = NULL;
    if (folio_sched_watch_start(ctl_url, &watch, werr, sizeof werr) != 0)
        logf_("no heartbeat on the scheduler: %s", werr);

    bool stopping = rc != 0;
    double deadline = 0;
    int alive = 0;
    for (;;) {
        alive = 0;
        for (int i = 0; i < nchildren; i++)
            alive += children[i].pid > 0;
        if (stopping && alive == 0)
            break;

        if (stopping && deadline == 0) {
            deadline = folio_mono_s() + o.common.drain_seconds;
            for (int i = 0; i < nchildren; i++)
                if (children[i].pid > 0)
                    kill(children[i].pid, SIGTERM);
        }
        if (stopping && folio_mono_s() > deadline) {
            for (int i = 0; i < nchildren; i++)
                if (children[i].pid > 0) {
                    logf_("%s did not stop within %.0f s: SIGKILL", children[i].name,
                          o.common.drain_seconds);
                    kill(-children[i].pid, SIGKILL);
                    kill(children[i].pid, SIGKILL);
                }
            deadline = folio_mono_s() + 5;
        }

        if (!stopping)
            check_scheduler_heartbeat(s, watch);

        /* Sleep until a signal, the next restart or heartbeat check. */
        double wake = stopping ? deadline : folio_mono_s() + 0.5;
        for (int i = 0; i < nchildren; i++)
            if (!stopping && children[i].restart_at > 0 && children[i].restart_at < wake)
                wake = children[i].restart_at;
        int timeout_ms = (int)((wake - folio_mono_s()) * 1000);
        if (timeout_ms < 0)
            timeout_ms = 0;
        struct pollfd p = {.fd = sfd, .events = POLLIN};
        int pr = poll(&p, 1, timeout_ms);
        if (pr > 0) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == sizeof si) {
                if ((si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) && !stopping) {
                    logf_("signal %d: draining and stopping", (int)si.ssi_signo);
                    stopping = true;
                }
            }
        }

        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (int i = 0; i < nchildren; i++) {
                struct child *c = &children[i];
                if (c->pid != pid)
                    continue;
                char how[96];
                describe_status(status, how, sizeof how);
                c->pid = 0;
                if (stopping) {
                    logf_("%s stopped: %s", c->name, how);
                    break;
                }
                double up = folio_mono_s() - c->started_at;
                if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_USAGE) {
                    logf_("%s %s: its options are wrong, stopping everything", c->name, how);
                    c->failed = true;
                    stopping = true;
                    rc = 1;
                    break;
                }
                if (up > HEALTHY_AFTER_S)
                    c->backoff_s = BACKOFF_MIN_S;
                c->restart_at = folio_mono_s() + c->backoff_s;
                logf_("%s %s after %.1f s; restarting in %.1f s", c->name, how, up, c->backoff_s);
                c->backoff_s *= 2;
                if (c->backoff_s > BACKOFF_MAX_S)
                    c->backoff_s = BACKOFF_MAX_S;
                break;
            }
        }

        if (!stopping)
            for (int i = 0; i < nchildren; i++) {
                struct child *c = &children[i];
                if (c->pid == 0 && c->restart_at > 0 && folio_mono_s() >= c->restart_at &&
                    start_child(c) != 0)
                    c->restart_at = folio_mono_s() + c->backoff_s;
            }
    }

    folio_sched_watch_stop(watch);
    cleanup(run_dir, instance);
    for (int i = 0; i < nchildren; i++)
        for (int j = 0; j < children[i].argc; j++)
            free(children[i].argv[j]);
    free(children);
    close(sfd);
    logf_("stopped");
    return rc;
}
