/* The scheduler's policy: every request's state, and what each step runs.
 *
 * This is the deterministic core of folio-scheduler, free of I/O: the event
 * loop (scheduler.c) feeds it submits, aborts and step results and writes the
 * step plans and token events it produces; the 10,000-request simulation test
 * drives the same code against the simulated worker.
 *
 * A step (DESIGN.md, "Scheduler policy"):
 *   1. every running sequence that is generating gets one decode token; when
 *      the pool has no block for it, the newest running sequence is preempted
 *      by recompute (its blocks freed, back to the front of the waiting
 *      queue, its generated tokens kept and re-prefilled with its prompt);
 *   2. running sequences still in their prompt get prefill chunks, and
 *   3. waiting requests are admitted, oldest first, while slots, budget and
 *      blocks last; a new request starts from the longest cached prefix of
 *      its prompt (prefix caching, by reference, copy-free). Without chunked
 *      prefill a prompt is admitted only whole, else it and those behind it wait.
 *   The prompt tokens of a step are what is left of the token budget
 *   (--max-num-batched-tokens), and no more than the worker's measured speed
 *   runs in step_target_seconds; while a request waits, the running prefills
 *   take at most half of them and admissions the rest (plan_prefills).
 *
 * Pipelining: up to FOLIO_POLICY_MAX_INFLIGHT steps are in flight (one with
 * serial_steps, --no-async-scheduling). Step N+1
 * is planned before step N's tokens are known, so a decode token that step N
 * samples is sent as FOLIO_TOKEN_FROM_PREV and the worker feeds it on the
 * device. A stop (EOS, stop token) is therefore seen one step late: the token
 * the next step sampled for a finished sequence is discarded, never sent. A
 * sequence's blocks and slot are given back when no step in flight uses it
 * any more. max_tokens and the context length are known ahead: no step is
 * planned past them. */
#ifndef FOLIO_SCHEDULER_POLICY_H
#define FOLIO_SCHEDULER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc_records.h"
#include "sampling_params.h"
#include "seq_params.h"
#include "queue_time.h"
#include "spec_config.h"

#define FOLIO_POLICY_MAX_INFLIGHT 2
/* The step time prompts are chunked to (folio_policy_config.step_target_seconds): long enough
 * that a step's fixed costs are small next to it, short enough that a request arriving behind
 * a long prompt gets its first token a few steps later. A GPU's steps stay below it at the
 * default token budget, so there the budget alone decides. */
#define FOLIO_POLICY_STEP_TARGET_SECONDS 0.5

struct folio_policy_config {
    int max_num_seqs;           /* slots */
    int max_num_batched_tokens; /* token budget of one step */
    int num_kv_blocks;
    int max_model_len; /* prompt + output tokens of one sequence */
    int vocab_size;
    int max_waiting_requests;
    int64_t max_pending_prompt_tokens; /* sum over waiting requests */
    int eos_ids[8];
    int num_eos_ids;
    uint64_t seed;                /* draws the seeds of requests that bring none */
    bool disable_prefix_caching;  /* every prompt is computed whole */
    bool disable_chunked_prefill; /* a prompt runs whole in one step (the budget must hold it) */
    bool serial_steps;            /* one step in flight, not FOLIO_POLICY_MAX_INFLIGHT */
    /* > 0: a step's prompt tokens are as many as the worker ran in this time in the last steps
     * (their results' backend_ns); 0: the token budget alone. Chunked prefill only. */
    double step_target_seconds;
    double (*clock)(void);         /* seconds, for queue times; NULL: none kept */
    struct folio_spec_config spec; /* speculative decoding (on: n-gram drafts) */
};

/* A request as Submit carries it (the caller keeps the arrays). */
struct folio_request {
    uint64_t request_id;
    uint32_t frontend_id;
    const int32_t *prompt;
    int num_prompt;
    struct folio_seq_params params;
};

/* One token event, handed to the emit callback; the arrays live until it returns. */
struct folio_token_event {
    uint64_t request_id;
    uint32_t frontend_id;
    int num_tokens;
    const int32_t *token_ids;
    const float *logprobs;
    int num_top; /* per token */
    const int32_t *top_ids;
    const float *top_logprobs;
    enum folio_finish_reason finish;
    uint32_t status; /* HTTP status for REJECTED / ERROR */
    uint32_t prompt_tokens, completion_tokens, cached_tokens;
    uint32_t retry_after_s;
    const char *message; /* NULL or NUL-terminated */
    /* Prompt logprobs: the next prompt tokens' logprobs, in order, each once
     * (num_top top logprobs each). */
    int num_prompt_lp;
    const int32_t *prompt_ids;
    const float *prompt_logprobs;
    const int32_t *prompt_top_ids;
    const float *prompt_top_logprobs;
};

typedef void (*folio_emit_fn)(void *ctx, const struct folio_token_event *ev);

