#include "http_server.h"
#include "http_internal.h"

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
#include "h2o/http2_internal.h"

#include "api_routes.h"
#include "chat_prompt.h"
#include "ipc_records.h"
#include "log.h"
#include "metrics.h"
#include "metrics_shared.h"
#include "openai_api.h"
#include "scheduler_link.h"
#include "choice.h"
#include "clock.h"
#include "error_json_filter.h"
#include "h2_body_limit.h"
#include "http1_framing.h"

static volatile sig_atomic_t stop_requested;
static struct server *volatile last_server; /* see the end of folio_server_run */

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* ---- other routes ---------------------------------------------------------------- */

static void handle_health(struct server *s, h2o_req_t *req)
{
    struct folio_link_status st;
    folio_link_get_status(s->link, &st);
    if (st.valid && st.worker_ready) {
        http_send_body(s, req, 200, "application/json", H2O_STRLIT("{\"status\":\"ok\"}"));
        return;
    }
    char msg[256];
    if (!st.valid)
        snprintf(msg, sizeof msg, "the scheduler is not answering");
    else
        snprintf(msg, sizeof msg, "the worker is not ready: %s",
                 st.worker_state[0] ? st.worker_state : "starting");
    http_send_error(s, req, 503, msg, NULL, 0);
}

void http_note_metrics(struct server *s)
{
    struct timespec t;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) == 0)
        s->metrics.cpu_seconds = s->cpu_base + (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
    folio_link_get_status(s->link, &s->metrics.sched);
}

