#include "scheduler.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/reqrep0/rep.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "folio.pb-c.h"
#include "frontend_links.h"
#include "ipc_records.h"
#include "log.h"
#include "model_config.h"
#include "policy.h"
#include "sampling_params.h"
#include "shm_ring.h"
#include "worker_supervisor.h"
#include "clock.h"

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
    char model_name[256];
    int worker_vocab, worker_max_len;
    uint32_t epoch;

    nng_socket submit_sock, ctl_sock, worker_sock;
    int submit_fd, ctl_fd, worker_fd, sig_fd;
    char submit_url[PATH_MAX + 64], ctl_url[PATH_MAX + 64], worker_url[PATH_MAX + 64];

    char plan_name[256], result_name[256];
    struct folio_ring *plan_owner, *result_owner, *plan_writer, *result_reader;
    size_t plan_capacity, result_capacity;

    struct step_timing timing[FOLIO_POLICY_MAX_INFLIGHT];
    int timing_head, timing_count;
    double plan_s, backend_s, ipc_s;
    uint64_t last_result_ns;

    bool draining;
    uint64_t drain_deadline_ns;
    int exit_status;
    bool done;
};

static void on_event(void *ctx, const struct folio_token_event *ev)
{
    struct sched *s = ctx;
    if (ev->finish != FOLIO_FINISH_NONE)
        folio_log_debug(ev->request_id, "finish %d status %u: %u prompt, %u completion tokens%s%s",
                        ev->finish, ev->status, ev->prompt_tokens, ev->completion_tokens,
                        ev->message ? ": " : "", ev->message ? ev->message : "");
    folio_links_send(&s->links, ev);
}

/* ---- rings ---------------------------------------------------------------- */

/* Prompt logprobs (echo with logprobs) are computed by the CPU backend only. */
static bool prompt_logprobs_supported(const struct folio_scheduler_options *o)
{
    return !o->simulate && o->backend && !strcmp(o->backend, "cpu");
}

static size_t pow2_at_least(size_t n)
{
    size_t c = FOLIO_RING_MIN_CAPACITY;
    while (c < n)
        c <<= 1;
    return c;
}

static int create_rings(struct sched *s, char *err, size_t errlen)
{
    snprintf(s->plan_name, sizeof s->plan_name, "/%s-plan", s->o->instance);
    snprintf(s->result_name, sizeof s->result_name, "/%s-result", s->o->instance);
    /* A record is at most half the ring; two plans in flight and one being
     * written must fit at once. */
    s->plan_capacity = pow2_at_least(4 * (folio_policy_max_plan_bytes(s->policy) + 64));
    /* Prompt logprobs (only the CPU backend computes them) may come with every
     * token of a step. */
    int seqs = s->pcfg.max_num_seqs,
        prompt_lps = prompt_logprobs_supported(s->o) ? s->pcfg.max_num_batched_tokens : 0;
    s->result_capacity = pow2_at_least(
        8 * folio_result_size(seqs, (seqs + prompt_lps) * FOLIO_MAX_LOGPROBS, prompt_lps) + 4096);
    folio_ring_unlink(s->plan_name, err, errlen); /* left by a crashed run */
    folio_ring_unlink(s->result_name, err, errlen);
    if (folio_ring_create(s->plan_name, s->plan_capacity, &s->plan_owner, err, errlen) != 0 ||
        folio_ring_create(s->result_name, s->result_capacity, &s->result_owner, err, errlen) != 0 ||
        folio_ring_attach_writer(s->plan_name, &s->plan_writer, err, errlen) != 0 ||
        folio_ring_attach_reader(s->result_name, &s->result_reader, err, errlen) != 0)
        return -1;
    return 0;
}

static void close_rings(struct sched *s)
{
    folio_ring_close(s->plan_writer);
    folio_ring_close(s->result_reader);
    folio_ring_close(s->plan_owner); /* the owners unlink the names */
    folio_ring_close(s->result_owner);
    s->plan_writer = s->result_reader = s->plan_owner = s->result_owner = NULL;
}

/* ---- the worker ------------------------------------------------------------ */

