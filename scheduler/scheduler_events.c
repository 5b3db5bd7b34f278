/* The scheduler's worker and frontend event handling: loading and supervising the worker, and the
 * frontends' submits, aborts, registrations and status. */
#include "scheduler.h"
#include "scheduler_internal.h"

#include <errno.h>
#include <limits.h>
#include <nng/nng.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "folio.pb-c.h"
#include "seq_params_codec.h"
#include "frontend_links.h"
#include "ipc_records.h"
#include "log.h"
#include "policy.h"
#include "process_rss.h"
#include "sampling_params.h"
#include "shm_ring.h"
#include "worker_supervisor.h"
#include "clock.h"

/* The policy's token events, each to its frontend's ring. */
void sched_on_event(void *ctx, const struct folio_token_event *ev)
{
    struct sched *s = ctx;
    if (ev->finish != FOLIO_FINISH_NONE)
        folio_log_debug(ev->request_id, "finish %d status %u: %u prompt, %u completion tokens%s%s",
                        ev->finish, ev->status, ev->prompt_tokens, ev->completion_tokens,
                        ev->message ? ": " : "", ev->message ? ev->message : "");
    folio_links_send(&s->links, ev);
}

/* ---- the worker ------------------------------------------------------------ */

void sched_build_worker_argv(struct sched *s)
{
    const struct folio_scheduler_options *o = s->o;
    struct folio_worker_supervisor *ws = &s->ws;
    folio_ws_arg(ws, o->worker_bin);
    folio_ws_arg(ws, "--backend");
    folio_ws_arg(ws, o->simulate ? "sim" : o->backend);
    if (o->model_dir) {
        folio_ws_arg(ws, "--model");
        folio_ws_arg(ws, o->model_dir);
    }
    folio_ws_arg(ws, "--plan-ring");
    folio_ws_arg(ws, s->plan_name);
    folio_ws_arg(ws, "--result-ring");
    folio_ws_arg(ws, s->result_name);
    folio_ws_arg(ws, "--ctl-url");
    folio_ws_arg(ws, s->worker_url);
    folio_ws_arg(ws, "--max-seqs");
    folio_ws_argf(ws, "%d", o->max_num_seqs);
    folio_ws_arg(ws, "--max-num-tokens");
    folio_ws_argf(ws, "%d", s->pcfg.max_num_batched_tokens);
    folio_ws_arg(ws, "--num-kv-blocks");
    folio_ws_argf(ws, "%d", o->num_kv_blocks);
    folio_ws_arg(ws, "--gpu-memory-utilization");
    folio_ws_argf(ws, "%g", o->gpu_memory_utilization);
    folio_ws_arg(ws, "--cpu-kv-bytes");
    folio_ws_argf(ws, "%llu", (unsigned long long)o->cpu_kv_bytes);
    folio_ws_arg(ws, "--threads");
    folio_ws_argf(ws, "%d", o->threads);
    if (o->enforce_eager)
        folio_ws_arg(ws, "--enforce-eager");
    if (s->pcfg.spec.on) { /* the shape of the worker's verify graphs */
        folio_ws_arg(ws, "--num-speculative-tokens");
        folio_ws_argf(ws, "%d", s->pcfg.spec.num_tokens);
    }
    if (o->quantization && !o->simulate) {
        folio_ws_arg(ws, "--quantization");
        folio_ws_arg(ws, o->quantization);
    }
    if (o->kv_cache_dtype && !o->simulate) {
        folio_ws_arg(ws, "--kv-cache-dtype");
        folio_ws_arg(ws, o->kv_cache_dtype);
    }
    if (o->tensor_parallel_size > 1) {
        folio_ws_arg(ws, "--tensor-parallel-size");
        folio_ws_argf(ws, "%d", o->tensor_parallel_size);
    }
    if (o->simulate) {
        folio_ws_arg(ws, "--sim-time-scale");
        folio_ws_argf(ws, "%g", o->sim_time_scale);
        folio_ws_arg(ws, "--sim-vocab");
        folio_ws_argf(ws, "%d", s->pcfg.vocab_size);
        folio_ws_arg(ws, "--sim-eos-id");
        folio_ws_argf(ws, "%d", s->pcfg.num_eos_ids ? s->pcfg.eos_ids[0] : -1);
        folio_ws_arg(ws, "--sim-eos-probability");
        folio_ws_argf(ws, "%g", o->sim_eos_probability);
    }
}

