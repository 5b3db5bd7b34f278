#include "http_server.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "h2o.h"
#include "h2o/http1.h"
#include "h2o/http2.h"

#include "api_routes.h"
#include "chat_prompt.h"
#include "ipc_records.h"
#include "log.h"
#include "metrics.h"
#include "metrics_shared.h"
#include "openai_api.h"
#include "scheduler_link.h"
#include "stream.h"
#include "clock.h"
#include "error_json_filter.h"

#define NUM_BUCKETS 4096
#define H2O_BODY_CAP_FACTOR 4 /* h2o buffers bodies up to this many times --max-body-bytes */

/* One generation request (completion or chat) from arrival to its last byte.
 * It lives exactly as long as the h2o request: freed when h2o disposes of the
 * request's memory pool, which also tells us the client went away. */
struct gen_req {
    struct gen_req *next; /* hash chain */
    struct server *srv;
    uint64_t id;
    h2o_req_t *req;
    h2o_generator_t gen;
    struct folio_oai_request oai;
    struct folio_text_stream ts;
    char oai_id[64];
    struct folio_oai_response_ctx rctx;
    bool started; /* streaming: 200 and headers sent */
    bool sending; /* h2o_send issued, proceed not yet called */
    bool final_queued;
    bool got_event;
    bool done;     /* the last byte is handed to h2o: later events are ignored */
    bool rejected; /* refused by the scheduler's admission control */
    bool counted;  /* its one finish reason is counted (it may still be sending) */
    struct folio_jw pending, inflight;
    struct folio_jw text;                /* non-streaming: the whole completion */
    struct folio_oai_token_logprob *lps; /* non-streaming logprobs, texts owned */
    size_t num_lps, cap_lps;
    uint32_t prompt_tokens, cached_tokens;
    double t_arrival, t_first, t_last;
};

struct handler {
    h2o_handler_t super;
    struct server *srv;
};

struct server {
    const struct folio_server_config *cfg;
    h2o_globalconf_t config;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    h2o_socket_t *listener;
    h2o_multithread_receiver_t receiver;
    struct folio_link *link;
    struct folio_metrics metrics;
    struct folio_metrics_block *metrics_block; /* every frontend's counters; NULL: own only */
    struct gen_req *buckets[NUM_BUCKETS];
    size_t num_open;
    uint64_t next_seq, id_salt;
    uint32_t sched_epoch;
    bool registered_once;
    int64_t started_unix;
    const char *model_name;
    double last_reap;
};

static volatile sig_atomic_t stop_requested;
static struct server *volatile last_server; /* see the end of folio_server_run */

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* ---- the request table ---------------------------------------------------- */

static struct gen_req **bucket(struct server *s, uint64_t id)
{
    return &s->buckets[(id * 0x9e3779b97f4a7c15ull) >> 52 & (NUM_BUCKETS - 1)];
}

static struct gen_req *find(struct server *s, uint64_t id)
{
    for (struct gen_req *g = *bucket(s, id); g; g = g->next)
        if (g->id == id)
            return g;
    return NULL;
}

static void table_remove(struct server *s, struct gen_req *g)
{
    for (struct gen_req **p = bucket(s, g->id); *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            s->num_open--;
            return;
        }
}

/* ---- plain responses ------------------------------------------------------ */

static const char *reason_of(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 413:
        return "Payload Too Large";
    case 429:
        return "Too Many Requests";
    case 503:
        return "Service Unavailable";
    default:
        return status >= 500 ? "Internal Server Error" : "Error";
    }
}

static void send_body(struct server *s, h2o_req_t *req, int status, const char *type,
                      const char *body, size_t len)
{
    folio_metrics_count_response(&s->metrics, status);
    req->res.status = status;
    req->res.reason = reason_of(status);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, type, strlen(type));
    h2o_send_inline(req, body, len);
}

static void send_error(struct server *s, h2o_req_t *req, int status, const char *message,
                       const char *param, uint32_t retry_after_s)
{
    struct folio_jw b;
    folio_jw_init(&b);
    folio_oai_write_error(&b, status, message, param);
    if (status == 405)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL,
                       H2O_STRLIT("GET, POST"));
    if (status == 429) {
        char v[16];
        int n = snprintf(v, sizeof v, "%u", retry_after_s ? retry_after_s : 1);
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("retry-after"), 0, NULL,
                              h2o_strdup(&req->pool, v, (size_t)n).base, (size_t)n);
    }
    if (b.failed)
        send_body(s, req, 500, "text/plain", H2O_STRLIT("out of memory"));
    else
        send_body(s, req, status, "application/json", b.data, b.len);
    folio_jw_free(&b);
}

/* ---- streaming -------------------------------------------------------------- */

static void flush(struct gen_req *g)
{
    if (g->sending || !g->req || g->done)
        return;
    if (g->pending.len == 0 && !g->final_queued)
        return;
    struct folio_jw t = g->inflight;
    g->inflight = g->pending;
    g->pending = t;
    folio_jw_reset(&g->pending);
    h2o_iovec_t buf = h2o_iovec_init(g->inflight.data, g->inflight.len);
    g->sending = true;
    h2o_send_state_t state = H2O_SEND_STATE_IN_PROGRESS;
    if (g->final_queued) {
        state = H2O_SEND_STATE_FINAL;
        g->done = true;
    }
    /* After a FINAL send h2o may dispose of the request (and g) at any time:
     * nothing touches g after this call on that path. */
    h2o_send(g->req, &buf, 1, state);
}

