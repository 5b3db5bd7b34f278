/* The scheduler's worker process: started with fork+exec, watched through
 * waitpid and heartbeats, restarted with exponential back-off (100 ms .. 5 s)
 * when it dies. The event loop owns the policy; this file owns only the
 * process and its state, which /health reports.
 *
 * An external worker (folio-scheduler --external-worker: a container of its
 * own, restarted by its orchestrator) is not forked: "starting" it writes its
 * arguments to a file that `folio-worker --args-file` reads, and the
 * scheduler then waits for its LoadReply. It has no pid here, so only
 * heartbeats tell that it lives, and a new LoadReply that it was replaced. */
#ifndef FOLIO_WORKER_SUPERVISOR_H
#define FOLIO_WORKER_SUPERVISOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum folio_worker_state {
    FOLIO_WORKER_STOPPED = 0, /* not started, or stopped for good */
    FOLIO_WORKER_STARTING,    /* running, no LoadReply yet */
    FOLIO_WORKER_READY,       /* LoadReply ok: steps may be planned */
    FOLIO_WORKER_BACKOFF,     /* dead, waiting to be restarted */
};

#define FOLIO_WORKER_MAX_ARGS 64

struct folio_worker_supervisor {
    char *argv[FOLIO_WORKER_MAX_ARGS + 1]; /* argv[0] is the worker binary */
    int argc;
    pid_t pid;
    enum folio_worker_state state;
    char state_text[512]; /* "starting", "ready", "restarting: <reason>" */
    uint64_t started_ns, last_heartbeat_ns, restart_at_ns;
    uint64_t backoff_ns;
    uint64_t heartbeat_timeout_ns;
    uint32_t restarts;
    bool ever_ready;
    bool external;
    char args_path[4096]; /* external: where the worker's arguments are written */
};

void folio_ws_init(struct folio_worker_supervisor *ws, uint64_t heartbeat_timeout_ns);
/* Makes it an external worker's supervisor; args_path is removed now (a
 * stale file must not start a worker for this scheduler). */
void folio_ws_set_external(struct folio_worker_supervisor *ws, const char *args_path);
/* Appends one argument (copied). */
void folio_ws_arg(struct folio_worker_supervisor *ws, const char *arg);
void folio_ws_argf(struct folio_worker_supervisor *ws, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void folio_ws_free(struct folio_worker_supervisor *ws);

/* fork+exec; the child dies with the scheduler (PR_SET_PDEATHSIG).
 * External: writes argv[1..] to args_path, one per line, and waits. */
int folio_ws_start(struct folio_worker_supervisor *ws, uint64_t now_ns, char *err, size_t errlen);

/* Non-blocking waitpid: 1 when the worker has exited (why says how, e.g.
 * "worker exited: killed by signal 9"), else 0. */
int folio_ws_reap(struct folio_worker_supervisor *ws, char *why, size_t whylen);

/* The worker is gone (already reaped): back off before the next start. */
void folio_ws_schedule_restart(struct folio_worker_supervisor *ws, uint64_t now_ns,
                               const char *why);

void folio_ws_ready(struct folio_worker_supervisor *ws);
void folio_ws_heartbeat(struct folio_worker_supervisor *ws, uint64_t now_ns);
/* Whether a heartbeat from pid is this worker's: a forked worker's pid must
 * match; an external one's pid is in another namespace and not known. */
bool folio_ws_heartbeat_is_ours(const struct folio_worker_supervisor *ws, uint32_t pid);
/* True when a live worker has been silent past the timeout. */
bool folio_ws_silent(const struct folio_worker_supervisor *ws, uint64_t now_ns);

/* SIGTERM, up to grace_ms for it to exit, then SIGKILL; reaps it.
 * External: removes the arguments file (its orchestrator stops it). */
void folio_ws_stop(struct folio_worker_supervisor *ws, int grace_ms);

#endif
