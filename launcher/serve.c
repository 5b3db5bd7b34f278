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

#include "commands.h"
#include "clock.h"
#include "default_model.h"
#include "gguf.h"
#include "scheduler_watch.h"

#define MAX_FRONTENDS 64
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

struct serve_options {
    const char *model;
    bool demo;
    const char *host;
    const char *port;
    int frontends;
    const char *backend;
    const char *tls_cert;
    const char *tls_key;
    const char *served_model_name;
    double drain_seconds;
    const char *passthrough[MAX_ARGS]; /* scheduler flags, passed as given */
    int num_passthrough;
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

static void usage(FILE *f)
{
    fprintf(
        f, "usage: folio serve [--model DIR | --demo] [--host ADDR] [--port 8000] [--frontends N]\n"
           "                   [--backend cpu|cuda] [--tls-cert FILE --tls-key FILE]\n"
           "                   [--served-model-name NAME] [--drain-seconds 30]\n"
           "                   [scheduler options...]\n\n"
           "Serves the model in DIR (Hugging Face layout, or a .gguf file or a folder\n"
           "holding one) over an OpenAI-compatible API.\n"
           "Without --model it serves SmolLM2-135M-Instruct, which deploy/setup.sh fetches;\n"
           "--demo serves the small demo model made at build time instead (random weights,\n"
           "for tests: the text is noise, the serving path is real).\n"
           "Any other --flag [VALUE] is passed to folio-scheduler as given, e.g.\n"
           "--max-num-seqs, --max-num-batched-tokens, --num-kv-blocks,\n"
           "--gpu-memory-utilization, --threads, --max-waiting-requests, --simulate\n"
           "(see folio-scheduler --help).\n");
}

static int parse_options(int argc, char **argv, struct serve_options *o)
{
    *o = (struct serve_options){
        .host = "0.0.0.0", .port = "8000", .frontends = 1, .backend = "cpu", .drain_seconds = 30};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "folio serve: expected --flag [VALUE], got '%s'\n", a);
            return -1;
        }
        if (!strcmp(a, "--demo")) {
            o->demo = true;
            continue;
        }
        /* A scheduler flag without a value (--simulate) is passed alone. */
        bool has_value = i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0;
        static const char *const own_flags[] = {
            "--model",   "--host",      "--port",          "--backend",          "--tls-cert",
            "--tls-key", "--frontends", "--drain-seconds", "--served-model-name"};
        for (size_t k = 0; !has_value && k < sizeof own_flags / sizeof own_flags[0]; k++)
            if (!strcmp(a, own_flags[k])) {
                fprintf(stderr, "folio serve: %s needs a value\n", a);
                return -1;
            }
        if (!has_value) {
            if (o->num_passthrough + 1 > MAX_ARGS - 32) {
                fprintf(stderr, "folio serve: too many options\n");
                return -1;
            }
            o->passthrough[o->num_passthrough++] = a;
            continue;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--host"))
            o->host = v;
        else if (!strcmp(a, "--port"))
            o->port = v;
        else if (!strcmp(a, "--backend"))
            o->backend = v;
        else if (!strcmp(a, "--tls-cert"))
            o->tls_cert = v;
        else if (!strcmp(a, "--tls-key"))
            o->tls_key = v;
        else if (!strcmp(a, "--served-model-name"))
            o->served_model_name = v;
        else if (!strcmp(a, "--frontends")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > MAX_FRONTENDS) {
                fprintf(stderr, "folio serve: --frontends must be 1..%d, got '%s'\n", MAX_FRONTENDS,
                        v);
                return -1;
            }
            o->frontends = (int)n;
        } else if (!strcmp(a, "--drain-seconds")) {
            char *end;
            o->drain_seconds = strtod(v, &end);
            if (*end || o->drain_seconds < 0) {
                fprintf(stderr, "folio serve: bad --drain-seconds '%s'\n", v);
                return -1;
            }
        } else {
            if (o->num_passthrough + 2 > MAX_ARGS - 32) {
                fprintf(stderr, "folio serve: too many options\n");
                return -1;
            }
            o->passthrough[o->num_passthrough++] = a;
            o->passthrough[o->num_passthrough++] = v;
        }
    }
    if (strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda")) {
        fprintf(stderr, "folio serve: --backend must be cpu or cuda, got '%s'\n", o->backend);
        return -1;
    }
    if (!o->tls_cert != !o->tls_key) {
        fprintf(stderr, "folio serve: --tls-cert and --tls-key go together\n");
        return -1;
    }
    if (o->model && o->demo) {
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
    char cfg[PATH_MAX], err[512];
    int is_gguf = folio_gguf_resolve(o->model, cfg, sizeof cfg, err, sizeof err);
    if (is_gguf != 0) {
        if (is_gguf < 0)
            fprintf(stderr, "folio serve: %s\n", err);
        return is_gguf < 0 ? -1 : 0;
    }
    snprintf(cfg, sizeof cfg, "%s/config.json", o->model);
    if (access(cfg, R_OK) != 0) {
        fprintf(stderr,
                "folio serve: %s: %s (is --model a Hugging Face model directory or a .gguf "
                "file?)\n",
                cfg, strerror(errno));
        return -1;
    }
    return 0;
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

/* The ctl URL the scheduler listens on: its default in the run directory,
 * unless --ctl-url was passed through to it. */
static void scheduler_ctl_url(const struct serve_options *o, const char *run_dir, char *out,
                              size_t len)
{
    for (int i = 0; i + 1 < o->num_passthrough; i++)
        if (!strcmp(o->passthrough[i], "--ctl-url")) {
            snprintf(out, len, "%s", o->passthrough[i + 1]);
            return;
        }
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
    struct serve_options o;
    if (parse_options(argc, argv, &o) != 0)
        return EXIT_USAGE;

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

    int nchildren = 1 + o.frontends;
    struct child *children = calloc(nchildren, sizeof *children);
    if (!children)
        return 1;

    struct child *s = &children[0];
    snprintf(s->name, sizeof s->name, "folio-scheduler");
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/folio-scheduler", self);
    add_arg(s, path);
    add_flag(s, "--model", o.model);
    add_flag(s, "--backend", o.backend);
    add_flag(s, "--run-dir", run_dir);
    add_flag(s, "--instance", instance);
    char child_drain[32];
    snprintf(child_drain, sizeof child_drain, "%d", child_drain_seconds(o.drain_seconds));
    add_flag(s, "--drain-seconds", child_drain);
    for (int i = 0; i < o.num_passthrough; i++)
        add_arg(s, o.passthrough[i]);

    for (int i = 0; i < o.frontends; i++) {
        struct child *f = &children[1 + i];
        char id[16];
        snprintf(id, sizeof id, "%d", i);
        snprintf(f->name, sizeof f->name, "folio-frontend-%d", i);
        snprintf(path, sizeof path, "%s/folio-frontend", self);
        add_arg(f, path);
        add_flag(f, "--model", o.model);
        add_flag(f, "--host", o.host);
        add_flag(f, "--port", o.port);
        add_flag(f, "--frontend-id", id);
        add_flag(f, "--run-dir", run_dir);
        add_flag(f, "--instance", instance);
        add_flag(f, "--drain-seconds", child_drain);
        if (o.tls_cert) {
            add_flag(f, "--tls-cert", o.tls_cert);
            add_flag(f, "--tls-key", o.tls_key);
        }
        if (o.served_model_name)
            add_flag(f, "--served-model-name", o.served_model_name);
    }

    int rc = 0;
    for (int i = 0; i < nchildren; i++) {
        children[i].backoff_s = BACKOFF_MIN_S;
        if (start_child(&children[i]) != 0)
            rc = 1;
    }

    char ctl_url[PATH_MAX + 32], werr[256];
    scheduler_ctl_url(&o, run_dir, ctl_url, sizeof ctl_url);
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
            deadline = folio_mono_s() + o.drain_seconds;
            for (int i = 0; i < nchildren; i++)
                if (children[i].pid > 0)
                    kill(children[i].pid, SIGTERM);
        }
        if (stopping && folio_mono_s() > deadline) {
            for (int i = 0; i < nchildren; i++)
                if (children[i].pid > 0) {
                    logf_("%s did not stop within %.0f s: SIGKILL", children[i].name,
                          o.drain_seconds);
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