static void build_worker_argv(struct sched *s)
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
    folio_ws_argf(ws, "%d", o->max_num_batched_tokens);
    folio_ws_arg(ws, "--num-kv-blocks");
    folio_ws_argf(ws, "%d", o->num_kv_blocks);
    folio_ws_arg(ws, "--gpu-memory-utilization");
    folio_ws_argf(ws, "%g", o->gpu_memory_utilization);
    folio_ws_arg(ws, "--cpu-kv-bytes");
    folio_ws_argf(ws, "%llu", (unsigned long long)o->cpu_kv_bytes);
    folio_ws_arg(ws, "--threads");
    folio_ws_argf(ws, "%d", o->threads);
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

/* The worker is gone: end what it had, drop its stale records, back off. */
static void worker_lost(struct sched *s, const char *why)
{
    folio_log_error(0, "%s: ending every request in flight", why);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", why);
    folio_policy_fail_all(s->policy, 503, msg);
    s->timing_count = 0;
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

static void worker_kill_and_lose(struct sched *s, const char *why)
{
    if (s->ws.pid > 0) {
        kill(s->ws.pid, SIGKILL);
        char ignored[128];
        while (!folio_ws_reap(&s->ws, ignored, sizeof ignored))
            usleep(1000);
    }
    worker_lost(s, why);
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
        worker_kill_and_lose(s, why);
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
        if (folio_policy_create(&cfg, on_event, s, &np, err, sizeof err) != 0) {
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
        folio_policy_destroy(s->policy);
        s->policy = np;
        s->pcfg = cfg;
    }
    /* The worker skips plans of the epoch it attached in: an external
     * worker may attach while its predecessor's plans are still written. */
    if (new_plan_epoch(s) != 0)
        return;
    folio_ws_ready(&s->ws);
    folio_ws_heartbeat(&s->ws, folio_mono_ns());
    if (s->ws.external)
        folio_log_info(0, "external worker ready: %d KV blocks (%d tokens)", r->num_kv_blocks,
                       r->num_kv_blocks * 16);
    else
        folio_log_info(0, "worker pid %d ready: %d KV blocks (%d tokens)", (int)s->ws.pid,
                       r->num_kv_blocks, r->num_kv_blocks * 16);
}

static void handle_worker_ctl(struct sched *s)
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
                 folio_ws_heartbeat_is_ours(&s->ws, env->heartbeat->pid))
            folio_ws_heartbeat(&s->ws, folio_mono_ns());
        folio__envelope__free_unpacked(env, NULL);
    }
}

static void supervise(struct sched *s)
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
        worker_kill_and_lose(s, why);
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
            worker_kill_and_lose(s, why);
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
static void submit_sampling(const Folio__Submit *m, struct folio_request *r)
{
    struct folio_plan_seq *sp = &r->sampling;
    sp->top_p = 1;
    sp->repetition_penalty = 1;
    const Folio__SamplingParams *p = m->sampling;
    if (!p)
        return;
    sp->temperature = p->temperature;
    sp->top_k = p->top_k;
    sp->top_p = p->top_p > 0 ? p->top_p : 1;
    sp->min_p = p->min_p;
    sp->repetition_penalty = p->repetition_penalty > 0 ? p->repetition_penalty : 1;
    sp->frequency_penalty = p->frequency_penalty;
    sp->presence_penalty = p->presence_penalty;
    sp->seed = p->seed;
    sp->num_logprobs = p->logprobs;
    r->has_seed = p->has_seed;
}

/* The worker checks these too, but a bad value there fails a whole step:
 * refuse it here, for this request alone. 0, or -1 with why. */