static void on_proceed(h2o_generator_t *gen, h2o_req_t *req)
{
    (void)req;
    struct gen_req *g = H2O_STRUCT_FROM_MEMBER(struct gen_req, gen, gen);
    g->sending = false;
    flush(g);
}

static void start_stream(struct gen_req *g)
{
    h2o_req_t *req = g->req;
    folio_metrics_count_response(&g->srv->metrics, 200);
    req->res.status = 200;
    req->res.reason = "OK";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("text/event-stream; charset=utf-8"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                   H2O_STRLIT("no-cache"));
    g->gen.proceed = on_proceed;
    g->gen.stop = NULL; /* the pool's dispose hook does the clean-up */
    h2o_start_response(req, &g->gen);
    g->started = true;
    if (g->oai.endpoint == FOLIO_OAI_CHAT)
        folio_oai_write_chunk(&g->pending, &g->rctx, true, "", 0, NULL, NULL, 0, 0, NULL);
}

/* Ends the request with an error: a status and JSON when nothing was sent
 * yet, an error event and [DONE] inside a stream that has started. */
static void fail_request(struct gen_req *g, int status, const char *message, uint32_t retry_after)
{
    if (g->done || !g->req)
        return;
    struct server *s = g->srv;
    g->counted = true;
    if (g->rejected)
        s->metrics.finished_rejected++;
    else
        s->metrics.finished_error++;
    folio_log_warn(g->id, "request failed (%d): %s", status, message);
    if (g->started) {
        folio_oai_write_stream_error(&g->pending, status, message);
        folio_jw_str(&g->pending, FOLIO_OAI_SSE_DONE);
        g->final_queued = true;
        flush(g);
        return;
    }
    g->done = true;
    send_error(s, g->req, status, message, NULL, retry_after);
}

/* ---- token events ------------------------------------------------------------ */

static void free_lps(struct folio_oai_token_logprob *lp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)lp[i].text);
        for (uint32_t k = 0; k < lp[i].num_top; k++)
            free((char *)lp[i].top[k].text);
    }
}

static void fill_lp(const struct folio_tokenizer *t, struct folio_oai_token_logprob *lp,
                    const struct folio_event_view *v, uint32_t i, int32_t want_top)
{
    size_t len = 0;
    memset(lp, 0, sizeof *lp);
    lp->text = folio_tokenizer_decode(t, &v->token_ids[i], 1, false, &len);
    lp->len = lp->text ? len : 0;
    if (!lp->text)
        lp->text = strdup("");
    lp->logprob = v->logprobs[i];
    uint32_t n = v->hdr->num_top;
    if (n > (uint32_t)want_top)
        n = (uint32_t)want_top;
    for (uint32_t k = 0; k < n && k < FOLIO_OAI_MAX_LOGPROBS; k++) {
        const int32_t *id = &v->top_ids[(size_t)i * v->hdr->num_top + k];
        char *s = folio_tokenizer_decode(t, id, 1, false, &len);
        lp->top[k].text = s ? s : strdup("");
        lp->top[k].len = s ? len : 0;
        lp->top[k].logprob = v->top_logprobs[(size_t)i * v->hdr->num_top + k];
        lp->num_top = k + 1;
    }
}

static const char *finish_name(uint32_t reason)
{
    return reason == FOLIO_FINISH_STOP ? "stop" : reason == FOLIO_FINISH_LENGTH ? "length" : NULL;
}