struct folio_policy_stats {
    int num_waiting, num_running;
    int kv_blocks_total, kv_blocks_used;
    int inflight_steps;
    int64_t pending_prompt_tokens;
    uint64_t prefix_cache_queries, prefix_cache_hits; /* in tokens, as vLLM counts */
    uint64_t num_preemptions;
    uint64_t steps;
    uint64_t requests_finished, requests_rejected, requests_aborted;
    uint64_t prompt_tokens_total, generation_tokens_total;
    uint64_t tokens_discarded;       /* sampled one step past a stop */
    uint64_t prompt_tokens_computed; /* prompt tokens the worker ran (prefill work, recomputes
                                        included; prefix-cache hits excluded) */
    /* submit to first admission, over folio_queue_time_bounds (+Inf last) */
    uint64_t queue_time_counts[FOLIO_QUEUE_TIME_BUCKETS + 1];
    double queue_time_sum;
    /* Speculative decoding, as vLLM counts it: verify steps' sequences with drafts, their
     * drafts, the drafts accepted, and those accepted at each draft position; Folio's own:
     * sequences whose low acceptance turned their drafts off, and steps whose batch was too
     * large to draft. */
    uint64_t spec_num_drafts, spec_num_draft_tokens, spec_num_accepted_tokens;
    uint64_t spec_accepted_per_pos[FOLIO_MAX_DRAFT_TOKENS];
    uint64_t spec_seqs_disabled, spec_steps_batch_off;
};

struct folio_policy;

int folio_policy_create(const struct folio_policy_config *cfg, folio_emit_fn emit, void *emit_ctx,
                        struct folio_policy **out, char *err, size_t errlen);
void folio_policy_destroy(struct folio_policy *p);

/* Queues a request, or answers it at once with a REJECTED event: 400 for a
 * prompt that cannot fit the model, 429 (with retry_after_s) past the
 * waiting-queue limits, 409 for a request id already live. */
void folio_policy_submit(struct folio_policy *p, const struct folio_request *r);

/* Ends the request with an ABORT event; its blocks are freed once no step in
 * flight uses it. Unknown ids (already finished) are ignored. */
void folio_policy_abort(struct folio_policy *p, uint64_t request_id);

/* Ends every live request of this frontend without an event (it is gone). */
void folio_policy_drop_frontend(struct folio_policy *p, uint32_t frontend_id);

/* True when a step can be planned now: fewer than FOLIO_POLICY_MAX_INFLIGHT
 * in flight and some sequence has work that fits. */
bool folio_policy_has_work(const struct folio_policy *p);

/* Plans the next step into the policy's plan buffer. Returns the number of
 * sequences (0: nothing to run, nothing recorded) and sets *rec / *len to
 * the encoded plan record (valid until the next call). */
int folio_policy_plan(struct folio_policy *p, uint64_t plan_unix_ns, const void **rec, size_t *len);

/* The largest plan record this configuration can produce (ring sizing). */
size_t folio_policy_max_plan_bytes(const struct folio_policy *p);

/* Applies the oldest in-flight step's result: tokens to their sequences, stop
 * checks, events. -1 with a message when it does not match that step. */
int folio_policy_apply_result(struct folio_policy *p, const struct folio_result_view *v, char *err,
                              size_t errlen);

/* Every live request ends with an ERROR event (status, message); every step
 * in flight is void, every block free and the prefix cache empty (a new
 * worker's pool holds nothing). */
void folio_policy_fail_all(struct folio_policy *p, uint32_t status, const char *message);

/* The worker died: as fail_all, except that a request that has sent nothing
 * to its frontend goes back to the front of the waiting queue, once, to run
 * on the next worker. Its client cannot tell it from a request that arrived
 * during the restart, and the scheduler cannot tell it either: a request can
 * be planned onto a worker that is already dead but not yet reaped. A request
 * caught by a second death fails, so one that kills workers cannot loop. */
void folio_policy_worker_lost(struct folio_policy *p, uint32_t status, const char *message);

/* No request live and no step in flight. */
bool folio_policy_idle(const struct folio_policy *p);
int folio_policy_inflight(const struct folio_policy *p);

void folio_policy_stats(const struct folio_policy *p, struct folio_policy_stats *s);

/* A policy rebuilt for a new worker's pool goes on from the old one's
 * counters (st, from folio_policy_stats); the gauges stay its own. */
void folio_policy_continue_stats(struct folio_policy *p, const struct folio_policy_stats *st);

/* Checks the books (tests): block references equal what the sequences hold,
 * slots unique, queues consistent. 0, or -1 with what is wrong. */
int folio_policy_check(const struct folio_policy *p, char *err, size_t errlen);

/* The longest sequence this policy runs: the configured length, capped by
 * what the KV pool can hold (a longer one could never run, even alone). */
int folio_policy_max_model_len(const struct folio_policy *p);

#endif