static int submit_check(const struct folio_request *r, char *why, size_t len)
{
    const struct folio_plan_seq *sp = &r->sampling;
    struct folio_sampling_params check = {.temperature = sp->temperature,
                                          .top_k = sp->top_k,
                                          .top_p = sp->top_p,
                                          .min_p = sp->min_p,
                                          .repetition_penalty = sp->repetition_penalty,
                                          .frequency_penalty = sp->frequency_penalty,
                                          .presence_penalty = sp->presence_penalty,
                                          .num_logprobs = sp->num_logprobs};
    return folio_sampling_params_check(&check, why, len);
}

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
        .max_tokens = m->max_tokens,
        .min_tokens = m->min_tokens,
        .stop_ids = m->stop_token_ids,
        .num_stop_ids = (int)m->n_stop_token_ids,
        .ignore_eos = m->ignore_eos,
        .prompt_logprobs = m->prompt_logprobs,
    };
    submit_sampling(m, &r);
    char why[256];
    if (submit_check(&r, why, sizeof why) != 0) {
        submit_reject(s, m, 400, 0, why);
        return;
    }
    if (r.prompt_logprobs && !prompt_logprobs_supported(s->o)) {
        submit_reject(s, m, 400, 0,
                      "'echo' with 'logprobs' (the prompt tokens' logprobs) is computed by the "
                      "CPU backend only; this server runs another");
        return;
    }
    if (m->n_logit_bias_ids != m->n_logit_bias_values) {
        submit_reject(s, m, 400, 0, "logit_bias: as many ids as values are needed");
        return;
    }
    struct folio_logit_bias *bias = NULL;
    if (m->n_logit_bias_ids > 0) {
        bias = malloc(m->n_logit_bias_ids * sizeof *bias);
        if (!bias) {
            submit_reject(s, m, 503, 1, "the scheduler is out of memory");
            return;
        }
        for (size_t i = 0; i < m->n_logit_bias_ids; i++)
            bias[i] = (struct folio_logit_bias){m->logit_bias_ids[i], m->logit_bias_values[i]};
        r.logit_bias = bias;
        r.num_logit_bias = (int)m->n_logit_bias_ids;
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
                        r.max_tokens);
        folio_policy_submit(s->policy, &r);
    }
    free(bias);
}

static void handle_submits(struct sched *s)
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
    } else {
        /* A frontend registering again restarted: its old requests have no
         * reader any more. */
        folio_policy_drop_frontend(s->policy, r->id);
        if (folio_links_register(&s->links, r->id, r->pid, r->ring_name, err, sizeof err) == 0)
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
    r.prefix_cache_queries = st.prefix_cache_queries;
    r.prefix_cache_hits = st.prefix_cache_hits;
    r.num_preemptions = st.num_preemptions;
    r.steps = st.steps;
    r.step_plan_seconds_total = s->plan_s;
    r.step_gpu_seconds_total = s->backend_s;
    r.step_ipc_seconds_total = s->ipc_s;
    r.worker_restarts = s->ws.restarts;
    r.requests_finished = st.requests_finished;
    r.requests_rejected = st.requests_rejected;
    r.prompt_tokens_total = st.prompt_tokens_total;
    r.generation_tokens_total = st.generation_tokens_total;
    r.n_queue_time_counts = FOLIO_QUEUE_TIME_BUCKETS + 1;
    r.queue_time_counts = st.queue_time_counts;
    r.queue_time_sum = st.queue_time_sum;
    r.max_model_len = s->ws.ever_ready ? served_max_model_len(s) : 0;
    Folio__Envelope env = FOLIO__ENVELOPE__INIT;
    env.body_case = FOLIO__ENVELOPE__BODY_STATUS_REPLY;
    env.status_reply = &r;
    reply(s, &env);
}

static void handle_ctl(struct sched *s)
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

/* ---- steps ------------------------------------------------------------------ */

