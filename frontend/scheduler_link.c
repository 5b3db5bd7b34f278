#include "scheduler_link.h"

#include <errno.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "folio.pb-c.h"
#include "seq_params_codec.h"
#include "ipc_records.h"
#include "nng_dial.h"
#include "log.h"
#include "shm_ring.h"
#include "clock.h"

struct folio_link {
    struct folio_link_config cfg;
    char submit_url[512], ctl_url[512], ring_name[256];
    nng_socket push, req;
    struct folio_ring *owner, *reader;
    pthread_t ctl_thread, ring_thread;
    bool ctl_started, ring_started;
    atomic_bool stopping;
    /* The two sockets' dialers: Submits can go out while the first has a
     * connection. */
    struct folio_dial submit_dial, ctl_dial;
    atomic_size_t pending_bytes;
    uint32_t epoch;       /* ours: Register says it, so the scheduler tells restarts apart;
                           * the control thread's alone */
    char ctl_error[1100]; /* why the last control call failed (the control thread's) */

    pthread_mutex_t mu; /* guards status */
    struct folio_link_status status;
    struct timespec status_at;
};

/* ---- messages to the loop ------------------------------------------------ */

static struct folio_link_msg *msg_new(struct folio_link *l, enum folio_link_msg_kind kind,
                                      size_t bytes)
{
    struct folio_link_msg *m = malloc(sizeof *m + bytes);
    if (!m)
        return NULL;
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->link = l;
    m->bytes = bytes;
    atomic_fetch_add(&l->pending_bytes, sizeof *m + bytes);
    return m;
}

void folio_link_msg_free(struct folio_link_msg *m)
{
    if (!m)
        return;
    atomic_fetch_sub(&m->link->pending_bytes, sizeof *m + m->bytes);
    free(m);
}

int folio_link_msg_next(const struct folio_link_msg *m, size_t *pos, const void **rec,
                        uint32_t *len)
{
    if (*pos + 8 > m->bytes)
        return 0;
    uint32_t n;
    memcpy(&n, m->data + *pos, 4);
    *rec = m->data + *pos + 8;
    *len = n;
    *pos += 8 + ((n + 7u) & ~7u);
    return 1;
}

static void post(struct folio_link *l, enum folio_link_msg_kind kind, uint32_t epoch)
{
    struct folio_link_msg *m = msg_new(l, kind, 0);
    if (!m) {
        folio_log_error(0, "out of memory posting a link message");
        return;
    }
    m->scheduler_epoch = epoch;
    l->cfg.deliver(l->cfg.deliver_arg, m);
}

/* ---- the event ring reader thread --------------------------------------- */

#define BATCH_MAX_BYTES (1u << 20)

static void *ring_main(void *arg)
{
    struct folio_link *l = arg;
    char err[256];
    /* Records are gathered here, then copied into one message of the exact
     * size: a batch is usually a few hundred bytes. */
    size_t cap = BATCH_MAX_BYTES + folio_ring_max_record(l->reader) + 16;
    unsigned char *buf = malloc(cap);
    if (!buf) {
        folio_log_error(0, "event ring %s: out of memory for the batch buffer", l->ring_name);
        return NULL;
    }
    while (!atomic_load(&l->stopping)) {
        /* Back-pressure: when the loop is behind, stop reading so the ring
         * fills and the scheduler waits, instead of growing our heap. */
        if (atomic_load(&l->pending_bytes) > l->cfg.max_pending_bytes) {
            usleep(1000);
            continue;
        }
        int rc = folio_ring_wait(l->reader, 200 * 1000000ll, err, sizeof err);
        if (rc < 0) {
            folio_log_error(0, "event ring %s: %s", l->ring_name, err);
            usleep(100 * 1000);
            continue;
        }
        if (rc == 0)
            continue;
        size_t pos = 0;
        uint32_t num = 0;
        struct folio_ring_record rec;
        while (pos < BATCH_MAX_BYTES &&
               (rc = folio_ring_peek(l->reader, &rec, err, sizeof err)) == 1) {
            memcpy(buf + pos, &rec.len, 4);
            memset(buf + pos + 4, 0, 4);
            memcpy(buf + pos + 8, rec.data, rec.len);
            size_t padded = (rec.len + 7u) & ~7u;
            memset(buf + pos + 8 + rec.len, 0, padded - rec.len);
            pos += 8 + padded;
            num++;
            folio_ring_release(l->reader);
        }
        if (rc < 0)
            folio_log_error(0, "event ring %s: %s", l->ring_name, err);
        if (num == 0)
            continue;
        struct folio_link_msg *m;
        while (!(m = msg_new(l, FOLIO_LINK_EVENTS, pos)) && !atomic_load(&l->stopping))
            usleep(1000);
        if (!m)
            break;
        memcpy(m->data, buf, pos);
        m->num_records = num;
        l->cfg.deliver(l->cfg.deliver_arg, m);
    }
    free(buf);
    return NULL;
}