static void handle_event(struct gen_req *g, const struct folio_event_view *v)
{
    struct server *s = g->srv;
    const struct folio_event_header *h = v->hdr;
    double now = folio_mono_s();

    if (!g->got_event) {
        g->got_event = true;
        folio_histogram_observe(&s->metrics.queue, now - g->t_arrival);
    }
    if (h->finish_reason == FOLIO_FINISH_REJECTED) {
        char msg[512];
        snprintf(msg, sizeof msg, "%.*s", (int)h->message_len, v->message);
        g->rejected = true;
        fail_request(g, h->status ? (int)h->status : 503,
                     h->message_len ? msg : "request rejected by the scheduler", h->retry_after_s);
        return;
    }
    if (h->num_tokens > 0) {
        if (g->t_first == 0) {
            g->t_first = now;
            folio_histogram_observe(&s->metrics.ttft, now - g->t_arrival);
        } else {
            for (uint32_t i = 0; i < h->num_tokens; i++)
                folio_histogram_observe(&s->metrics.itl, (now - g->t_last) / h->num_tokens);
        }
        g->t_last = now;
    }
    g->prompt_tokens = h->prompt_tokens;
    g->cached_tokens = h->cached_tokens;

    struct folio_jw text;
    folio_jw_init(&text);
    bool stop_hit = false;
    uint32_t used = 0;
    for (; used < h->num_tokens && !stop_hit; used++) {
        int rc = folio_text_stream_push(&g->ts, v->token_ids[used], &text);
        if (rc < 0) {
            folio_jw_free(&text);
            folio_link_abort(s->link, g->id);
            fail_request(g, 500, "the scheduler sent a token id the tokenizer does not know", 0);
            return;
        }
        stop_hit = rc == 1;
    }
    s->metrics.generation_tokens += used;

    const char *finish = NULL;
    if (stop_hit) {
        finish = "stop";
        if (h->finish_reason == FOLIO_FINISH_NONE)
            folio_link_abort(s->link, g->id); /* a stop string: the scheduler can stop too */
    } else if (h->finish_reason == FOLIO_FINISH_STOP || h->finish_reason == FOLIO_FINISH_LENGTH) {
        int rc = folio_text_stream_finish(&g->ts, &text);
        finish = rc == 1 ? "stop" : finish_name(h->finish_reason);
    }

    /* logprobs of the tokens this event brought (those after a stop dropped) */
    struct folio_oai_token_logprob *lp = NULL;
    size_t nlp = 0;
    if (g->oai.logprobs >= 0 && used > 0) {
        if (g->oai.stream) {
            lp = calloc(used, sizeof *lp);
        } else {
            if (g->num_lps + used > g->cap_lps) {
                size_t cap = (g->num_lps + used) * 2;
                void *p = realloc(g->lps, cap * sizeof *g->lps);
                if (p) {
                    g->lps = p;
                    g->cap_lps = cap;
                }
            }
            lp = g->num_lps + used <= g->cap_lps ? g->lps + g->num_lps : NULL;
        }
        if (lp) {
            for (uint32_t i = 0; i < used; i++)
                fill_lp(s->cfg->tokenizer, &lp[i], v, i, g->oai.logprobs);
            nlp = used;
            if (!g->oai.stream)
                g->num_lps += used;
        }
    }

    struct folio_oai_usage usage = {g->prompt_tokens, g->ts.num_tokens, g->cached_tokens};
    if (g->oai.stream) {
        if (!g->started)
            start_stream(g);
        if (text.len || nlp || finish) {
            folio_oai_write_chunk(&g->pending, &g->rctx, false, text.data ? text.data : "",
                                  text.len, finish, nlp ? lp : NULL, nlp, g->ts.emitted - text.len,
                                  g->oai.continuous_usage ? &usage : NULL);
        }
        if (lp) {
            free_lps(lp, nlp);
            free(lp);
        }
        folio_jw_free(&text);
        if (finish) {
            if (g->oai.include_usage)
                folio_oai_write_usage_chunk(&g->pending, &g->rctx, &usage);
            folio_jw_str(&g->pending, FOLIO_OAI_SSE_DONE);
            g->final_queued = true;
        }
    } else {
        folio_jw_raw(&g->text, text.data ? text.data : "", text.len);
        folio_jw_free(&text);
    }

    if (finish) {
        g->counted = true;
        folio_metrics_request_finished(&s->metrics, finish, now - g->t_arrival, g->prompt_tokens,
                                       g->ts.num_tokens);

        if (!g->oai.stream) {
            struct folio_jw b;
            folio_jw_init(&b);
            folio_oai_write_response(&b, &g->rctx, g->text.data ? g->text.data : "", g->text.len,
                                     finish, g->oai.logprobs >= 0 ? g->lps : NULL, g->num_lps,
                                     &usage);
            g->done = true;
            if (b.failed)
                send_error(s, g->req, 500, "out of memory", NULL, 0);
            else
                send_body(s, g->req, 200, "application/json", b.data, b.len);
            folio_jw_free(&b);
            return;
        }
        flush(g);
        return;
    }
    if (h->finish_reason == FOLIO_FINISH_ERROR || h->finish_reason == FOLIO_FINISH_ABORT) {
        char msg[512];
        if (h->message_len)
            snprintf(msg, sizeof msg, "%.*s", (int)h->message_len, v->message);
        else
            snprintf(msg, sizeof msg, "%s",
                     h->finish_reason == FOLIO_FINISH_ABORT ? "the scheduler aborted the request"
                                                            : "the engine failed");
        fail_request(g, h->status ? (int)h->status : 503, msg, 0);
        return;
    }
    if (g->oai.stream)
        flush(g);
}

static void handle_events(struct server *s, const struct folio_link_msg *m)
{
    size_t pos = 0;
    const void *rec;
    uint32_t len;
    char err[256];
    while (folio_link_msg_next(m, &pos, &rec, &len)) {
        struct folio_event_view v;
        if (folio_event_decode(rec, len, &v, err, sizeof err) != 0) {
            folio_log_error(0, "event ring: %s", err);
            continue;
        }
        struct gen_req *g = find(s, v.hdr->request_id);
        if (!g || g->done)
            continue; /* the client has gone, or a stop string ended it */
        handle_event(g, &v);
    }
}

/* Every open request fails: the scheduler that had them is gone. */
static void fail_all(struct server *s, const char *why)
{
    for (size_t b = 0; b < NUM_BUCKETS; b++)
        for (struct gen_req *g = s->buckets[b]; g; g = g->next)
            fail_request(g, 503, why, 0);
}