/* A new plan-ring writer epoch: plans written before it are stale to the
 * worker (the ring drops them, and a worker skips the epoch it found when it
 * attached). Returns -1, having ended the loop, when the ring is gone. */
static int new_plan_epoch(struct sched *s)
{
    char err[256];
    folio_ring_close(s->plan_writer);
    s->plan_writer = NULL;
    if (folio_ring_attach_writer(s->plan_name, &s->plan_writer, err, sizeof err) != 0) {
        folio_log_error(0, "cannot re-attach the plan ring: %s", err);
        s->exit_status = 1;
        s->done = true;
        return -1;
    }
    return 0;
}

/* The worker is gone: end what it had (a request that has sent nothing yet
 * waits for the next worker), drop its stale records, back off. */
static void worker_lost(struct sched *s, const char *why)
{
    char msg[600];
    snprintf(msg, sizeof msg, "%s", why);
    if (s->draining) {
        folio_log_error(0, "%s: ending every request in flight", why);
        folio_policy_fail_all(s->policy, 503, msg);
    } else {
        folio_log_error(0, "%s: ending the requests that have had output, re-queueing the rest",
                        why);
        folio_policy_worker_lost(s->policy, 503, msg);
    }
    s->timing_count = 0;
    s->worker_rss_bytes = 0; /* until its successor's first heartbeat */
    /* Results the dead worker left are void, and so are the plans it had
     * not read. */
    char err[256];
    struct folio_ring_record rec;
    while (folio_ring_peek(s->result_reader, &rec, err, sizeof err) == 1)
        folio_ring_release(s->result_reader);
    if (new_plan_epoch(s) != 0)
        return;
    if (s->draining) {
        s->done = true; /* nothing left to drain */
        return;
    }
    folio_ws_schedule_restart(&s->ws, folio_mono_ns(), why);
}

void sched_worker_kill_and_lose(struct sched *s, const char *why)
{
    if (s->ws.pid > 0) {
        kill(s->ws.pid, SIGKILL);
        char ignored[128];
        while (!folio_ws_reap(&s->ws, ignored, sizeof ignored))
            usleep(1000);
    }
    worker_lost(s, why);
}

/* The KV cache's element type the worker was asked for, as logs and /metrics name it. */
static const char *kv_dtype_name(const struct folio_scheduler_options *o)
{
    return o->kv_cache_dtype && strncmp(o->kv_cache_dtype, "fp8", 3) == 0 ? "fp8" : "auto";
}