/* ---- the control thread ------------------------------------------------- */

/* One request/reply on the REQ socket; *reply must be freed with
 * folio__envelope__free_unpacked. */
static int ctl_call(struct folio_link *l, Folio__Envelope *env, Folio__Envelope **reply)
{
    size_t n = folio__envelope__get_packed_size(env);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return -1;
    folio__envelope__pack(env, buf);
    int rv = nng_send(l->req, buf, n, 0);
    free(buf);
    if (rv != 0) {
        snprintf(l->ctl_error, sizeof l->ctl_error, "sending on %s: %s (%d connections)",
                 l->ctl_url, nng_strerror(rv), folio_dial_connections(&l->ctl_dial));
        return -1;
    }
    void *in = NULL;
    size_t inlen = 0;
    if ((rv = nng_recv(l->req, &in, &inlen, NNG_FLAG_ALLOC)) != 0) {
        snprintf(l->ctl_error, sizeof l->ctl_error, "waiting for the reply on %s: %s", l->ctl_url,
                 nng_strerror(rv));
        return -1;
    }
    *reply = folio__envelope__unpack(NULL, inlen, in);
    nng_free(in, inlen);
    if (!*reply)
        snprintf(l->ctl_error, sizeof l->ctl_error, "a reply that is not a folio.Envelope");
    return *reply ? 0 : -1;
}

static int do_status(struct folio_link *l);

static int do_register(struct folio_link *l)
{
    Folio__Register reg = FOLIO__REGISTER__INIT;
    reg.role = FOLIO__REGISTER__ROLE__FRONTEND;
    reg.id = l->cfg.frontend_id;
    reg.pid = (uint32_t)getpid();
    reg.epoch = l->epoch;
    reg.version = (char *)FOLIO_VERSION;
    reg.ring_name = l->ring_name;
    Folio__Envelope env = FOLIO__ENVELOPE__INIT;
    env.body_case = FOLIO__ENVELOPE__BODY_REGISTER;
    env.register_ = &reg;
    Folio__Envelope *reply = NULL;
    if (ctl_call(l, &env, &reply) != 0)
        return -1;
    int rc = -1;
    if (reply->body_case != FOLIO__ENVELOPE__BODY_REGISTER_REPLY) {
        folio_log_error(0, "scheduler answered Register with message kind %d",
                        (int)reply->body_case);
    } else if (!reply->register_reply->ok) {
        folio_log_error(0, "scheduler refused Register: %s", reply->register_reply->error);
        snprintf(l->ctl_error, sizeof l->ctl_error, "the scheduler refused Register: %.900s",
                 reply->register_reply->error);
    } else {
        Folio__RegisterReply *rr = reply->register_reply;
        pthread_mutex_lock(&l->mu);
        l->status.registered = true;
        l->status.scheduler_epoch = rr->scheduler_epoch;
        snprintf(l->status.model_name, sizeof l->status.model_name, "%s", rr->model_name);
        l->status.max_model_len = rr->max_model_len;
        l->status.vocab_size = rr->vocab_size;
        pthread_mutex_unlock(&l->mu);
        folio_log_info(0, "registered with the scheduler (epoch %u, model %s, max_model_len %d)",
                       rr->scheduler_epoch, rr->model_name, rr->max_model_len);
        rc = 0;
        /* A status first, so the loop sees a valid one when it learns it is
         * registered (it starts listening then). */
        do_status(l);
        post(l, FOLIO_LINK_REGISTERED, rr->scheduler_epoch);
    }
    folio__envelope__free_unpacked(reply, NULL);
    return rc;
}