static void on_link_messages(h2o_multithread_receiver_t *receiver, h2o_linklist_t *messages)
{
    struct server *s = H2O_STRUCT_FROM_MEMBER(struct server, receiver, receiver);
    while (!h2o_linklist_is_empty(messages)) {
        h2o_multithread_message_t *hm =
            H2O_STRUCT_FROM_MEMBER(h2o_multithread_message_t, link, messages->next);
        h2o_linklist_unlink(&hm->link);
        struct folio_link_msg *m = (struct folio_link_msg *)hm;
        switch (m->kind) {
        case FOLIO_LINK_EVENTS:
            handle_events(s, m);
            break;
        case FOLIO_LINK_REGISTERED:
            s->registered_once = true;
            if (s->sched_epoch && m->scheduler_epoch != s->sched_epoch)
                fail_all(s, "the scheduler restarted; the request was lost");
            s->sched_epoch = m->scheduler_epoch;
            break;
        case FOLIO_LINK_LOST:
            fail_all(s, "the scheduler stopped answering or restarted; the request was lost");
            break;
        }
        folio_link_msg_free(m);
    }
}

/* Runs on the link's threads: only queues the message for the loop. */
static void deliver(void *arg, struct folio_link_msg *m)
{
    struct server *s = arg;
    h2o_multithread_send_message(&s->receiver, (h2o_multithread_message_t *)m);
}

_Static_assert(offsetof(struct folio_link_msg, loop_link) == 0 &&
                   sizeof(((struct folio_link_msg *)0)->loop_link) >=
                       sizeof(h2o_multithread_message_t),
               "folio_link_msg must start with room for h2o's message node");

/* ---- generation requests ------------------------------------------------------ */

/* h2o 2.2 reads nothing from an HTTP/1.1 connection while its request is
 * being answered, so a client that hangs up before the first byte of the
 * response (any non-streaming request, a stream still queued) would be
 * noticed only when its response is written. POLLRDHUP tells that the peer
 * closed without reading the socket; HTTP/2 connections are read all along
 * and their resets end the request through on_req_dispose. */