static void handle_metrics(struct server *s, h2o_req_t *req)
{
    http_note_metrics(s);
    struct folio_metrics total;
    folio_metrics_block_total(s->metrics_block, &s->metrics, &total);
    struct folio_jw b;
    folio_jw_init(&b);
    folio_metrics_render(&total, s->model_name, &b);
    if (b.failed)
        http_send_error(s, req, 500, "out of memory", NULL, 0);
    else
        http_send_body(s, req, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    folio_jw_free(&b);
}

static void handle_models(struct server *s, h2o_req_t *req)
{
    struct folio_jw b;
    folio_jw_init(&b);
    folio_oai_write_models(&b, s->model_name, s->started_unix, http_max_model_len(s));
    http_send_body(s, req, 200, "application/json", b.data ? b.data : "", b.len);
    folio_jw_free(&b);
}

static bool route_model_ok(void *arg, const char *model)
{
    return http_model_matches(arg, model);
}

/* /tokenize, /detokenize, /version and /v1/models/{id}: api_routes.c answers
 * from in (the body, or the id). */
static void handle_api_route(struct server *s, h2o_req_t *req, enum folio_api_route route,
                             const char *in, size_t len)
{
    struct folio_api_text_ctx c = {
        .tokenizer = s->cfg->tokenizer,
        .chat_template = s->cfg->chat_template,
        .max_model_len = http_max_model_len(s),
        .model_ok = route_model_ok,
        .model_ok_arg = s,
        .model_name = s->model_name,
        .created = s->started_unix,
    };
    struct folio_oai_error e;
    struct folio_jw b;
    folio_jw_init(&b);
    if (folio_api_answer(&c, route, in ? in : "", len, &b, &e) != 0)
        http_send_error(s, req, e.status, e.message, e.param, 0);
    else if (b.failed)
        http_send_error(s, req, 500, "out of memory", NULL, 0);
    else
        http_send_body(s, req, 200, "application/json", b.data, b.len);
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
    http_send_error(s, req, 401,
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

/* An HTTP/1.x request's head as received, where h2o still holds it: at the
 * start of the connection's input, or, for the request that upgraded to h2c
 * (stream 1 of a connection with HTTP/1.1 input), of the input h2o keeps.
 * Empty for an HTTP/2 request. */
static h2o_iovec_t http1_head(struct server *s, h2o_req_t *req)
{
    h2o_buffer_t *in = NULL;
    if (req->conn->callbacks == s->http1_callbacks) {
        in = req->conn->callbacks->get_socket(req->conn)->input;
    } else {
        h2o_http2_conn_t *conn = (h2o_http2_conn_t *)req->conn;
        if (H2O_STRUCT_FROM_MEMBER(h2o_http2_stream_t, req, req)->stream_id == 1)
            in = conn->_http1_req_input;
    }
    return in ? h2o_iovec_init(in->bytes, in->size) : h2o_iovec_init(NULL, 0);
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    struct server *s = ((struct handler *)self)->srv;
    /* An h2c connection by Upgrade is h2o's own doing: its body limit starts
     * with its first request, which h2o read as HTTP/1.1. */
    if (req->conn->callbacks != s->http1_callbacks)
        folio_h2_body_limit((h2o_http2_conn_t *)req->conn, s->cfg->max_body_bytes);
    h2o_iovec_t head = http1_head(s, req);
    const char *framing = head.len ? folio_http1_framing_error(head.base, head.len) : NULL;
    if (framing) {
        req->http1_is_persistent = 0; /* what follows on the connection cannot be trusted */
        http_send_error(s, req, 400, framing, NULL, 0);
        return 0;
    }
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
            http_send_error(s, req, 405, "/v1/models/{model} takes GET", NULL, 0);
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
            http_send_error(s, req, 405, msg, NULL, 0);
            return 0;
        }
        dispatch(s, req, routes[i].kind);
        return 0;
    }
    char msg[256];
    snprintf(msg, sizeof msg, "no route for %.*s %.*s", (int)req->method.len, req->method.base,
             (int)(p.len > 128 ? 128 : p.len), p.base);
    http_send_error(s, req, 404, msg, NULL, 0);
    return 0;
}

/* ---- listening -------------------------------------------------------------------- */

/* Folio starts h2o's protocols itself instead of h2o_accept, so that it holds
 * each connection before h2o parses a byte of it: an HTTP/2 connection gets
 * its body limit (h2_body_limit.h) before its first frame, and an HTTP/1
 * connection is known as one (http1_head). Until then a connection is
 * pending: in its TLS handshake, or, in clear text, until its first bytes
 * tell HTTP/2's preface from an HTTP/1 request. */
struct pending_conn {
    struct server *s;
    h2o_socket_t *sock;
    h2o_timeout_entry_t timeout;
    struct timeval connected_at;
};

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static void end_pending(struct pending_conn *p)
{
    h2o_timeout_unlink(&p->timeout);
    free(p);
}

static void close_pending(struct pending_conn *p)
{
    h2o_socket_t *sock = p->sock;
    end_pending(p);
    h2o_socket_close(sock);
}

static void on_pending_timeout(h2o_timeout_entry_t *entry)
{
    close_pending(H2O_STRUCT_FROM_MEMBER(struct pending_conn, timeout, entry));
}

/* Hands the connection to h2o with the bytes already read held back until
 * h2o's connection exists, then lets h2o read them. */
static void start_protocol(struct pending_conn *p, bool http2)
{
    struct server *s = p->s;
    h2o_socket_t *sock = p->sock;
    struct timeval connected_at = p->connected_at;
    end_pending(p);
    h2o_buffer_t *early = sock->input;
    h2o_buffer_init(&sock->input, &h2o_socket_buffer_prototype);
    if (http2) {
        h2o_http2_accept(&s->accept_ctx, sock, connected_at);
        folio_h2_body_limit(sock->data, s->cfg->max_body_bytes);
    } else {
        h2o_http1_accept(&s->accept_ctx, sock, connected_at);
        s->http1_callbacks = ((h2o_conn_t *)sock->data)->callbacks;
    }
    h2o_buffer_dispose(&sock->input);
    sock->input = early;
    if (early->size != 0)
        sock->_cb.read(sock, NULL); /* h2o's reader, as h2o's accept calls it */
}

static void on_clear_text(h2o_socket_t *sock, const char *err)
{
    struct pending_conn *p = sock->data;
    if (err) {
        close_pending(p);
        return;
    }
    size_t n =
        sock->input->size < sizeof h2_preface - 1 ? sock->input->size : sizeof h2_preface - 1;
    if (memcmp(sock->input->bytes, h2_preface, n) != 0)
        start_protocol(p, false);
    else if (n == sizeof h2_preface - 1)
        start_protocol(p, true); /* h2c with prior knowledge */
}

static void on_tls_handshake(h2o_socket_t *sock, const char *err)
{
    struct pending_conn *p = sock->data;
    sock->data = NULL;
    if (err) {
        close_pending(p);
        return;
    }
    h2o_iovec_t proto = h2o_socket_ssl_get_selected_protocol(sock);
    bool http2 = false;
    for (const h2o_iovec_t *id = h2o_http2_alpn_protocols; id->len; id++)
        http2 |= h2o_memis(proto.base, proto.len, id->base, id->len);
    start_protocol(p, http2);
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    struct server *s = listener->data;
    if (err)
        return;
    h2o_socket_t *sock;
    /* Several connections may be waiting; take them all. */
    for (int i = 0; i < 64 && (sock = h2o_evloop_socket_accept(listener)); i++) {
        struct pending_conn *p = calloc(1, sizeof *p);
        if (!p) {
            h2o_socket_close(sock);
            continue;
        }
        p->s = s;
        p->sock = sock;
        p->connected_at = *h2o_get_timestamp(&s->ctx, NULL, NULL);
        p->timeout.cb = on_pending_timeout;
        h2o_timeout_link(s->ctx.loop, &s->ctx.handshake_timeout, &p->timeout);
        sock->data = p;
        if (s->accept_ctx.ssl_ctx)
            h2o_socket_ssl_handshake(sock, s->accept_ctx.ssl_ctx, NULL, on_tls_handshake);
        else
            h2o_socket_read_start(sock, on_clear_text);
    }
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
    s->cpu_base = s->metrics.cpu_seconds;

    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    h2o_config_init(&s->config);
    /* h2o refuses an HTTP/1 body with a 413 as soon as it passes this (a
     * chunked one once it reaches it, hence the byte more). HTTP/2 bodies are
     * refused by h2_body_limit.c first: h2o would only reset the stream. */
    s->config.max_request_entity_size = cfg->max_body_bytes + 1;
    s->config.http1.upgrade_to_http2 = 1; /* h2c upgrade and prior knowledge */
    s->config.server_name = h2o_iovec_init(H2O_STRLIT("folio"));
    h2o_hostconf_t *host =
        h2o_config_register_host(&s->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    folio_register_error_json_filter(host, count_h2o_error, s, cfg->max_body_bytes);
    h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
    struct handler *h = (struct handler *)h2o_create_handler(path, sizeof *h);
    h->super.on_req = on_req;
    h->srv = s;

    h2o_context_init(&s->ctx, h2o_evloop_create(), &s->config);
    h2o_multithread_register_receiver(s->ctx.queue, &s->receiver, http_on_link_messages);
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
        .deliver = http_deliver,
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
        http_reap_hung_up_clients(s);
        if (folio_metrics_block_due(s->metrics_block)) {
            http_note_metrics(s);
            folio_metrics_block_publish(s->metrics_block, &s->metrics);
        }
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
        http_reap_hung_up_clients(s);
    }
    if (s->num_open > 0) {
        /* Each gets its one terminal outcome (an error event and [DONE], or
         * a 503) and a moment to write it, rather than a cut connection. */
        folio_log_warn(0, "%zu requests still open after the drain; ending them", s->num_open);
        http_fail_all(s, "the server is shutting down");
        double flushed_by = folio_mono_s() + 0.5;
        while (s->num_open > 0 && folio_mono_s() < flushed_by)
            h2o_evloop_run(s->ctx.loop, 50);
    }
    http_note_metrics(s);
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
