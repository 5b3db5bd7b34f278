/* The flags of folio-scheduler and folio-frontend as tables (options.h):
 * the contract between `folio serve`, which parses and checks all of them
 * and hands each child its own, and the programs themselves, which parse the
 * same tables when they run alone. The flags only the launcher sets
 * (sockets, shared-memory names, ids) are in the *_internal tables and are
 * not flags of `folio serve`. */
#ifndef FOLIO_PROGRAM_FLAGS_H
#define FOLIO_PROGRAM_FLAGS_H

#include <stdbool.h>
#include <stdint.h>

#include "options.h"

/* Both programs: the model and the drain time. */
struct folio_common_flags {
    const char *model;
    double drain_seconds;
};
extern const struct folio_opt folio_common_flag_table[];
extern const size_t folio_common_flag_count;

/* The engine: folio-scheduler and the worker it starts. */
struct folio_engine_flags {
    const char *backend, *dtype;
    const char *quantization;   /* NULL, "none" or "fp8" (common/fp8.h) */
    const char *kv_cache_dtype; /* "auto", "fp8" or "fp8_e4m3" (common/fp8.h) */
    int64_t max_num_seqs, max_num_batched_tokens, num_kv_blocks, max_model_len;
    double gpu_memory_utilization;
    int64_t cpu_kv_bytes, threads, max_waiting_requests, max_pending_prompt_tokens;
    bool enable_prefix_caching, enable_chunked_prefill, async_scheduling, enforce_eager;
    int64_t tensor_parallel_size;
    double heartbeat_timeout, step_timeout;
    int64_t seed; /* meaningful only when given; else drawn from the clock */
    bool simulate;
    double sim_time_scale, sim_eos_probability;
    const char *speculative_config; /* vLLM's JSON (common/spec_config.h) */
};
extern const struct folio_opt folio_engine_flag_table[];
extern const size_t folio_engine_flag_count;

struct folio_scheduler_internal_flags {
    const char *run_dir, *instance, *worker_bin, *submit_url, *ctl_url, *worker_url;
    bool external_worker; /* started elsewhere with --args-file RUN_DIR/worker.args */
};
extern const struct folio_opt folio_scheduler_internal_flag_table[];
extern const size_t folio_scheduler_internal_flag_count;

/* The HTTP side: folio-frontend. */
struct folio_http_flags {
    const char *host;
    int64_t port;
    const char *served_model_name, *tls_cert, *tls_key, *chat_template;
    const char *tool_call_parser, *reasoning_parser;
    struct folio_opt_list api_key;
    bool metrics_require_key, disable_log_requests, enable_auto_tool_choice;
    int64_t max_logprobs, max_body_bytes, event_ring_bytes;
};
extern const struct folio_opt folio_http_flag_table[];
extern const size_t folio_http_flag_count;

struct folio_frontend_internal_flags {
    int64_t frontend_id;
    const char *run_dir, *instance, *scheduler_url, *scheduler_ctl_url;
};
extern const struct folio_opt folio_frontend_internal_flag_table[];
extern const size_t folio_frontend_internal_flag_count;

#define FOLIO_MAX_FRONTENDS 64

#endif