static bool client_hung_up(h2o_req_t *req)
{
    if (req->version >= 0x200 || !req->conn->callbacks->get_socket)
        return false;
    h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
    if (!sock)
        return false;
    struct pollfd p = {.fd = h2o_socket_get_fd(sock), .events = POLLRDHUP};
    return p.fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Aborts the requests whose clients have gone without h2o noticing. The
 * response still goes out (and fails), which closes the connection and
 * releases the request through h2o's usual path. */
static void reap_hung_up_clients(struct server *s)
{
    double now = folio_mono_s();
    if (now - s->last_reap < 0.25 || s->num_open == 0)
        return;
    s->last_reap = now;
    for (size_t b = 0; b < NUM_BUCKETS; b++)
        for (struct gen_req *g = s->buckets[b], *next; g; g = next) {
            next = g->next;
            if (g->done || g->started || !g->req || !client_hung_up(g->req))
                continue;
            folio_log_info(g->id, "client disconnected: abort");
            folio_link_abort(s->link, g->id);
            s->metrics.client_disconnects++;
            s->metrics.finished_abort++;
            g->counted = true;
            g->done = true;
            send_error(s, g->req, 499, "the client closed the connection", NULL, 0);
        }
}

static void on_req_dispose(void *p)
{
    struct gen_req *g = *(struct gen_req **)p;
    struct server *s = g->srv;
    if (!g->done && !g->counted) {
        /* The client went away (connection closed, stream reset) before
         * the request ended; one whose end is still being written has
         * its outcome counted already. */
        folio_log(s->cfg->log_requests ? FOLIO_LOG_INFO : FOLIO_LOG_DEBUG, g->id,
                  "client disconnected: abort");
        folio_link_abort(s->link, g->id);
        s->metrics.client_disconnects++;
        s->metrics.finished_abort++;
    }
    table_remove(s, g);
    s->metrics.requests_in_flight--;
    folio_text_stream_free(&g->ts);
    folio_oai_request_free(&g->oai);
    folio_jw_free(&g->pending);
    folio_jw_free(&g->inflight);
    folio_jw_free(&g->text);
    free_lps(g->lps, g->num_lps);
    free(g->lps);
    free(g);
}

static bool model_matches(const struct server *s, const char *model)
{
    if (!model || !strcmp(model, s->model_name) || !strcmp(model, s->cfg->model_dir))
        return true;
    const char *base = strrchr(s->cfg->model_dir, '/');
    return base && !strcmp(model, base + 1);
}

/* The prompt as token ids: tokenized text, given ids, or the rendered chat. */
static int32_t *prompt_ids(struct server *s, const struct folio_oai_request *r, size_t *n,
                           char *err, size_t errlen)
{
    const struct folio_tokenizer *t = s->cfg->tokenizer;
    if (r->endpoint == FOLIO_OAI_COMPLETIONS) {
        if (r->prompt_ids) {
            int32_t *ids = malloc(r->num_prompt_ids * sizeof *ids + 1);
            if (ids)
                memcpy(ids, r->prompt_ids, r->num_prompt_ids * sizeof *ids);
            *n = r->num_prompt_ids;
            return ids;
        }
        return folio_tokenizer_encode(t, r->prompt, r->prompt_len, true, n);
    }
    return folio_chat_prompt_ids(t, s->cfg->chat_template, r->messages, r->num_messages,
                                 r->add_generation_prompt, true, n, err, errlen);
}

static int32_t max_model_len(struct server *s)
{
    struct folio_link_status st;
    folio_link_get_status(s->link, &st);
    return st.max_model_len > 0 ? st.max_model_len : s->cfg->max_model_len;
}

static void handle_generate(struct server *s, h2o_req_t *req, enum folio_oai_endpoint ep)
{
    if (req->entity.len > s->cfg->max_body_bytes) {
        char msg[160];
        snprintf(msg, sizeof msg, "the request body has %zu bytes; the maximum is %zu",
                 req->entity.len, s->cfg->max_body_bytes);
        send_error(s, req, 413, msg, NULL, 0);
        return;
    }
    struct gen_req *g = calloc(1, sizeof *g);
    if (!g) {
        send_error(s, req, 500, "out of memory", NULL, 0);
        return;
    }
    struct folio_oai_error e;
    char err[512];
    int32_t *ids = NULL;
    size_t n = 0;
    if (folio_oai_parse_request(ep, req->entity.base ? req->entity.base : "", req->entity.len,
                                &g->oai, &e) != 0) {
        send_error(s, req, e.status, e.message, e.param, 0);
        goto fail;
    }
    if (!model_matches(s, g->oai.model)) {
        snprintf(err, sizeof err, "The model `%s` does not exist.", g->oai.model);
        send_error(s, req, 404, err, "model", 0);
        goto fail;
    }
    if (g->oai.logprobs > s->cfg->max_logprobs) {
        snprintf(err, sizeof err, "at most %d logprobs may be asked for (--max-logprobs), got %d",
                 s->cfg->max_logprobs, g->oai.logprobs);
        send_error(s, req, 400, err, ep == FOLIO_OAI_CHAT ? "top_logprobs" : "logprobs", 0);
        goto fail;
    }
    struct folio_link_status st;
    folio_link_get_status(s->link, &st);
    if (!st.valid) {
        send_error(s, req, 503, "the scheduler is not available; retry shortly", NULL, 0);
        goto fail;
    }
    err[0] = 0;
    if (!(ids = prompt_ids(s, &g->oai, &n, err, sizeof err))) {
        send_error(s, req, err[0] ? 400 : 500, err[0] ? err : "out of memory",
                   ep == FOLIO_OAI_CHAT ? "messages" : "prompt", 0);
        goto fail;
    }
    int32_t vocab = folio_tokenizer_vocab_size(s->cfg->tokenizer);
    if (st.vocab_size > 0 && st.vocab_size > vocab)
        vocab = st.vocab_size;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= vocab) {
            snprintf(err, sizeof err, "prompt token id %d is out of the vocabulary (size %d)",
                     ids[i], vocab);
            send_error(s, req, 400, err, "prompt", 0);
            goto fail;
        }
    if (n == 0) {
        send_error(s, req, 400, "the prompt is empty", "prompt", 0);
        goto fail;
    }
    int32_t ctx = max_model_len(s);
    if ((int64_t)n >= ctx || (g->oai.max_tokens > 0 && (int64_t)n + g->oai.max_tokens > ctx)) {
        snprintf(err, sizeof err,
                 "This model's maximum context length is %d tokens. However, you requested %lld "
                 "tokens (%zu in the prompt, %d for the completion). Please reduce the length "
                 "of the prompt or completion.",
                 ctx, (long long)n + (g->oai.max_tokens > 0 ? g->oai.max_tokens : 0), n,
                 g->oai.max_tokens > 0 ? g->oai.max_tokens : 0);
        send_error(s, req, 400, err, ep == FOLIO_OAI_CHAT ? "messages" : "prompt", 0);
        goto fail;
    }
    int32_t max_tokens = g->oai.max_tokens > 0 ? g->oai.max_tokens : ctx - (int32_t)n;

    if (folio_text_stream_init(&g->ts, s->cfg->tokenizer, g->oai.skip_special_tokens,
                               (const char *const *)g->oai.stop, g->oai.stop_len, g->oai.num_stop,
                               g->oai.min_tokens) != 0) {
        send_error(s, req, 500, "out of memory", NULL, 0);
        goto fail;
    }
    g->srv = s;
    g->req = req;
    g->id = ((uint64_t)s->cfg->frontend_id << 48) | (++s->next_seq & 0xffffffffffffull);
    g->t_arrival = folio_mono_s();
    folio_oai_make_id(ep, g->id, s->id_salt, g->oai_id, sizeof g->oai_id);
    g->rctx.endpoint = ep;
    g->rctx.id = g->oai_id;
    g->rctx.created = (int64_t)time(NULL);
    g->rctx.model = s->model_name;
    g->rctx.include_usage = g->oai.include_usage;
    folio_jw_init(&g->pending);
    folio_jw_init(&g->inflight);
    folio_jw_init(&g->text);

    if (folio_link_submit(s->link, g->id, ids, n, &g->oai, max_tokens, err, sizeof err) != 0) {
        folio_text_stream_free(&g->ts);
        send_error(s, req, 503, err, NULL, 0);
        goto fail;
    }
    free(ids);
    folio_log(s->cfg->log_requests ? FOLIO_LOG_INFO : FOLIO_LOG_DEBUG, g->id,
              "request: %s, %zu prompt tokens, max_tokens %d",
              ep == FOLIO_OAI_CHAT ? "chat" : "completion", n, max_tokens);
    s->metrics.prompt_tokens += n;
    s->metrics.requests_submitted++;
    s->metrics.requests_in_flight++;
    struct gen_req **slot = bucket(s, g->id);
    g->next = *slot;
    *slot = g;
    s->num_open++;
    struct gen_req **hook = h2o_mem_alloc_shared(&req->pool, sizeof *hook, on_req_dispose);
    *hook = g;
    return;
fail:
    free(ids);
    folio_oai_request_free(&g->oai);
    free(g);
}

