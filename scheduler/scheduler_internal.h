/* The scheduler process's state and the functions shared by scheduler.c and scheduler_events.c. */
#ifndef FOLIO_SCHEDULER_INTERNAL_H
#define FOLIO_SCHEDULER_INTERNAL_H

#include <limits.h>
#include <nng/nng.h>
#include <stdbool.h>
#include <stdint.h>

#include "folio.pb-c.h"
#include "frontend_links.h"
#include "loop_phase.h"
#include "policy.h"
#include "scheduler.h"
#include "shm_ring.h"
#include "worker_supervisor.h"

#define MAX_SUBMITS_PER_TURN 4096
/* Exit status for a configuration error (a model the worker cannot load):
 * `folio serve` stops rather than restart a scheduler that would fail again. */
#define FOLIO_EXIT_CONFIG 2

struct step_timing {
    uint64_t plan_start_ns, plan_ns;
};

struct sched {
    const struct folio_scheduler_options *o;
    struct folio_policy *policy;
    struct folio_policy_config pcfg;
    struct folio_frontend_links links;
    struct folio_worker_supervisor ws;
    bool worker_prompt_logprobs; /* the last LoadReply's: its backend computes prompt logprobs */
    bool worker_grammar;         /* the last LoadReply's: its backend applies grammar masks */
    char model_name[256];
    int worker_vocab, worker_max_len;
    uint32_t epoch;
    uint64_t status_replies; /* StatusReplies sent: orders them for the frontends */

    nng_socket submit_sock, ctl_sock, worker_sock;
    int submit_fd, ctl_fd, worker_fd, sig_fd;
    char submit_url[PATH_MAX + 64], ctl_url[PATH_MAX + 64], worker_url[PATH_MAX + 64];

    char plan_name[256], result_name[256];
    struct folio_ring *plan_owner, *result_owner, *plan_writer, *result_reader;
    size_t plan_capacity, result_capacity;

    struct step_timing timing[FOLIO_POLICY_MAX_INFLIGHT];
    int timing_head, timing_count;
    double plan_s, backend_s, ipc_s;
    double loop_s[FOLIO_LOOP_PHASES]; /* the loop's time by phase (common/loop_phase.h) */
    uint64_t last_result_ns;
    uint64_t worker_rss_bytes; /* from the worker's last heartbeat; 0 when it is gone */

    bool draining;
    uint64_t drain_deadline_ns;
    int exit_status;
    bool done;
};

void sched_on_event(void *ctx, const struct folio_token_event *ev);
void sched_build_worker_argv(struct sched *s);
void sched_worker_kill_and_lose(struct sched *s, const char *why);
void sched_handle_worker_ctl(struct sched *s);
void sched_supervise(struct sched *s);
void sched_handle_submits(struct sched *s);
void sched_handle_ctl(struct sched *s);

#endif