static void handle_load_reply(struct sched *s, const Folio__LoadReply *r)
{
    if (s->ws.state != FOLIO_WORKER_STARTING) {
        /* An external worker's restart can be quicker than the heartbeat
         * timeout: a LoadReply while one is ready means it was replaced. */
        if (!s->ws.external || s->ws.state == FOLIO_WORKER_STOPPED || s->draining)
            return;
        if (s->ws.state == FOLIO_WORKER_READY)
            worker_lost(s, "a new worker connected: the previous one is gone");
        char err[256];
        if (s->done || folio_ws_start(&s->ws, folio_mono_ns(), err, sizeof err) != 0)
            return;
    }
    if (!r->ok) {
        char why[600];
        snprintf(why, sizeof why, "worker failed to load: %s", r->error ? r->error : "?");
        if (!s->ws.ever_ready) {
            /* A bad model directory is a configuration error: say so and stop
             * rather than restart in a loop. */
            folio_log_error(0, "%s", why);
            s->exit_status = FOLIO_EXIT_CONFIG;
            s->done = true;
            return;
        }
        sched_worker_kill_and_lose(s, why);
        return;
    }
    if (r->vocab_size != s->pcfg.vocab_size && !s->o->simulate) {
        char why[256];
        snprintf(why, sizeof why, "worker reports vocabulary %d, config.json says %d",
                 r->vocab_size, s->pcfg.vocab_size);
        folio_log_error(0, "%s", why);
        s->exit_status = 1;
        s->done = true;
        return;
    }
    if (r->num_kv_blocks != s->pcfg.num_kv_blocks) {
        /* The pool is the worker's to size, so the policy is rebuilt to
         * match. Only requests that waited for a restarted worker can be in
         * it (nothing is admitted before the first worker is ready): they
         * end with a clear error rather than vanish. */
        folio_policy_fail_all(s->policy, 503, "the restarted worker has a different KV pool");
        struct folio_policy_stats st;
        folio_policy_stats(s->policy, &st);
        struct folio_policy_config cfg = s->pcfg;
        cfg.num_kv_blocks = r->num_kv_blocks;
        struct folio_policy *np;
        char err[256];
        if (folio_policy_create(&cfg, sched_on_event, s, &np, err, sizeof err) != 0) {
            folio_log_error(0, "worker's pool of %d blocks: %s", r->num_kv_blocks, err);
            s->exit_status = 1;
            s->done = true;
            return;
        }
        if (folio_policy_max_plan_bytes(np) + 64 > folio_ring_max_record(s->plan_writer)) {
            folio_log_error(0, "plans for %d KV blocks do not fit the plan ring", r->num_kv_blocks);
            folio_policy_destroy(np);
            s->exit_status = 1;
            s->done = true;
            return;
        }
        folio_policy_continue_stats(np, &st); /* /metrics' counters never go back */
        folio_policy_destroy(s->policy);
        s->policy = np;
        s->pcfg = cfg;
    }
    s->worker_prompt_logprobs = r->prompt_logprobs;
    s->worker_grammar = r->grammar;
    if (s->pcfg.spec.on && !r->verify_drafts) {
        /* Never silently off: the operator asked for it. Exit 2 is a misconfiguration, which
         * folio serve does not restart. */
        folio_log_error(0,
                        "--speculative-config: the %s backend does not verify drafts (its worker's "
                        "LoadReply says so); serve without it or with --backend cpu",
                        s->o->simulate ? "simulated" : s->o->backend);
        s->exit_status = 2;
        s->done = true;
        return;
    }
    /* The worker skips plans of the epoch it attached in: an external
     * worker may attach while its predecessor's plans are still written. */
    if (new_plan_epoch(s) != 0)
        return;
    folio_ws_ready(&s->ws);
    folio_ws_heartbeat(&s->ws, folio_mono_ns());
    if (s->ws.external)
        folio_log_info(0, "external worker ready: %d KV blocks (%d tokens, kv cache dtype %s)",
                       r->num_kv_blocks, r->num_kv_blocks * 16, kv_dtype_name(s->o));
    else
        folio_log_info(0, "worker pid %d ready: %d KV blocks (%d tokens, kv cache dtype %s)",
                       (int)s->ws.pid, r->num_kv_blocks, r->num_kv_blocks * 16,
                       kv_dtype_name(s->o));
}

void sched_handle_worker_ctl(struct sched *s)
{
    for (;;) {
        nng_msg *m;
        if (nng_recvmsg(s->worker_sock, &m, NNG_FLAG_NONBLOCK) != 0)
            return;
        Folio__Envelope *env =
            folio__envelope__unpack(NULL, nng_msg_len(m), (const uint8_t *)nng_msg_body(m));
        nng_msg_free(m);
        if (!env) {
            folio_log_warn(0, "worker-ctl: a message that is not a folio.Envelope");
            continue;
        }
        if (env->body_case == FOLIO__ENVELOPE__BODY_LOAD_REPLY)
            handle_load_reply(s, env->load_reply);
        else if (env->body_case == FOLIO__ENVELOPE__BODY_HEARTBEAT &&
                 folio_ws_heartbeat_is_ours(&s->ws, env->heartbeat->pid)) {
            folio_ws_heartbeat(&s->ws, folio_mono_ns());
            s->worker_rss_bytes = env->heartbeat->rss_bytes;
        }
        folio__envelope__free_unpacked(env, NULL);
    }
}