/* ---- other routes ---------------------------------------------------------------- */

static void handle_health(struct server *s, h2o_req_t *req)
{
    struct folio_link_status st;
    folio_link_get_status(s->link, &st);
    if (st.valid && st.worker_ready) {
        send_body(s, req, 200, "application/json", H2O_STRLIT("{\"status\":\"ok\"}"));
        return;
    }
    char msg[256];
    if (!st.valid)
        snprintf(msg, sizeof msg, "the scheduler is not answering");
    else
        snprintf(msg, sizeof msg, "the worker is not ready: %s",
                 st.worker_state[0] ? st.worker_state : "starting");
    send_error(s, req, 503, msg, NULL, 0);
}

static void handle_metrics(struct server *s, h2o_req_t *req)
{
    struct folio_link_status st;
    folio_link_get_status(s->link, &st);
    struct folio_metrics total;
    folio_metrics_block_total(s->metrics_block, &s->metrics, &total);
    struct folio_jw b;
    folio_jw_init(&b);
    folio_metrics_render(&total, &st, s->model_name, &b);
    if (b.failed)
        send_error(s, req, 500, "out of memory", NULL, 0);
    else
        send_body(s, req, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    folio_jw_free(&b);
}

static void handle_models(struct server *s, h2o_req_t *req)
{
    struct folio_jw b;
    folio_jw_init(&b);
    folio_oai_write_models(&b, s->model_name, s->started_unix, max_model_len(s));
    send_body(s, req, 200, "application/json", b.data ? b.data : "", b.len);
    folio_jw_free(&b);
}

static bool route_model_ok(void *arg, const char *model)
{
    return model_matches(arg, model);
}

/* /tokenize, /detokenize, /version and /v1/models/{id}: api_routes.c answers
 * from in (the body, or the id). */
static void handle_api_route(struct server *s, h2o_req_t *req, enum folio_api_route route,
                             const char *in, size_t len)
{
    struct folio_api_text_ctx c = {
        .tokenizer = s->cfg->tokenizer,
        .chat_template = s->cfg->chat_template,
        .max_model_len = max_model_len(s),
        .model_ok = route_model_ok,
        .model_ok_arg = s,
        .model_name = s->model_name,
        .created = s->started_unix,
    };
    struct folio_oai_error e;
    struct folio_jw b;
    folio_jw_init(&b);
    if (folio_api_answer(&c, route, in ? in : "", len, &b, &e) != 0)
        send_error(s, req, e.status, e.message, e.param, 0);
    else if (b.failed)
        send_error(s, req, 500, "out of memory", NULL, 0);
    else
        send_body(s, req, 200, "application/json", b.data, b.len);
    folio_jw_free(&b);
}

/* With API keys set, a guarded route (api_keys.h) needs one. */
static bool authorized(struct server *s, h2o_req_t *req, h2o_iovec_t path)
{
    const struct folio_api_keys *k = s->cfg->api_keys;
    if (!k || !folio_api_keys_guard(k, path.base, path.len, s->cfg->metrics_require_key))
        return true;
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
    if (i >= 0 && folio_api_keys_allow(k, req->headers.entries[i].value.base,
                                       req->headers.entries[i].value.len))
        return true;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, NULL,
                   H2O_STRLIT("Bearer"));
    send_error(s, req, 401,
               i >= 0 ? "Incorrect API key provided."
                      : "Missing API key: send the header 'Authorization: Bearer KEY'.",
               NULL, 0);
    return false;
}

enum route_kind {
    ROUTE_COMPLETIONS,
    ROUTE_CHAT,
    ROUTE_MODELS,
    ROUTE_HEALTH,
    ROUTE_METRICS,
    ROUTE_TOKENIZE,
    ROUTE_DETOKENIZE,
    ROUTE_VERSION,
    ROUTE_PING,
};