static int do_status(struct folio_link *l)
{
    Folio__StatusRequest sr = FOLIO__STATUS_REQUEST__INIT;
    sr.frontend_id = l->cfg.frontend_id;
    Folio__Envelope env = FOLIO__ENVELOPE__INIT;
    env.body_case = FOLIO__ENVELOPE__BODY_STATUS_REQUEST;
    env.status_request = &sr;
    Folio__Envelope *reply = NULL;
    if (ctl_call(l, &env, &reply) != 0)
        return -1;
    if (reply->body_case != FOLIO__ENVELOPE__BODY_STATUS_REPLY) {
        folio__envelope__free_unpacked(reply, NULL);
        return -1;
    }
    Folio__StatusReply *s = reply->status_reply;
    pthread_mutex_lock(&l->mu);
    struct folio_link_status *o = &l->status;
    o->worker_ready = s->worker_ready;
    snprintf(o->worker_state, sizeof o->worker_state, "%s", s->worker_state);
    o->num_waiting = s->num_waiting;
    o->num_running = s->num_running;
    o->kv_blocks_total = s->kv_blocks_total;
    o->kv_blocks_used = s->kv_blocks_used;
    snprintf(o->kv_cache_dtype, sizeof o->kv_cache_dtype, "%s",
             s->kv_cache_dtype && *s->kv_cache_dtype ? s->kv_cache_dtype : "auto");
    o->prefix_cache_queries = s->prefix_cache_queries;
    o->prefix_cache_hits = s->prefix_cache_hits;
    o->num_preemptions = s->num_preemptions;
    o->steps = s->steps;
    o->step_plan_seconds_total = s->step_plan_seconds_total;
    o->step_gpu_seconds_total = s->step_gpu_seconds_total;
    o->step_ipc_seconds_total = s->step_ipc_seconds_total;
    o->scheduler_rss_bytes = s->scheduler_rss_bytes;
    o->worker_rss_bytes = s->worker_rss_bytes;
    for (size_t i = 0; i < FOLIO_LOOP_PHASES; i++)
        o->loop_seconds_total[i] = i < s->n_loop_seconds_total ? s->loop_seconds_total[i] : 0;
    o->worker_restarts = s->worker_restarts;
    o->requests_finished = s->requests_finished;
    o->requests_rejected = s->requests_rejected;
    o->prompt_tokens_total = s->prompt_tokens_total;
    o->generation_tokens_total = s->generation_tokens_total;
    memset(o->queue_time_counts, 0, sizeof o->queue_time_counts);
    for (size_t i = 0; i < s->n_queue_time_counts && i <= FOLIO_QUEUE_TIME_BUCKETS; i++)
        o->queue_time_counts[i] = s->queue_time_counts[i];
    o->queue_time_sum = s->queue_time_sum;
    o->spec_num_drafts = s->spec_num_drafts;
    o->spec_num_draft_tokens = s->spec_num_draft_tokens;
    o->spec_num_accepted_tokens = s->spec_num_accepted_tokens;
    o->num_spec_pos = 0;
    for (size_t i = 0; i < s->n_spec_accepted_per_pos && i < FOLIO_MAX_DRAFT_TOKENS; i++)
        o->spec_accepted_per_pos[o->num_spec_pos++] = s->spec_accepted_per_pos[i];
    o->spec_seqs_disabled = s->spec_seqs_disabled;
    o->spec_steps_batch_off = s->spec_steps_batch_off;
    o->status_epoch = s->scheduler_epoch;
    o->status_seq = s->status_seq;
    if (s->max_model_len > 0)
        o->max_model_len = s->max_model_len;
    clock_gettime(CLOCK_MONOTONIC, &l->status_at);
    pthread_mutex_unlock(&l->mu);
    folio__envelope__free_unpacked(reply, NULL);
    return 0;
}

