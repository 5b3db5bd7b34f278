#include "scheduler.h"
#include "scheduler_internal.h"

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

/* ---- rings ---------------------------------------------------------------- */

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
    /* Prompt logprobs may come with every token of a step, where the worker's
     * backend computes them: the ring is made before any worker says so. */
    int seqs = s->pcfg.max_num_seqs, prompt_lps = s->pcfg.max_num_batched_tokens;
    int rows = seqs + FOLIO_MAX_DRAFT_ROWS; /* a verify step's draft rows too */
    s->result_capacity = pow2_at_least(
        8 * folio_result_size(rows, (rows + prompt_lps) * FOLIO_MAX_LOGPROBS, prompt_lps) + 4096);
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

/* ---- steps ------------------------------------------------------------------ */

static void collect_results(struct sched *s)
{
    char err[512];
    struct folio_ring_record rec;
    while (folio_ring_peek(s->result_reader, &rec, err, sizeof err) == 1) {
        struct folio_result_view v;
        if (folio_result_decode(rec.data, rec.len, &v, err, sizeof err) != 0) {
            folio_ring_release(s->result_reader);
            sched_worker_kill_and_lose(s, err);
            return;
        }
        if (v.hdr->status != 0) {
            const char *msg = (const char *)rec.data + sizeof *v.hdr;
            size_t n = rec.len - sizeof *v.hdr;
            char why[600];
            snprintf(why, sizeof why, "worker failed in step %llu: %.*s",
                     (unsigned long long)v.hdr->step_id, (int)(n < 500 ? n : 500), msg);
            folio_ring_release(s->result_reader);
            sched_worker_kill_and_lose(s, why);
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
            sched_worker_kill_and_lose(s, err);
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
            sched_worker_kill_and_lose(s, rc == 0 ? "worker stopped reading step plans" : err);
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
        /* SIGCHLD: sched_supervise() reaps on every turn. */
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

/* What the loop is about to wait for (common/loop_phase.h). */
static int wait_phase(struct sched *s)
{
    if (s->ws.state != FOLIO_WORKER_READY)
        return FOLIO_LOOP_IDLE;
    bool work = folio_policy_has_work(s->policy);
    if (work && folio_links_over_bound(&s->links))
        return FOLIO_LOOP_HELD;
    return folio_policy_inflight(s->policy) > 0 ? FOLIO_LOOP_WAIT_GPU : FOLIO_LOOP_IDLE;
}

/* Adds the time since mark to a phase; returns now, the next phase's mark. */
static uint64_t add_phase(struct sched *s, int phase, uint64_t mark)
{
    uint64_t now = folio_mono_ns();
    s->loop_s[phase] += (double)(now - mark) * 1e-9;
    return now;
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
    c->disable_chunked_prefill = o->disable_chunked_prefill;
    c->step_target_seconds = FOLIO_POLICY_STEP_TARGET_SECONDS;
    c->serial_steps = o->serial_steps;
    c->spec = o->spec;
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
    /* Without chunks a prompt runs whole in one step, so the budget must hold the longest. */
    if (o->disable_chunked_prefill && c->max_num_batched_tokens < c->max_model_len) {
        if (o->max_num_batched_tokens_given) {
            snprintf(err, errlen,
                     "--max-num-batched-tokens %d is below the model length served (%d): with "
                     "--no-enable-chunked-prefill each prompt runs whole in one step; raise it "
                     "or lower --max-model-len",
                     c->max_num_batched_tokens, c->max_model_len);
            return -1;
        }
        c->max_num_batched_tokens = c->max_model_len;
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
        folio_policy_create(&s->pcfg, sched_on_event, s, &s->policy, err, sizeof err) != 0) {
        folio_log_error(0, "%s", err);
        return FOLIO_EXIT_CONFIG;
    }
    /* Plans are sized for the largest pool the model length allows, so the
     * ring fits whatever pool the worker builds. */
    {
        struct folio_policy_config big = s->pcfg;
        big.num_kv_blocks = (s->pcfg.max_model_len + 15) / 16;
        struct folio_policy *sizing;
        if (folio_policy_create(&big, sched_on_event, s, &sizing, err, sizeof err) != 0) {
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
    sched_build_worker_argv(s);
    if (folio_ws_start(&s->ws, folio_mono_ns(), err, sizeof err) != 0) {
        folio_log_error(0, "cannot start the worker: %s", err);
        goto out;
    }
    folio_log_info(0,
                   "listening: submit %s, ctl %s, worker %s; %d slots, %d tokens per step, "
                   "prompts %s, %d step%s in flight%s",
                   s->submit_url, s->ctl_url, s->worker_url, s->pcfg.max_num_seqs,
                   s->pcfg.max_num_batched_tokens,
                   o->disable_chunked_prefill ? "whole" : "in chunks of the worker's speed",
                   o->serial_steps ? 1 : 2, o->serial_steps ? "" : "s",
                   o->enforce_eager ? ", no CUDA graphs" : "");

    uint64_t mark = folio_mono_ns();
    while (!s->done) {
        handle_signals(s);
        sched_supervise(s);
        if (s->done)
            break;
        sched_handle_worker_ctl(s);
        sched_handle_ctl(s);
        sched_handle_submits(s);
        mark = add_phase(s, FOLIO_LOOP_INTAKE, mark);
        if (s->ws.state == FOLIO_WORKER_READY) {
            collect_results(s);
            mark = add_phase(s, FOLIO_LOOP_RESULTS, mark);
            if (s->ws.state == FOLIO_WORKER_READY)
                plan_steps(s);
            mark = add_phase(s, FOLIO_LOOP_PLAN, mark);
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
        mark = add_phase(s, FOLIO_LOOP_EVENTS, mark);
        if (!s->done) {
            int why = wait_phase(s);
            wait_for_something(s);
            mark = add_phase(s, why, mark);
        }
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