static void dispatch(struct server *s, h2o_req_t *req, enum route_kind kind)
{
    switch (kind) {
    case ROUTE_COMPLETIONS:
        handle_generate(s, req, FOLIO_OAI_COMPLETIONS);
        break;
    case ROUTE_CHAT:
        handle_generate(s, req, FOLIO_OAI_CHAT);
        break;
    case ROUTE_MODELS:
        handle_models(s, req);
        break;
    case ROUTE_HEALTH:
    case ROUTE_PING: /* vLLM's /ping (SageMaker's probe) is /health */
        handle_health(s, req);
        break;
    case ROUTE_METRICS:
        handle_metrics(s, req);
        break;
    case ROUTE_TOKENIZE:
    case ROUTE_DETOKENIZE:
        handle_api_route(s, req, kind == ROUTE_TOKENIZE ? FOLIO_API_TOKENIZE : FOLIO_API_DETOKENIZE,
                         req->entity.base, req->entity.len);
        break;
    case ROUTE_VERSION:
        handle_api_route(s, req, FOLIO_API_VERSION, NULL, 0);
        break;
    }
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    struct server *s = ((struct handler *)self)->srv;
    h2o_iovec_t p = req->path_normalized;
    bool get = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) ||
               h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"));
    bool post = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"));
    static const struct {
        const char *path;
        enum route_kind kind;
        bool takes_get, takes_post;
    } routes[] = {
        {"/v1/completions", ROUTE_COMPLETIONS, false, true},
        {"/v1/chat/completions", ROUTE_CHAT, false, true},
        {"/v1/models", ROUTE_MODELS, true, false},
        {"/health", ROUTE_HEALTH, true, false},
        {"/metrics", ROUTE_METRICS, true, false},
        {"/tokenize", ROUTE_TOKENIZE, false, true},
        {"/detokenize", ROUTE_DETOKENIZE, false, true},
        {"/version", ROUTE_VERSION, true, false},
        {"/ping", ROUTE_PING, true, true},
    };
    if (!authorized(s, req, p))
        return 0;
    static const char model_prefix[] = "/v1/models/";
    if (p.len > sizeof model_prefix - 1 && !memcmp(p.base, model_prefix, sizeof model_prefix - 1)) {
        if (!get)
            send_error(s, req, 405, "/v1/models/{model} takes GET", NULL, 0);
        else
            handle_api_route(s, req, FOLIO_API_MODEL, p.base + sizeof model_prefix - 1,
                             p.len - (sizeof model_prefix - 1));
        return 0;
    }
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        if (!h2o_memis(p.base, p.len, routes[i].path, strlen(routes[i].path)))
            continue;
        if (!((get && routes[i].takes_get) || (post && routes[i].takes_post))) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s takes %s", routes[i].path,
                     routes[i].takes_get && routes[i].takes_post ? "GET or POST"
                     : routes[i].takes_post                      ? "POST"
                                                                 : "GET");
            send_error(s, req, 405, msg, NULL, 0);
            return 0;
        }
        dispatch(s, req, routes[i].kind);
        return 0;
    }
    char msg[256];
    snprintf(msg, sizeof msg, "no route for %.*s %.*s", (int)req->method.len, req->method.base,
             (int)(p.len > 128 ? 128 : p.len), p.base);
    send_error(s, req, 404, msg, NULL, 0);
    return 0;
}

/* ---- listening -------------------------------------------------------------------- */

static void on_accept(h2o_socket_t *listener, const char *err)
{
    struct server *s = listener->data;
    if (err)
        return;
    h2o_socket_t *sock;
    /* Several connections may be waiting; take them all. */
    for (int i = 0; i < 64 && (sock = h2o_evloop_socket_accept(listener)); i++)
        h2o_accept(&s->accept_ctx, sock);
}

static int open_listener(struct server *s, char *err, size_t errlen)
{
    const struct folio_server_config *c = s->cfg;
    char port[16];
    snprintf(port, sizeof port, "%d", c->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(c->host && *c->host ? c->host : NULL, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "--host %s: %s", c->host ? c->host : "", gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        int one = 1;
        /* SO_REUSEPORT: every frontend binds the same port and the kernel
         * spreads connections over them. */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) == 0 &&
            bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0)
            break;
        snprintf(err, errlen, "listen on %s:%d: %s", c->host ? c->host : "*", c->port,
                 strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return -1;
    s->listener = h2o_evloop_socket_create(s->ctx.loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    s->listener->data = s;
    h2o_socket_read_start(s->listener, on_accept);
    return 0;
}

static int setup_tls(struct server *s, char *err, size_t errlen)
{
    const struct folio_server_config *c = s->cfg;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, errlen, "TLS: cannot create a context");
        return -1;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, c->tls_cert) != 1) {
        snprintf(err, errlen, "--tls-cert %s: %s", c->tls_cert,
                 ERR_reason_error_string(ERR_get_error()));
        SSL_CTX_free(ctx);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, c->tls_key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen, "--tls-key %s: %s", c->tls_key,
                 ERR_reason_error_string(ERR_get_error()));
        SSL_CTX_free(ctx);
        return -1;
    }
    /* ALPN: h2 first, then http/1.1 (h2o's list). */
    h2o_ssl_register_alpn_protocols(ctx, h2o_http2_alpn_protocols);
    s->accept_ctx.ssl_ctx = ctx;
    return 0;
}

/* An error h2o answered by itself (a body past its limit...): counted like
 * Folio's own responses. */
static void count_h2o_error(void *arg, int status)
{
    folio_metrics_count_response(&((struct server *)arg)->metrics, status);
}

/* ---- run ---------------------------------------------------------------------------- */