static void collect_results(struct sched *s)
{
    char err[512];
    struct folio_ring_record rec;
    while (folio_ring_peek(s->result_reader, &rec, err, sizeof err) == 1) {
        struct folio_result_view v;
        if (folio_result_decode(rec.data, rec.len, &v, err, sizeof err) != 0) {
            folio_ring_release(s->result_reader);
            worker_kill_and_lose(s, err);
            return;
        }
        if (v.hdr->status != 0) {
            const char *msg = (const char *)rec.data + sizeof *v.hdr;
            size_t n = rec.len - sizeof *v.hdr;
            char why[600];
            snprintf(why, sizeof why, "worker failed in step %llu: %.*s",
                     (unsigned long long)v.hdr->step_id, (int)(n < 500 ? n : 500), msg);
            folio_ring_release(s->result_reader);
            worker_kill_and_lose(s, why);
            return;
        }
        if (s->timing_count > 0) {
            /* A pipelined step waits behind the one before it: its round
             * trip starts when it was planned or when the previous result
             * came back, whichever is later, so that the wait is not
             * counted as IPC. */
            struct step_timing *t = &s->timing[s->timing_head];
            uint64_t now = folio_mono_ns(), start = t->plan_start_ns + t->plan_ns;
            if (s->last_result_ns > start)
                start = s->last_result_ns;
            s->last_result_ns = now;
            double plan = t->plan_ns / 1e9, backend = v.hdr->backend_ns / 1e9;
            double ipc = (now - start) / 1e9 - backend;
            s->plan_s += plan;
            s->backend_s += backend;
            s->ipc_s += ipc > 0 ? ipc : 0;
            s->timing_head = (s->timing_head + 1) % FOLIO_POLICY_MAX_INFLIGHT;
            s->timing_count--;
        }
        int rc = folio_policy_apply_result(s->policy, &v, err, sizeof err);
        folio_ring_release(s->result_reader);
        if (rc != 0) {
            worker_kill_and_lose(s, err);
            return;
        }
    }
}

static void plan_steps(struct sched *s)
{
    while (folio_policy_has_work(s->policy) && !folio_links_over_bound(&s->links)) {
        uint64_t t0 = folio_mono_ns();
        const void *rec;
        size_t len;
        if (folio_policy_plan(s->policy, folio_unix_ns(), &rec, &len) == 0)
            return;
        char err[256];
        int rc = folio_ring_try_write(s->plan_writer, rec, (uint32_t)len, err, sizeof err);
        if (rc != 1) {
            /* The ring holds four plans and at most two are unread: a full
             * ring means the worker is not reading. */
            worker_kill_and_lose(s, rc == 0 ? "worker stopped reading step plans" : err);
            return;
        }
        struct step_timing *t =
            &s->timing[(s->timing_head + s->timing_count) % FOLIO_POLICY_MAX_INFLIGHT];
        t->plan_start_ns = t0;
        t->plan_ns = folio_mono_ns() - t0;
        s->timing_count++;
    }
}

/* ---- signals and waiting -------------------------------------------------------- */

static void begin_drain(struct sched *s)
{
    if (s->draining)
        return;
    s->draining = true;
    s->drain_deadline_ns = folio_mono_ns() + (uint64_t)(s->o->drain_seconds * 1e9);
    folio_log_info(0, "draining: no new requests, up to %.0f s for the running ones",
                   s->o->drain_seconds);
}