void sched_supervise(struct sched *s)
{
    char why[256];
    if (folio_ws_reap(&s->ws, why, sizeof why)) {
        if (s->ws.state == FOLIO_WORKER_STARTING && !s->ws.ever_ready && !s->draining) {
            /* Died before its LoadReply on the first start: a configuration
             * problem (it printed why); do not loop. */
            folio_log_error(0, "%s before it loaded", why);
            s->exit_status = FOLIO_EXIT_CONFIG;
            s->done = true;
            return;
        }
        worker_lost(s, why);
        return;
    }
    uint64_t now = folio_mono_ns();
    if (folio_ws_silent(&s->ws, now)) {
        snprintf(why, sizeof why, "worker stopped answering (no heartbeat for %.1f s)",
                 (now - s->ws.last_heartbeat_ns) / 1e9);
        sched_worker_kill_and_lose(s, why);
        return;
    }
    /* Heartbeats come from a thread of the worker, so a step stuck on the
     * device (a hung kernel, a wedged GPU) still looks alive: the age of the
     * oldest step in flight tells. */
    if (s->ws.state == FOLIO_WORKER_READY && s->timing_count > 0 &&
        s->o->step_timeout_seconds > 0) {
        double age = (now - s->timing[s->timing_head].plan_start_ns) / 1e9;
        if (age > s->o->step_timeout_seconds) {
            snprintf(why, sizeof why, "worker stuck: a step has run for %.1f s (--step-timeout %g)",
                     age, s->o->step_timeout_seconds);
            sched_worker_kill_and_lose(s, why);
            return;
        }
    }
    if (s->ws.state == FOLIO_WORKER_BACKOFF && now >= s->ws.restart_at_ns && !s->draining) {
        char err[256];
        if (folio_ws_start(&s->ws, now, err, sizeof err) != 0)
            folio_ws_schedule_restart(&s->ws, now, err);
    }
}

/* ---- frontends: submit, abort, register, status ------------------------------- */

/* Answers a Submit at once with a REJECTED event. */
static void submit_reject(struct sched *s, const Folio__Submit *m, uint32_t status,
                          uint32_t retry_after_s, const char *msg)
{
    struct folio_token_event ev = {.request_id = m->request_id,
                                   .frontend_id = m->frontend_id,
                                   .finish = FOLIO_FINISH_REJECTED,
                                   .status = status,
                                   .retry_after_s = retry_after_s,
                                   .message = msg};
    folio_links_send(&s->links, &ev);
}

/* Submit's sampling fields into the policy's form; proto3 sends 0 for an
 * unset field, and 0 means "off" only where 0 is off. */
static void handle_submit(struct sched *s, const Folio__Submit *m)
{
    if (!folio_links_known(&s->links, m->frontend_id)) {
        folio_log_warn(m->request_id, "submit from frontend %u, which has not registered",
                       m->frontend_id);
        return;
    }
    struct folio_request r = {
        .request_id = m->request_id,
        .frontend_id = m->frontend_id,
        .prompt = m->prompt_token_ids,
        .num_prompt = (int)m->n_prompt_token_ids,
    };
    struct folio_logit_bias *bias = NULL;
    char why[256];
    int rc = folio_seq_params_from_submit(m, &r.params, &bias, why, sizeof why);
    if (rc != 0) {
        submit_reject(s, m, rc == -2 ? 503 : 400, rc == -2, why);
        return;
    }
    /* The worker checks these too, but a bad value there fails a whole step:
     * refuse it here, for this request alone. */
    if (folio_sampling_params_check(&r.params.sampling, why, sizeof why) != 0) {
        submit_reject(s, m, 400, 0, why);
        free(bias);
        return;
    }
    /* Before any worker is ready the request is refused with a 503 below. */
    if (r.params.prompt_logprobs && s->ws.ever_ready && !s->worker_prompt_logprobs) {
        submit_reject(s, m, 400, 0,
                      "'echo' with 'logprobs' (the prompt tokens' logprobs) is computed by the "
                      "CPU backend only; this server runs another");
        free(bias);
        return;
    }
    if (r.params.grammar.on && s->ws.ever_ready && !s->worker_grammar) {
        submit_reject(s, m, 400, 0,
                      "structured outputs (response_format, structured_outputs, guided_*) are "
                      "not available on this server: its worker's backend does not apply "
                      "grammars (the sim backend's does not)");
        free(bias);
        return;
    }
    const char *refusal = NULL;
    if (s->draining)
        refusal = "the server is shutting down";
    else if (s->ws.state != FOLIO_WORKER_READY &&
             (s->ws.state == FOLIO_WORKER_STOPPED || !s->ws.ever_ready))
        /* No worker has loaded yet (the KV pool, and so the policy, is not
         * sized), or it is stopped for good. A worker that is restarting
         * after a crash only delays the request: it waits, bounded by
         * admission control, and runs once the new worker is ready. */
        refusal = s->ws.state_text[0] ? s->ws.state_text : "the worker is not ready";
    if (refusal) {
        char msg[600];
        snprintf(msg, sizeof msg, "service unavailable: %s", refusal);
        submit_reject(s, m, 503, 1, msg);
    } else {
        folio_log_debug(m->request_id, "submit: %d prompt tokens, max_tokens %d", r.num_prompt,
                        r.params.max_tokens);
        folio_policy_submit(s->policy, &r);
    }
    free(bias);
}