int folio_server_run(const struct folio_server_config *cfg, char *err, size_t errlen)
{
    struct server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = -1;
    s->cfg = cfg;
    s->model_name = cfg->served_model_name;
    s->started_unix = (int64_t)time(NULL);
    s->id_salt = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ cfg->frontend_id;
    folio_metrics_init(&s->metrics, cfg->frontend_id);
    if (cfg->metrics_shm_name) {
        char merr[256];
        s->metrics_block = folio_metrics_block_attach(cfg->metrics_shm_name, cfg->frontend_id,
                                                      &s->metrics, merr, sizeof merr);
        if (!s->metrics_block)
            folio_log_warn(0, "/metrics shows this frontend's counters only: %s", merr);
    }

    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    h2o_config_init(&s->config);
    /* h2o's own limit sits above Folio's: past it, HTTP/2 gets only
     * REFUSED_STREAM (which clients retry, uploading the body again), while
     * a body between the two reaches handle_generate and gets a 413 with
     * OpenAI's error JSON on either protocol. */
    s->config.max_request_entity_size = cfg->max_body_bytes > SIZE_MAX / H2O_BODY_CAP_FACTOR
                                            ? SIZE_MAX
                                            : cfg->max_body_bytes * H2O_BODY_CAP_FACTOR;
    s->config.http1.upgrade_to_http2 = 1; /* h2c upgrade and prior knowledge */
    s->config.server_name = h2o_iovec_init(H2O_STRLIT("folio"));
    h2o_hostconf_t *host =
        h2o_config_register_host(&s->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    folio_register_error_json_filter(host, count_h2o_error, s);
    h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
    struct handler *h = (struct handler *)h2o_create_handler(path, sizeof *h);
    h->super.on_req = on_req;
    h->srv = s;

    h2o_context_init(&s->ctx, h2o_evloop_create(), &s->config);
    h2o_multithread_register_receiver(s->ctx.queue, &s->receiver, on_link_messages);
    s->accept_ctx.ctx = &s->ctx;
    s->accept_ctx.hosts = s->config.hosts;
    if (cfg->tls_cert && setup_tls(s, err, errlen) != 0)
        goto out;

    struct folio_link_config lc = {
        .frontend_id = cfg->frontend_id,
        .submit_url = cfg->submit_url,
        .ctl_url = cfg->ctl_url,
        .ring_name = cfg->ring_name,
        .ring_bytes = cfg->ring_bytes,
        .deliver = deliver,
        .deliver_arg = s,
    };
    if (folio_link_start(&lc, &s->link, err, errlen) != 0)
        goto out;
    /* Listen once registered (up to 10 s): a restarted frontend beside
     * others should not take connections it can only answer with 503. */
    double listen_at = folio_mono_s() + 10;
    while (!stop_requested && !s->registered_once && folio_mono_s() < listen_at)
        h2o_evloop_run(s->ctx.loop, 50);
    if (open_listener(s, err, errlen) != 0)
        goto out;
    folio_log_info(0, "serving %s on %s:%d (%s)", s->model_name,
                   cfg->host && *cfg->host ? cfg->host : "*", cfg->port,
                   cfg->tls_cert ? "HTTPS, HTTP/2 by ALPN" : "HTTP/1.1 and h2c");

    while (!stop_requested) {
        h2o_evloop_run(s->ctx.loop, 200);
        reap_hung_up_clients(s);
        folio_metrics_block_maybe_publish(s->metrics_block, &s->metrics);
    }

    /* Drain: stop accepting, close idle connections, let open requests end. */
    folio_log_info(0, "stopping: %zu requests open, draining up to %.0f s", s->num_open,
                   cfg->drain_seconds);
    h2o_socket_read_stop(s->listener);
    h2o_socket_close(s->listener);
    s->listener = NULL;
    h2o_context_request_shutdown(&s->ctx);
    double deadline = folio_mono_s() + cfg->drain_seconds;
    while (s->num_open > 0 && folio_mono_s() < deadline) {
        h2o_evloop_run(s->ctx.loop, 100);
        reap_hung_up_clients(s);
    }
    if (s->num_open > 0) {
        /* Each gets its one terminal outcome (an error event and [DONE], or
         * a 503) and a moment to write it, rather than a cut connection. */
        folio_log_warn(0, "%zu requests still open after the drain; ending them", s->num_open);
        fail_all(s, "the server is shutting down");
        double flushed_by = folio_mono_s() + 0.5;
        while (s->num_open > 0 && folio_mono_s() < flushed_by)
            h2o_evloop_run(s->ctx.loop, 50);
    }
    folio_metrics_block_publish(s->metrics_block, &s->metrics); /* what the drain ended */
    rc = 0;
out:
    if (s->link) {
        folio_link_stop(s->link);       /* no more deliveries after this */
        h2o_evloop_run(s->ctx.loop, 0); /* hand queued messages to the receiver to free */
    }
    if (s->listener)
        h2o_socket_close(s->listener);
    h2o_multithread_unregister_receiver(s->ctx.queue, &s->receiver);
    /* h2o 2.2.5 asserts when a context is disposed while connections (even
     * idle keep-alive ones being closed) are still registered, and the
     * process exits right after this: h2o's state stays reachable from here
     * instead of being torn down. */
    last_server = s;
    return rc;
}
