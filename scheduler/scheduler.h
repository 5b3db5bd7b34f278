/* folio-scheduler's event loop: one thread that owns every request and every
 * KV block (through the policy), its worker process and the links to the
 * frontends.
 *
 * Each turn of the loop:
 *   - signals (signalfd): SIGCHLD -> reap the worker; SIGTERM/SIGINT -> drain;
 *   - the worker-ctl socket: LoadReply (ready, or a load error), Heartbeat;
 *   - the ctl socket (REP): Register (attach the frontend's event ring),
 *     StatusRequest (StatusReply from the real counters);
 *   - the submit socket (PULL): Submit and Abort, as many as are queued;
 *   - the result ring: every step result there, applied in order;
 *   - plan: while fewer than two steps are in flight and there is work, the
 *     next step goes to the plan ring (so the worker always has step N+1
 *     queued when it finishes step N);
 *   - the frontend backlogs are retried;
 *   - then wait: on the result ring (a futex, 1 ms at most, so sockets are
 *     still seen) while steps are in flight, else in poll() on the sockets'
 *     receive fds and the signalfd, so a new request is seen at once. */
#ifndef FOLIO_SCHEDULER_H
#define FOLIO_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spec_config.h"

struct folio_scheduler_options {
    const char *model_dir;      /* NULL only with simulate */
    const char *backend;        /* cpu | cuda */
    const char *quantization;   /* the worker's --quantization: NULL (none) or "fp8" */
    const char *kv_cache_dtype; /* the worker's --kv-cache-dtype: NULL (auto), "fp8", "fp8_e4m3" */
    const char *run_dir;
    const char *instance;
    const char *worker_bin;
    bool external_worker; /* started elsewhere with --args-file RUN_DIR/worker.args */
    const char *submit_url, *ctl_url, *worker_url; /* default ipc:// in run_dir */
    int max_num_seqs;
    int max_num_batched_tokens;
    int num_kv_blocks;
    int max_model_len; /* 0: the model's */
    float gpu_memory_utilization;
    uint64_t cpu_kv_bytes;
    int threads;
    int max_waiting_requests;
    int64_t max_pending_prompt_tokens;
    bool simulate;
    double sim_time_scale;
    double sim_eos_probability;
    double drain_seconds;
    double heartbeat_timeout_seconds;
    double step_timeout_seconds; /* a step running longer means a hung worker; 0: no limit */
    uint64_t seed;
    bool disable_prefix_caching;       /* --no-enable-prefix-caching */
    bool disable_chunked_prefill;      /* --no-enable-chunked-prefill */
    bool max_num_batched_tokens_given; /* else raised to the model length without chunking */
    bool serial_steps;                 /* --no-async-scheduling: one step in flight */
    bool enforce_eager;                /* --enforce-eager: no CUDA graphs in the worker */
    int tensor_parallel_size;          /* the worker's ranks (1: none) */
    struct folio_spec_config spec;     /* --speculative-config */
};

/* Runs until SIGTERM/SIGINT (then drains) or a fatal error. Returns the
 * process exit status. */
int folio_scheduler_run(const struct folio_scheduler_options *o);

#endif