void sched_handle_submits(struct sched *s)
{
    for (int i = 0; i < MAX_SUBMITS_PER_TURN; i++) {
        nng_msg *m;
        if (nng_recvmsg(s->submit_sock, &m, NNG_FLAG_NONBLOCK) != 0)
            return;
        Folio__Envelope *env =
            folio__envelope__unpack(NULL, nng_msg_len(m), (const uint8_t *)nng_msg_body(m));
        nng_msg_free(m);
        if (!env) {
            folio_log_warn(0, "submit socket: a message that is not a folio.Envelope");
            continue;
        }
        if (env->body_case == FOLIO__ENVELOPE__BODY_SUBMIT)
            handle_submit(s, env->submit);
        else if (env->body_case == FOLIO__ENVELOPE__BODY_ABORT)
            folio_policy_abort(s->policy, env->abort->request_id);
        else
            folio_log_warn(0, "submit socket: unexpected message kind %d", env->body_case);
        folio__envelope__free_unpacked(env, NULL);
    }
}

static void reply(struct sched *s, Folio__Envelope *env)
{
    size_t n = folio__envelope__get_packed_size(env);
    nng_msg *m;
    if (nng_msg_alloc(&m, n) != 0)
        return;
    folio__envelope__pack(env, nng_msg_body(m));
    /* Not NONBLOCK: a REP pipe can still be busy with the previous reply
     * when a quick client's next request arrives, and a non-blocking send
     * then drops the answer (the client times out). The socket's send
     * timeout bounds the wait. */
    int rv = nng_sendmsg(s->ctl_sock, m, 0);
    if (rv != 0) {
        folio_log_warn(0, "reply on the ctl socket lost: %s", nng_strerror(rv));
        nng_msg_free(m);
    }
}

/* Until a worker has said how big its pool is, the configured length; then
 * the policy's, which the pool caps, so that frontends refuse a request
 * that could never fit with a 400 instead of letting it wait. */
static int32_t served_max_model_len(const struct sched *s)
{
    return s->ws.ever_ready ? folio_policy_max_model_len(s->policy) : s->pcfg.max_model_len;
}

static void handle_register(struct sched *s, const Folio__Register *r)
{
    Folio__RegisterReply rr = FOLIO__REGISTER_REPLY__INIT;
    char err[512] = "";
    if (r->role != FOLIO__REGISTER__ROLE__FRONTEND || !r->ring_name || !r->ring_name[0]) {
        snprintf(err, sizeof err, "only frontends register here, with their ring_name");
    } else if (r->version && strcmp(r->version, FOLIO_VERSION) != 0) {
        snprintf(err, sizeof err, "version %s, the scheduler is %s", r->version, FOLIO_VERSION);
    } else if (folio_links_same_process(&s->links, r->id, r->pid, r->epoch)) {
        /* The same process again: it missed a StatusReply (this loop was
         * late) and still waits on its requests, which go on. */
        folio_log_info(0, "frontend %u (pid %u) registered again; its requests go on", r->id,
                       r->pid);
    } else {
        /* A frontend registering again restarted, or gave its requests up:
         * they have no reader any more. */
        folio_policy_drop_frontend(s->policy, r->id);
        if (folio_links_register(&s->links, r->id, r->pid, r->epoch, r->ring_name, err,
                                 sizeof err) == 0)
            folio_log_info(0, "frontend %u (pid %u) registered, ring %s", r->id, r->pid,
                           r->ring_name);
    }
    rr.ok = err[0] == 0;
    rr.error = err;
    rr.scheduler_epoch = s->epoch;
    rr.model_name = s->model_name;
    rr.max_model_len = served_max_model_len(s);
    rr.vocab_size = s->pcfg.vocab_size;
    if (!rr.ok)
        folio_log_warn(0, "register of frontend %u refused: %s", r->id, err);
    Folio__Envelope env = FOLIO__ENVELOPE__INIT;
    env.body_case = FOLIO__ENVELOPE__BODY_REGISTER_REPLY;
    env.register_reply = &rr;
    reply(s, &env);
}