/* Fails every open request (the loop does, on FOLIO_LINK_LOST) and takes a
 * new epoch, so that the scheduler, when this frontend registers again,
 * drops what it still holds of them rather than run them for nobody. */
static void give_up_requests(struct folio_link *l)
{
    l->epoch++;
    post(l, FOLIO_LINK_LOST, 0);
}

static void *ctl_main(void *arg)
{
    struct folio_link *l = arg;
    bool registered = false, lost_posted = false;
    double last_ok = folio_mono_s(), last_said = 0;
    while (!atomic_load(&l->stopping)) {
        /* A closed connection means the scheduler died or restarted, and
         * with it every request it held (a restarted one answers
         * StatusRequests at once, so a broken pipe is the only sign). */
        bool lost_submit = folio_dial_lost(&l->submit_dial);
        bool lost = folio_dial_lost(&l->ctl_dial) || lost_submit;
        if (lost && registered) {
            folio_log_warn(0, "the connection to the scheduler closed: its requests are lost; "
                              "registering again");
            registered = false;
            pthread_mutex_lock(&l->mu);
            l->status.registered = false;
            pthread_mutex_unlock(&l->mu);
            give_up_requests(l);
        }
        /* Register only once the Submit socket is connected too: the two
         * sockets redial on their own, and a frontend that said it was ready
         * while its Submits had nowhere to go would answer 503. */
        int rc = -1;
        if (registered) {
            rc = do_status(l);
        } else if (folio_dial_connections(&l->submit_dial) > 0) {
            rc = do_register(l);
        } else {
            snprintf(l->ctl_error, sizeof l->ctl_error, "the Submit socket is not connected to %s",
                     l->submit_url);
        }
        if (rc == 0) {
            registered = true;
            lost_posted = false;
            last_ok = folio_mono_s();
        } else {
            if (registered)
                folio_log_warn(0, "the scheduler did not answer a StatusRequest; registering "
                                  "again when it is back");
            registered = false;
            pthread_mutex_lock(&l->mu);
            l->status.registered = false;
            pthread_mutex_unlock(&l->mu);
            double now = folio_mono_s();
            if (!lost_posted && (now - last_ok) * 1000 > l->cfg.lost_after_ms) {
                folio_log_error(0, "no answer from the scheduler for %d ms: %s",
                                l->cfg.lost_after_ms, l->ctl_error);
                give_up_requests(l);
                lost_posted = true;
                last_said = now;
            } else if (lost_posted && now - last_said >= 10.0) {
                /* Every 10 s while it lasts, so that a frontend that cannot
                 * get back in says why. */
                folio_log_warn(0, "still not registered with the scheduler after %.0f s: %s",
                               now - last_ok, l->ctl_error);
                last_said = now;
            }
        }
        folio_dial_watch(&l->submit_dial);
        folio_dial_watch(&l->ctl_dial);
        usleep((useconds_t)l->cfg.status_interval_ms * 1000);
    }
    return NULL;
}

/* ---- start / stop -------------------------------------------------------- */