static void handle_signals(struct sched *s)
{
    struct signalfd_siginfo si;
    while (read(s->sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
            begin_drain(s);
        /* SIGCHLD: supervise() reaps on every turn. */
    }
}

static void wait_for_something(struct sched *s)
{
    if (s->ws.state == FOLIO_WORKER_READY && folio_policy_inflight(s->policy) > 0) {
        char err[256];
        folio_ring_wait(s->result_reader, 1000000, err, sizeof err);
        return;
    }
    struct pollfd fds[4] = {{.fd = s->submit_fd, .events = POLLIN},
                            {.fd = s->ctl_fd, .events = POLLIN},
                            {.fd = s->worker_fd, .events = POLLIN},
                            {.fd = s->sig_fd, .events = POLLIN}};
    /* Backlogged events are retried soon; otherwise wake for heartbeat
     * checks, restarts and the drain deadline. */
    int timeout = folio_links_pending(&s->links) ? 1 : 100;
    poll(fds, 4, timeout);
}

/* ---- set-up ----------------------------------------------------------------------- */

static int open_socket(nng_socket *sock, int (*open_fn)(nng_socket *), const char *url, int *fd,
                       char *err, size_t errlen)
{
    int rv = open_fn(sock);
    if (rv == 0 && !strncmp(url, "ipc://", 6))
        unlink(url + 6); /* a socket file left by a crashed run */
    if (rv == 0)
        rv = nng_listen(*sock, url, NULL, 0);
    if (rv == 0)
        rv = nng_socket_get_int(*sock, NNG_OPT_RECVFD, fd);
    if (rv != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", url, nng_strerror(rv));
        return -1;
    }
    return 0;
}

static int load_model_config(struct sched *s, char *err, size_t errlen)
{
    const struct folio_scheduler_options *o = s->o;
    struct folio_policy_config *c = &s->pcfg;
    c->max_num_seqs = o->max_num_seqs;
    c->max_num_batched_tokens = o->max_num_batched_tokens;
    c->max_waiting_requests = o->max_waiting_requests;
    c->max_pending_prompt_tokens = o->max_pending_prompt_tokens;
    c->seed = o->seed;
    c->disable_prefix_caching = o->disable_prefix_caching;
    c->clock = folio_mono_s;
    struct folio_model_config mc;
    if (o->model_dir) {
        if (folio_model_config_load(o->model_dir, &mc, err, errlen) != 0)
            return -1;
        c->vocab_size = mc.vocab_size;
        c->max_model_len = mc.max_position_embeddings;
        c->num_eos_ids = mc.num_eos_token_ids < 8 ? mc.num_eos_token_ids : 8;
        memcpy(c->eos_ids, mc.eos_token_ids, (size_t)c->num_eos_ids * sizeof(int));
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s", o->model_dir);
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/')
            path[--n] = 0;
        snprintf(s->model_name, sizeof s->model_name, "%s", basename(path));
    } else {
        c->vocab_size = 32000;
        c->max_model_len = 4096;
        c->eos_ids[0] = 2;
        c->num_eos_ids = 1;
        snprintf(s->model_name, sizeof s->model_name, "simulated");
    }
    if (o->max_model_len > c->max_model_len) {
        snprintf(err, errlen, "--max-model-len %d is beyond the model's context (%d tokens)",
                 o->max_model_len, c->max_model_len);
        return -1;
    }
    if (o->max_model_len > 0)
        c->max_model_len = o->max_model_len;
    /* Only now is the context served known, against which a sliding window is checked. */
    if (o->model_dir && folio_model_config_check_context(&mc, c->max_model_len, err, errlen) != 0) {
        size_t n = strlen(err);
        if (n < errlen)
            snprintf(err + n, errlen - n, " (--max-model-len)");
        return -1;
    }
    /* Provisional until the worker's LoadReply says how big its pool is. */
    c->num_kv_blocks = o->num_kv_blocks > 0 ? o->num_kv_blocks : 1;
    return 0;
}

int folio_scheduler_run(const struct folio_scheduler_options *o)
{
    static struct sched sched; /* large (the link table); one per process */
    struct sched *s = &sched;
    memset(s, 0, sizeof *s);
    s->o = o;
    s->epoch = (uint32_t)(folio_unix_ns() / 1000000);
    s->submit_fd = s->ctl_fd = s->worker_fd = s->sig_fd = -1;
    char err[1024];
    int status = 1;

    /* Blocked before any thread exists (nng starts some), so that every
     * thread inherits the mask and the signals reach only the signalfd. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGCHLD);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (load_model_config(s, err, sizeof err) != 0 ||
        folio_policy_create(&s->pcfg, on_event, s, &s->policy, err, sizeof err) != 0) {
        folio_log_error(0, "%s", err);
        return FOLIO_EXIT_CONFIG;
    }
    /* Plans are sized for the largest pool the model length allows, so the
     * ring fits whatever pool the worker builds. */
    {
        struct folio_policy_config big = s->pcfg;
        big.num_kv_blocks = (s->pcfg.max_model_len + 15) / 16;
        struct folio_policy *sizing;
        if (folio_policy_create(&big, on_event, s, &sizing, err, sizeof err) != 0) {
            folio_log_error(0, "%s", err);
            goto out;
        }
        struct folio_policy *keep = s->policy;
        s->policy = sizing;
        int rc = create_rings(s, err, sizeof err);
        s->policy = keep;
        folio_policy_destroy(sizing);
        if (rc != 0) {
            folio_log_error(0, "shared-memory rings: %s", err);
            goto out;
        }
    }
    if (mkdir(o->run_dir, 0700) != 0 && errno != EEXIST) {
        folio_log_error(0, "cannot create the run directory %s: %s", o->run_dir, strerror(errno));
        goto out;
    }
    snprintf(s->submit_url, sizeof s->submit_url, "%s", o->submit_url);
    snprintf(s->ctl_url, sizeof s->ctl_url, "%s", o->ctl_url);
    snprintf(s->worker_url, sizeof s->worker_url, "%s", o->worker_url);
    if (open_socket(&s->submit_sock, nng_pull0_open, s->submit_url, &s->submit_fd, err,
                    sizeof err) != 0 ||
        open_socket(&s->ctl_sock, nng_rep0_open, s->ctl_url, &s->ctl_fd, err, sizeof err) != 0 ||
        open_socket(&s->worker_sock, nng_pull0_open, s->worker_url, &s->worker_fd, err,
                    sizeof err) != 0) {
        folio_log_error(0, "%s", err);
        goto out;
    }
    nng_socket_set_ms(s->ctl_sock, NNG_OPT_SENDTIMEO, 1000);
    s->sig_fd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);

    folio_ws_init(&s->ws, (uint64_t)(o->heartbeat_timeout_seconds * 1e9));
    if (o->external_worker) {
        char args_path[PATH_MAX + 32];
        snprintf(args_path, sizeof args_path, "%s/worker.args", o->run_dir);
        folio_ws_set_external(&s->ws, args_path);
    }
    build_worker_argv(s);
    if (folio_ws_start(&s->ws, folio_mono_ns(), err, sizeof err) != 0) {
        folio_log_error(0, "cannot start the worker: %s", err);
        goto out;
    }
    folio_log_info(0, "listening: submit %s, ctl %s, worker %s; %d slots, %d tokens per step",
                   s->submit_url, s->ctl_url, s->worker_url, o->max_num_seqs,
                   o->max_num_batched_tokens);

    while (!s->done) {
        handle_signals(s);
        supervise(s);
        if (s->done)
            break;
        handle_worker_ctl(s);
        handle_ctl(s);
        handle_submits(s);
        if (s->ws.state == FOLIO_WORKER_READY) {
            collect_results(s);
            if (s->ws.state == FOLIO_WORKER_READY)
                plan_steps(s);
        }
        folio_links_flush(&s->links);
        uint32_t dead[16];
        int n = folio_links_dead(&s->links, dead, 16);
        for (int i = 0; i < n; i++) {
            folio_log_warn(0,
                           "frontend %u is gone (its ring has no reader): dropping its "
                           "requests",
                           dead[i]);
            folio_policy_drop_frontend(s->policy, dead[i]);
            folio_links_remove(&s->links, dead[i]);
        }
        if (s->draining) {
            if (folio_policy_idle(s->policy) && !folio_links_pending(&s->links))
                break;
            if (folio_mono_ns() > s->drain_deadline_ns) {
                folio_log_warn(0, "drain deadline passed: ending the requests still running");
                folio_policy_fail_all(s->policy, 503, "the server is shutting down");
                folio_links_flush(&s->links);
                break;
            }
        }
        if (!s->done)
            wait_for_something(s);
    }
    status = s->exit_status;
out:
    folio_ws_stop(&s->ws, 5000);
    folio_ws_free(&s->ws);
    if (s->submit_fd >= 0)
        nng_close(s->submit_sock);
    if (s->ctl_fd >= 0)
        nng_close(s->ctl_sock);
    if (s->worker_fd >= 0)
        nng_close(s->worker_sock);
    const char *urls[3] = {s->submit_url, s->ctl_url, s->worker_url};
    for (int i = 0; i < 3; i++)
        if (!strncmp(urls[i], "ipc://", 6))
            unlink(urls[i] + 6);
    folio_links_close_all(&s->links);
    close_rings(s);
    folio_policy_destroy(s->policy);
    if (s->sig_fd >= 0)
        close(s->sig_fd);
    folio_log_info(0, "exit %d", status);
    return status;
}