static void handle_status(struct sched *s)
{
    struct folio_policy_stats st;
    folio_policy_stats(s->policy, &st);
    Folio__StatusReply r = FOLIO__STATUS_REPLY__INIT;
    r.worker_ready = s->ws.state == FOLIO_WORKER_READY && !s->draining;
    r.worker_state = s->draining ? "draining" : s->ws.state_text;
    r.num_waiting = (uint32_t)st.num_waiting;
    r.num_running = (uint32_t)st.num_running;
    r.kv_blocks_total = (uint32_t)st.kv_blocks_total;
    r.kv_blocks_used = (uint32_t)st.kv_blocks_used;
    r.kv_cache_dtype = (char *)kv_dtype_name(s->o);
    r.prefix_cache_queries = st.prefix_cache_queries;
    r.prefix_cache_hits = st.prefix_cache_hits;
    r.num_preemptions = st.num_preemptions;
    r.steps = st.steps;
    r.step_plan_seconds_total = s->plan_s;
    r.step_gpu_seconds_total = s->backend_s;
    r.step_ipc_seconds_total = s->ipc_s;
    r.n_loop_seconds_total = FOLIO_LOOP_PHASES;
    r.loop_seconds_total = s->loop_s;
    r.worker_restarts = s->ws.restarts;
    r.requests_finished = st.requests_finished;
    r.requests_rejected = st.requests_rejected;
    r.prompt_tokens_total = st.prompt_tokens_total;
    r.generation_tokens_total = st.generation_tokens_total;
    r.n_queue_time_counts = FOLIO_QUEUE_TIME_BUCKETS + 1;
    r.queue_time_counts = st.queue_time_counts;
    r.queue_time_sum = st.queue_time_sum;
    r.max_model_len = s->ws.ever_ready ? served_max_model_len(s) : 0;
    r.scheduler_epoch = s->epoch;
    r.status_seq = ++s->status_replies;
    r.scheduler_rss_bytes = folio_process_rss_bytes();
    r.worker_rss_bytes = s->worker_rss_bytes;
    r.spec_num_drafts = st.spec_num_drafts;
    r.spec_num_draft_tokens = st.spec_num_draft_tokens;
    r.spec_num_accepted_tokens = st.spec_num_accepted_tokens;
    r.n_spec_accepted_per_pos = s->pcfg.spec.on ? (size_t)s->pcfg.spec.num_tokens : 0;
    r.spec_accepted_per_pos = st.spec_accepted_per_pos;
    r.spec_seqs_disabled = st.spec_seqs_disabled;
    r.spec_steps_batch_off = st.spec_steps_batch_off;
    Folio__Envelope env = FOLIO__ENVELOPE__INIT;
    env.body_case = FOLIO__ENVELOPE__BODY_STATUS_REPLY;
    env.status_reply = &r;
    reply(s, &env);
}

void sched_handle_ctl(struct sched *s)
{
    for (;;) {
        nng_msg *m;
        if (nng_recvmsg(s->ctl_sock, &m, NNG_FLAG_NONBLOCK) != 0)
            return;
        Folio__Envelope *env =
            folio__envelope__unpack(NULL, nng_msg_len(m), (const uint8_t *)nng_msg_body(m));
        nng_msg_free(m);
        if (env && env->body_case == FOLIO__ENVELOPE__BODY_REGISTER) {
            handle_register(s, env->register_);
        } else if (env && env->body_case == FOLIO__ENVELOPE__BODY_STATUS_REQUEST) {
            handle_status(s);
        } else {
            /* REP must answer every request. */
            Folio__RegisterReply rr = FOLIO__REGISTER_REPLY__INIT;
            rr.error = "unexpected message on the scheduler's ctl socket";
            Folio__Envelope out = FOLIO__ENVELOPE__INIT;
            out.body_case = FOLIO__ENVELOPE__BODY_REGISTER_REPLY;
            out.register_reply = &rr;
            reply(s, &out);
        }
        if (env)
            folio__envelope__free_unpacked(env, NULL);
    }
}