static int open_sockets(struct folio_link *l, char *err, size_t errlen)
{
    int rv;
    if ((rv = nng_push0_open(&l->push)) != 0 || (rv = nng_req0_open(&l->req)) != 0) {
        snprintf(err, errlen, "nng socket: %s", nng_strerror(rv));
        return -1;
    }
    /* A bounded send queue: past it, Submit fails and the client gets 503
     * rather than the loop blocking. */
    nng_socket_set_int(l->push, NNG_OPT_SENDBUF, 1024);
    nng_socket_set_ms(l->push, NNG_OPT_RECONNMINT, 20);
    nng_socket_set_ms(l->push, NNG_OPT_RECONNMAXT, 500);
    nng_socket_set_ms(l->req, NNG_OPT_RECONNMINT, 20);
    nng_socket_set_ms(l->req, NNG_OPT_RECONNMAXT, 500);
    nng_socket_set_ms(l->req, NNG_OPT_SENDTIMEO, 1000);
    nng_socket_set_ms(l->req, NNG_OPT_RECVTIMEO, 1000);
    nng_socket_set_size(l->push, NNG_OPT_RECVMAXSZ, 0);
    nng_socket_set_size(l->req, NNG_OPT_RECVMAXSZ, 1 << 20);
    /* Non-blocking dials: the scheduler may start after us; nng keeps
     * redialling, also after it restarts. A REQ socket is not closed and
     * opened again when its requests go unanswered (ZeroMQ's "lazy pirate"):
     * measured, a scheduler stopped for 8 s (SIGSTOP) while both frontends did
     * that every three unanswered Registers never answered again once it ran
     * (7 runs of 8, nng 1.5.2), where without it all 6 runs recovered at once. */
    if (folio_dial_start(&l->submit_dial, l->push, l->submit_url, err, errlen) != 0 ||
        folio_dial_start(&l->ctl_dial, l->req, l->ctl_url, err, errlen) != 0)
        return -1;
    return 0;
}

int folio_link_start(const struct folio_link_config *cfg, struct folio_link **out, char *err,
                     size_t errlen)
{
    struct folio_link *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    l->cfg = *cfg;
    if (l->cfg.status_interval_ms <= 0)
        l->cfg.status_interval_ms = 100;
    if (l->cfg.lost_after_ms <= 0)
        l->cfg.lost_after_ms = 5000;
    if (l->cfg.max_pending_bytes == 0)
        l->cfg.max_pending_bytes = 64u << 20;
    snprintf(l->submit_url, sizeof l->submit_url, "%s", cfg->submit_url);
    snprintf(l->ctl_url, sizeof l->ctl_url, "%s", cfg->ctl_url);
    snprintf(l->ring_name, sizeof l->ring_name, "%s", cfg->ring_name);
    l->cfg.submit_url = l->submit_url;
    l->cfg.ctl_url = l->ctl_url;
    l->cfg.ring_name = l->ring_name;
    l->epoch = (uint32_t)(folio_unix_ns() / 1000000ull) ^ ((uint32_t)getpid() << 16);
    pthread_mutex_init(&l->mu, NULL);
    *out = l;

    /* A predecessor killed with -9 left its ring: it is ours to replace. */
    if (folio_ring_unlink(l->ring_name, err, errlen) != 0 ||
        folio_ring_create(l->ring_name, cfg->ring_bytes, &l->owner, err, errlen) != 0 ||
        folio_ring_attach_reader(l->ring_name, &l->reader, err, errlen) != 0)
        return -1;
    if (open_sockets(l, err, errlen) != 0)
        return -1;
    if (pthread_create(&l->ring_thread, NULL, ring_main, l) != 0) {
        snprintf(err, errlen, "cannot start the event ring thread");
        return -1;
    }
    l->ring_started = true;
    if (pthread_create(&l->ctl_thread, NULL, ctl_main, l) != 0) {
        snprintf(err, errlen, "cannot start the scheduler control thread");
        return -1;
    }
    l->ctl_started = true;
    return 0;
}

