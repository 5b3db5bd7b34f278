#include "worker_supervisor.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define BACKOFF_MIN_NS (100ull * 1000000ull)
#define BACKOFF_MAX_NS (5000ull * 1000000ull)

void folio_ws_init(struct folio_worker_supervisor *ws, uint64_t heartbeat_timeout_ns)
{
    memset(ws, 0, sizeof *ws);
    ws->pid = -1;
    ws->backoff_ns = BACKOFF_MIN_NS;
    ws->heartbeat_timeout_ns = heartbeat_timeout_ns;
    snprintf(ws->state_text, sizeof ws->state_text, "stopped");
}

void folio_ws_arg(struct folio_worker_supervisor *ws, const char *arg)
{
    if (ws->argc < FOLIO_WORKER_MAX_ARGS)
        ws->argv[ws->argc++] = strdup(arg);
}

void folio_ws_argf(struct folio_worker_supervisor *ws, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    folio_ws_arg(ws, buf);
}

void folio_ws_free(struct folio_worker_supervisor *ws)
{
    for (int i = 0; i < ws->argc; i++)
        free(ws->argv[i]);
    ws->argc = 0;
}

void folio_ws_set_external(struct folio_worker_supervisor *ws, const char *args_path)
{
    ws->external = true;
    snprintf(ws->args_path, sizeof ws->args_path, "%s", args_path);
    unlink(ws->args_path);
}

/* Written to a temporary name and renamed, so a worker never reads half. */
static int write_args_file(struct folio_worker_supervisor *ws, char *err, size_t errlen)
{
    char tmp[sizeof ws->args_path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", ws->args_path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    for (int i = 1; i < ws->argc; i++)
        fprintf(f, "%s\n", ws->argv[i]);
    if (fclose(f) != 0 || rename(tmp, ws->args_path) != 0) {
        snprintf(err, errlen, "%s: %s", ws->args_path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int expect_external(struct folio_worker_supervisor *ws, uint64_t now_ns, char *err,
                           size_t errlen)
{
    if (write_args_file(ws, err, errlen) != 0)
        return -1;
    ws->state = FOLIO_WORKER_STARTING;
    ws->started_ns = ws->last_heartbeat_ns = now_ns;
    snprintf(ws->state_text, sizeof ws->state_text, "waiting for the worker to connect");
    folio_log_info(0, "waiting for an external worker: folio-worker --args-file %s", ws->args_path);
    return 0;
}

int folio_ws_start(struct folio_worker_supervisor *ws, uint64_t now_ns, char *err, size_t errlen)
{
    ws->argv[ws->argc] = NULL;
    if (ws->external)
        return expect_external(ws, now_ns, err, errlen);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        /* Only async-signal-safe calls until exec. The scheduler blocks its
         * signals for signalfd; the worker must get them back. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        execv(ws->argv[0], ws->argv);
        static const char msg[] = "folio-scheduler: cannot exec the worker binary\n";
        (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
        _exit(127);
    }
    ws->pid = pid;
    ws->state = FOLIO_WORKER_STARTING;
    ws->started_ns = ws->last_heartbeat_ns = now_ns;
    snprintf(ws->state_text, sizeof ws->state_text, "starting");
    folio_log_info(0, "started worker pid %d: %s", (int)pid, ws->argv[0]);
    return 0;
}

static void describe_status(int status, char *why, size_t whylen)
{
    if (WIFSIGNALED(status))
        snprintf(why, whylen, "worker exited: killed by signal %d", WTERMSIG(status));
    else if (WIFEXITED(status))
        snprintf(why, whylen, "worker exited with status %d", WEXITSTATUS(status));
    else
        snprintf(why, whylen, "worker exited (wait status %#x)", status);
}

int folio_ws_reap(struct folio_worker_supervisor *ws, char *why, size_t whylen)
{
    if (ws->pid <= 0)
        return 0;
    int status;
    pid_t r = waitpid(ws->pid, &status, WNOHANG);
    if (r != ws->pid)
        return 0;
    describe_status(status, why, whylen);
    ws->pid = -1;
    return 1;
}

void folio_ws_schedule_restart(struct folio_worker_supervisor *ws, uint64_t now_ns, const char *why)
{
    ws->state = FOLIO_WORKER_BACKOFF;
    ws->restart_at_ns = now_ns + ws->backoff_ns;
    if (ws->external)
        folio_log_warn(0, "%s; expecting a new worker in %llu ms", why,
                       (unsigned long long)(ws->backoff_ns / 1000000));
    else
        folio_log_warn(0, "%s; restarting in %llu ms", why,
                       (unsigned long long)(ws->backoff_ns / 1000000));
    snprintf(ws->state_text, sizeof ws->state_text, "restarting: %s", why);
    ws->backoff_ns *= 2;
    if (ws->backoff_ns > BACKOFF_MAX_NS)
        ws->backoff_ns = BACKOFF_MAX_NS;
    ws->restarts++;
}

void folio_ws_ready(struct folio_worker_supervisor *ws)
{
    ws->state = FOLIO_WORKER_READY;
    ws->ever_ready = true;
    ws->backoff_ns = BACKOFF_MIN_NS; /* it loaded: the next failure starts the back-off over */
    snprintf(ws->state_text, sizeof ws->state_text, "ready");
}

void folio_ws_heartbeat(struct folio_worker_supervisor *ws, uint64_t now_ns)
{
    ws->last_heartbeat_ns = now_ns;
}

bool folio_ws_heartbeat_is_ours(const struct folio_worker_supervisor *ws, uint32_t pid)
{
    return ws->external || (pid_t)pid == ws->pid;
}

bool folio_ws_silent(const struct folio_worker_supervisor *ws, uint64_t now_ns)
{
    /* Loading may take minutes; heartbeats start once the worker is ready. */
    return ws->state == FOLIO_WORKER_READY && (ws->pid > 0 || ws->external) &&
           now_ns - ws->last_heartbeat_ns > ws->heartbeat_timeout_ns;
}

void folio_ws_stop(struct folio_worker_supervisor *ws, int grace_ms)
{
    if (ws->pid > 0) {
        kill(ws->pid, SIGTERM);
        int status;
        for (int waited = 0; waited < grace_ms; waited += 10) {
            if (waitpid(ws->pid, &status, WNOHANG) == ws->pid) {
                ws->pid = -1;
                break;
            }
            struct timespec ts = {0, 10 * 1000000};
            nanosleep(&ts, NULL);
        }
        if (ws->pid > 0) {
            kill(ws->pid, SIGKILL);
            waitpid(ws->pid, &status, 0);
            ws->pid = -1;
        }
    }
    if (ws->external)
        unlink(ws->args_path);
    ws->state = FOLIO_WORKER_STOPPED;
    snprintf(ws->state_text, sizeof ws->state_text, "stopped");
}