void folio_link_stop(struct folio_link *l)
{
    if (!l)
        return;
    atomic_store(&l->stopping, true);
    if (l->ctl_started)
        pthread_join(l->ctl_thread, NULL);
    if (l->ring_started)
        pthread_join(l->ring_thread, NULL);
    nng_close(l->push);
    nng_close(l->req);
    folio_ring_close(l->reader);
    folio_ring_close(l->owner); /* unlinks the name */
    pthread_mutex_destroy(&l->mu);
    folio_dial_fini(&l->submit_dial);
    folio_dial_fini(&l->ctl_dial);
    free(l);
}

/* ---- submit / abort ------------------------------------------------------ */

static int push_envelope(struct folio_link *l, Folio__Envelope *env, char *err, size_t errlen)
{
    size_t n = folio__envelope__get_packed_size(env);
    nng_msg *msg;
    int rv = nng_msg_alloc(&msg, n);
    if (rv != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    folio__envelope__pack(env, nng_msg_body(msg));
    if ((rv = nng_sendmsg(l->push, msg, NNG_FLAG_NONBLOCK)) != 0) {
        nng_msg_free(msg);
        snprintf(err, errlen, "%s",
                 rv == NNG_EAGAIN ? "the scheduler is not reachable or its queue is full"
                                  : nng_strerror(rv));
        return -1;
    }
    return 0;
}

int folio_link_submit(struct folio_link *l, uint64_t request_id, const int32_t *prompt_ids,
                      size_t num_prompt_ids, const struct folio_seq_params *p, char *err,
                      size_t errlen)
{
    Folio__SamplingParams sp = FOLIO__SAMPLING_PARAMS__INIT;
    Folio__Grammar g = FOLIO__GRAMMAR__INIT;
    Folio__Submit s = FOLIO__SUBMIT__INIT;
    s.request_id = request_id;
    s.frontend_id = l->cfg.frontend_id;
    s.n_prompt_token_ids = num_prompt_ids;
    s.prompt_token_ids = (int32_t *)prompt_ids;
    int32_t bias_ids[FOLIO_MAX_LOGIT_BIAS];
    float bias_values[FOLIO_MAX_LOGIT_BIAS];
    if (p->num_logit_bias > FOLIO_MAX_LOGIT_BIAS) {
        snprintf(err, errlen, "'logit_bias' has %d entries; at most %d are allowed",
                 p->num_logit_bias, FOLIO_MAX_LOGIT_BIAS);
        return -1;
    }
    folio_seq_params_to_submit(p, &s, &sp, &g, bias_ids, bias_values);
    s.arrival_unix_ns = folio_unix_ns();
    Folio__Envelope env = FOLIO__ENVELOPE__INIT;
    env.body_case = FOLIO__ENVELOPE__BODY_SUBMIT;
    env.submit = &s;
    return push_envelope(l, &env, err, errlen);
}

int folio_link_abort(struct folio_link *l, uint64_t request_id)
{
    Folio__Abort a = FOLIO__ABORT__INIT;
    a.request_id = request_id;
    a.frontend_id = l->cfg.frontend_id;
    Folio__Envelope env = FOLIO__ENVELOPE__INIT;
    env.body_case = FOLIO__ENVELOPE__BODY_ABORT;
    env.abort = &a;
    char err[128];
    if (push_envelope(l, &env, err, sizeof err) != 0) {
        folio_log_warn(request_id, "abort not sent: %s", err);
        return -1;
    }
    return 0;
}

void folio_link_get_status(struct folio_link *l, struct folio_link_status *s)
{
    pthread_mutex_lock(&l->mu);
    *s = l->status;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double age = (double)(now.tv_sec - l->status_at.tv_sec) +
                 (double)(now.tv_nsec - l->status_at.tv_nsec) * 1e-9;
    s->valid = l->status_at.tv_sec != 0 && age < 1.0 && s->registered;
    pthread_mutex_unlock(&l->mu);
}
