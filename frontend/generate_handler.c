/* Generation requests (completions and chat): parsing, submitting choices, token events and the
 * streamed or whole response. */
#include "http_server.h"
#include "http_internal.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h2o.h"

#include "chat_prompt.h"
#include "grammar.h"
#include "ipc_records.h"
#include "log.h"
#include "metrics.h"
#include "metrics_shared.h"
#include "openai_api.h"
#include "scheduler_link.h"
#include "choice.h"
#include "clock.h"

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
    for (uint32_t k = 0; k < g->num_choices; k++) {
        struct folio_choice *c = &g->choices[k];
        if (g->oai.endpoint == FOLIO_OAI_CHAT)
            folio_choice_role_chunk(c, &g->oai, &g->pending);
        else if (g->echo)
            folio_choice_echo(c, g->srv->cfg->tokenizer, &g->oai, g->echo[c->prompt],
                              g->echo_len[c->prompt], g->echo_ids[c->prompt],
                              g->echo_num_ids[c->prompt], &g->pending);
    }
}

/* The scheduler stops working on every choice not finished yet. */
static void abort_choices(struct gen_req *g)
{
    for (uint32_t k = 0; k < g->num_submitted; k++)
        if (!g->choices[k].finish)
            folio_link_abort(g->srv->link, g->id | k);
}

/* Ends the request with an error: a status and JSON when nothing was sent
 * yet, an error event and [DONE] inside a stream that has started. The other
 * choices are aborted. */
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
    abort_choices(g);
    if (g->started) {
        folio_oai_write_stream_error(&g->pending, status, message);
        folio_jw_str(&g->pending, FOLIO_OAI_SSE_DONE);
        g->final_queued = true;
        flush(g);
        return;
    }
    g->done = true;
    http_send_error(s, g->req, status, message, NULL, retry_after);
}

/* ---- token events ------------------------------------------------------------ */

/* OpenAI's usage: each prompt counted once, the completions summed. */
static struct folio_oai_usage request_usage(const struct gen_req *g)
{
    struct folio_oai_usage u = {0, 0, 0};
    for (uint32_t i = 0; i < g->num_prompts; i++) {
        u.prompt_tokens += g->prompt_tokens[i];
        u.cached_tokens += g->cached_tokens[i];
    }
    for (uint32_t k = 0; k < g->num_choices; k++)
        u.completion_tokens += g->choices[k].ts.num_tokens;
    return u;
}

/* Every choice has finished: the usage chunk and [DONE], or the whole body. */
static void finish_request(struct gen_req *g)
{
    struct server *s = g->srv;
    struct folio_oai_usage usage = request_usage(g);
    /* One outcome per request, whatever its number of choices: the first's. */
    g->counted = true;
    folio_metrics_request_finished(&s->metrics, g->choices[0].finish, folio_mono_s() - g->t_arrival,
                                   usage.prompt_tokens, usage.completion_tokens);
    if (g->oai.stream) {
        if (g->oai.include_usage)
            folio_oai_write_usage_chunk(&g->pending, &g->rctx, &usage);
        folio_jw_str(&g->pending, FOLIO_OAI_SSE_DONE);
        g->final_queued = true;
        flush(g);
        return;
    }
    struct folio_oai_choice *res = calloc(g->num_choices, sizeof *res);
    struct folio_jw b;
    folio_jw_init(&b);
    for (uint32_t k = 0; res && k < g->num_choices; k++)
        res[k] = folio_choice_result(&g->choices[k], g->oai.logprobs >= 0);
    if (res)
        folio_oai_write_response(&b, &g->rctx, res, g->num_choices, &usage);
    free(res);
    g->done = true;
    if (!res || b.failed)
        http_send_error(s, g->req, 500, "out of memory", NULL, 0);
    else
        http_send_body(s, g->req, 200, "application/json", b.data, b.len);
    folio_jw_free(&b);
}

static void observe_latency(struct gen_req *g, uint32_t num_tokens)
{
    struct server *s = g->srv;
    double now = folio_mono_s();
    if (!g->got_event) {
        g->got_event = true;
        folio_histogram_observe(&s->metrics.queue, now - g->t_arrival);
    }
    if (num_tokens == 0)
        return;
    if (g->t_first == 0) {
        g->t_first = now;
        folio_histogram_observe(&s->metrics.ttft, now - g->t_arrival);
    } else {
        for (uint32_t i = 0; i < num_tokens; i++)
            folio_histogram_observe(&s->metrics.itl, (now - g->t_last) / num_tokens);
    }
    g->t_last = now;
}

static void handle_event(struct gen_req *g, uint32_t k, const struct folio_event_view *v)
{
    struct server *s = g->srv;
    const struct folio_event_header *h = v->hdr;
    struct folio_choice *c = &g->choices[k];
    observe_latency(g, h->num_tokens);
    if (h->finish_reason == FOLIO_FINISH_REJECTED) {
        char msg[512];
        snprintf(msg, sizeof msg, "%.*s", (int)h->message_len, v->message);
        c->finish = "rejected"; /* nothing to abort */
        g->rejected = true;
        fail_request(g, h->status ? (int)h->status : 503,
                     h->message_len ? msg : "request rejected by the scheduler", h->retry_after_s);
        return;
    }
    g->prompt_tokens[c->prompt] = h->prompt_tokens;
    if (c->index % (uint32_t)g->oai.n == 0)
        g->cached_tokens[c->prompt] = h->cached_tokens;
    if (g->oai.stream && !g->started)
        start_stream(g);
    if (h->num_prompt_lp)
        folio_choice_prompt_lps(c, s->cfg->tokenizer, &g->oai, v, &g->pending);
    uint32_t used = 0;
    enum folio_choice_step step =
        folio_choice_event(c, s->cfg->tokenizer, &g->oai, v, &g->pending, &used);
    s->metrics.generation_tokens += used;
    if (step == FOLIO_CHOICE_BAD_TOKEN) {
        fail_request(g, 500, "the scheduler sent a token id the tokenizer does not know", 0);
        return;
    }
    if (step == FOLIO_CHOICE_STOP_STRING)
        folio_link_abort(s->link, g->id | k); /* a stop string: the scheduler can stop too */
    if (c->finish) {
        if (++g->num_finished == g->num_choices) {
            finish_request(g);
            return;
        }
    } else if (h->finish_reason == FOLIO_FINISH_ERROR || h->finish_reason == FOLIO_FINISH_ABORT) {
        char msg[512];
        if (h->message_len)
            snprintf(msg, sizeof msg, "%.*s", (int)h->message_len, v->message);
        else
            snprintf(msg, sizeof msg, "%s",
                     h->finish_reason == FOLIO_FINISH_ABORT ? "the scheduler aborted the request"
                                                            : "the engine failed");
        c->finish = "error";
        fail_request(g, h->status ? (int)h->status : 503, msg, 0);
        return;
    }
    if (g->oai.stream)
        flush(g);
}

static void handle_events(struct server *s, const struct folio_link_msg *m)
{
    double t0 = folio_mono_s();
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
        struct gen_req *g = http_find(s, v.hdr->request_id & ~CHOICE_MASK);
        uint32_t k = (uint32_t)(v.hdr->request_id & CHOICE_MASK);
        if (!g || g->done || k >= g->num_submitted || g->choices[k].finish)
            continue; /* the client has gone, or a stop string ended it */
        handle_event(g, k, &v);
    }
    s->metrics.events_seconds += folio_mono_s() - t0;
}

/* Every open request fails: the scheduler that had them is gone. */
void http_fail_all(struct server *s, const char *why)
{
    for (size_t b = 0; b < NUM_BUCKETS; b++)
        for (struct gen_req *g = s->buckets[b]; g; g = g->next)
            fail_request(g, 503, why, 0);
}

void http_on_link_messages(h2o_multithread_receiver_t *receiver, h2o_linklist_t *messages)
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
                http_fail_all(s, "the scheduler restarted; the request was lost");
            s->sched_epoch = m->scheduler_epoch;
            break;
        case FOLIO_LINK_LOST:
            http_fail_all(s, "the scheduler stopped answering or restarted; the request was lost");
            break;
        }
        folio_link_msg_free(m);
    }
}

/* Runs on the link's threads: only queues the message for the loop. */
void http_deliver(void *arg, struct folio_link_msg *m)
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
void http_reap_hung_up_clients(struct server *s)
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
            abort_choices(g);
            s->metrics.client_disconnects++;
            s->metrics.finished_abort++;
            g->counted = true;
            g->done = true;
            http_send_error(s, g->req, 499, "the client closed the connection", NULL, 0);
        }
}

static void gen_req_free(struct gen_req *g)
{
    for (uint32_t k = 0; k < g->num_choices; k++)
        folio_choice_free(&g->choices[k]);
    free(g->choices);
    for (uint32_t i = 0; g->echo && i < g->num_prompts; i++) {
        free(g->echo[i]);
        free(g->echo_ids[i]);
    }
    free(g->echo);
    free(g->echo_len);
    free(g->echo_ids);
    free(g->echo_num_ids);
    free(g->prompt_tokens);
    free(g->cached_tokens);
    folio_oai_request_free(&g->oai);
    folio_jw_free(&g->pending);
    folio_jw_free(&g->inflight);
    free(g);
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
        abort_choices(g);
        s->metrics.client_disconnects++;
        s->metrics.finished_abort++;
    }
    http_table_remove(s, g);
    s->metrics.requests_in_flight--;
    gen_req_free(g);
}

bool http_model_matches(const struct server *s, const char *model)
{
    if (!model || !strcmp(model, s->model_name) || !strcmp(model, s->cfg->model_dir))
        return true;
    const char *base = strrchr(s->cfg->model_dir, '/');
    return base && !strcmp(model, base + 1);
}

/* Prompt i as token ids: tokenized text, given ids, or the rendered chat. */
static int32_t *prompt_ids(struct server *s, const struct folio_oai_request *r, size_t i, size_t *n,
                           char *err, size_t errlen)
{
    const struct folio_tokenizer *t = s->cfg->tokenizer;
    if (r->endpoint == FOLIO_OAI_COMPLETIONS) {
        const struct folio_oai_prompt *p = &r->prompts[i];
        if (p->ids) {
            int32_t *ids = malloc(p->num_ids * sizeof *ids + 1);
            if (ids)
                memcpy(ids, p->ids, p->num_ids * sizeof *ids);
            *n = p->num_ids;
            return ids;
        }
        return folio_tokenizer_encode(t, p->text, p->len, true, n);
    }
    return folio_chat_prompt_ids(t, s->cfg->chat_template, r, true, n, err, errlen);
}

int32_t http_max_model_len(struct server *s)
{
    struct folio_link_status st;
    folio_link_get_status(s->link, &st);
    return st.max_model_len > 0 ? st.max_model_len : s->cfg->max_model_len;
}

/* Prompt i's token ids, checked against the vocabulary and the context, into
 * ids[i] with its max_tokens. 0, or -1 with the error response sent. */
static int prepare_prompt(struct server *s, h2o_req_t *req, struct gen_req *g, size_t i,
                          int32_t vocab, int32_t **ids, size_t *num_ids, int32_t *max_tokens)
{
    const bool chat = g->oai.endpoint == FOLIO_OAI_CHAT;
    const char *param = chat ? "messages" : "prompt";
    char err[512] = "";
    size_t n = 0;
    if (!(ids[i] = prompt_ids(s, &g->oai, i, &n, err, sizeof err))) {
        http_send_error(s, req, err[0] ? 400 : 500, err[0] ? err : "out of memory", param, 0);
        return -1;
    }
    num_ids[i] = n;
    for (size_t t = 0; t < n; t++)
        if (ids[i][t] >= vocab) {
            snprintf(err, sizeof err, "prompt token id %d is out of the vocabulary (size %d)",
                     ids[i][t], vocab);
            http_send_error(s, req, 400, err, param, 0);
            return -1;
        }
    if (n == 0) {
        http_send_error(s, req, 400, "the prompt is empty", param, 0);
        return -1;
    }
    int32_t ctx = http_max_model_len(s);
    if ((int64_t)n >= ctx || (g->oai.max_tokens > 0 && (int64_t)n + g->oai.max_tokens > ctx)) {
        snprintf(err, sizeof err,
                 "This model's maximum context length is %d tokens. However, you requested %lld "
                 "tokens (%zu in the prompt, %d for the completion). Please reduce the length "
                 "of the prompt or completion.",
                 ctx, (long long)n + (g->oai.max_tokens > 0 ? g->oai.max_tokens : 0), n,
                 g->oai.max_tokens > 0 ? g->oai.max_tokens : 0);
        http_send_error(s, req, 400, err, param, 0);
        return -1;
    }
    max_tokens[i] = g->oai.max_tokens > 0 ? g->oai.max_tokens : ctx - (int32_t)n;
    g->prompt_tokens[i] = (uint32_t)n;
    if (g->echo) {
        const struct folio_oai_prompt *p = &g->oai.prompts[i];
        g->echo[i] = p->text ? strdup(p->text)
                             : folio_tokenizer_decode(s->cfg->tokenizer, p->ids, p->num_ids, false,
                                                      &g->echo_len[i]);
        if (p->text)
            g->echo_len[i] = p->len;
        if (!g->echo[i]) {
            http_send_error(s, req, 500, "out of memory", NULL, 0);
            return -1;
        }
    }
    return 0;
}

/* The per-prompt and per-choice arrays, and what every response shares. */
static int gen_req_alloc(struct server *s, struct gen_req *g, h2o_req_t *req,
                         enum folio_oai_endpoint ep, double t_arrival)
{
    g->srv = s;
    g->req = req;
    g->num_prompts = ep == FOLIO_OAI_CHAT ? 1 : (uint32_t)g->oai.num_prompts;
    g->num_choices = g->num_prompts * (uint32_t)g->oai.n;
    g->choices = calloc(g->num_choices, sizeof *g->choices);
    g->prompt_tokens = calloc(g->num_prompts, sizeof *g->prompt_tokens);
    g->cached_tokens = calloc(g->num_prompts, sizeof *g->cached_tokens);
    if (g->oai.echo) {
        g->echo = calloc(g->num_prompts, sizeof *g->echo);
        g->echo_len = calloc(g->num_prompts, sizeof *g->echo_len);
        g->echo_ids = calloc(g->num_prompts, sizeof *g->echo_ids);
        g->echo_num_ids = calloc(g->num_prompts, sizeof *g->echo_num_ids);
    }
    g->id = ((uint64_t)s->cfg->frontend_id << 48) |
            ((++s->next_seq << CHOICE_BITS) & 0xffffffffffffull);
    g->t_arrival = t_arrival;
    folio_oai_make_id(ep, g->id, s->id_salt, g->oai_id, sizeof g->oai_id);
    g->rctx.endpoint = ep;
    g->rctx.id = g->oai_id;
    g->rctx.created = (int64_t)time(NULL);
    g->rctx.model = s->model_name;
    g->rctx.include_usage = g->oai.include_usage;
    folio_jw_init(&g->pending);
    folio_jw_init(&g->inflight);
    return g->choices && g->prompt_tokens && g->cached_tokens &&
                   (!g->oai.echo || (g->echo && g->echo_len && g->echo_ids && g->echo_num_ids))
               ? 0
               : -1;
}

/* A chat choice's text through the reasoning and tool parsers the server and
 * the request ask for: tool_choice auto reads calls with --tool-call-parser,
 * required and a named function read the grammar's calls (and have no
 * reasoning: the grammar holds from the first token). */
static int set_chat_output(struct server *s, struct gen_req *g, struct folio_choice *c)
{
    const struct folio_oai_tools *t = &g->oai.tools;
    if (g->oai.endpoint != FOLIO_OAI_CHAT)
        return 0;
    struct folio_chat_output_cfg cfg = {
        .reasoning = s->cfg->reasoning,
        .max_calls = t->parallel ? 0 : 1,
        .id_seed = g->id ^ ((uint64_t)c->index << 48) ^ s->id_salt,
        .function = t->function,
    };
    switch (t->choice) {
    case FOLIO_TOOL_CHOICE_AUTO:
        cfg.parser = s->cfg->tool_parser;
        break;
    case FOLIO_TOOL_CHOICE_REQUIRED:
        cfg.parser = &folio_tool_parser_required;
        cfg.reasoning = FOLIO_REASONING_NONE;
        break;
    case FOLIO_TOOL_CHOICE_NAMED:
        cfg.parser = &folio_tool_parser_named;
        cfg.reasoning = FOLIO_REASONING_NONE;
        break;
    default:
        break;
    }
    if (!cfg.parser && cfg.reasoning == FOLIO_REASONING_NONE)
        return 0; /* plain text, as without these features */
    return folio_choice_set_output(c, &cfg, s->cfg->reasoning != FOLIO_REASONING_NONE,
                                   t->choice == FOLIO_TOOL_CHOICE_NAMED, g->hide_special_stop);
}

/* Submits every choice: prompt i's sample j as request id | (i * n + j),
 * with seed + j when the client gave a seed (as vLLM seeds its n samples).
 * 0, or -1 with the 503 sent and the choices already submitted aborted. */
static int submit_choices(struct server *s, h2o_req_t *req, struct gen_req *g, int32_t **ids,
                          const size_t *num_ids, const int32_t *max_tokens)
{
    char err[512];
    for (uint32_t k = 0; k < g->num_choices; k++) {
        uint32_t i = k / (uint32_t)g->oai.n, j = k % (uint32_t)g->oai.n;
        struct folio_choice *c = &g->choices[k];
        if (folio_choice_init(c, s->cfg->tokenizer, &g->oai, &g->rctx, k, i, g->prompt_tokens[i]) !=
            0) {
            abort_choices(g);
            http_send_error(s, req, 500, "out of memory", NULL, 0);
            return -1;
        }
        if (g->echo && !g->oai.stream &&
            folio_choice_echo(c, s->cfg->tokenizer, &g->oai, g->echo[i], g->echo_len[i], ids[i],
                              num_ids[i], NULL) != 0) {
            abort_choices(g);
            http_send_error(s, req, 500, "out of memory", NULL, 0);
            return -1;
        }
        if (set_chat_output(s, g, c) != 0) {
            abort_choices(g);
            http_send_error(s, req, 500, "out of memory", NULL, 0);
            return -1;
        }
        struct folio_seq_params params;
        folio_oai_seq_params(&g->oai, j, max_tokens[i], &params);
        if (folio_link_submit(s->link, g->id | k, ids[i], num_ids[i], &params, err, sizeof err) !=
            0) {
            abort_choices(g);
            http_send_error(s, req, 503, err, NULL, 0);
            return -1;
        }
        g->num_submitted = k + 1;
    }
    return 0;
}

/* A request's constraint compiled by the engine (bounded by its limits; a
 * schema that many requests share compiles once), so that a bad schema,
 * regex or grammar is a 400 naming its field and the engine's message. 0,
 * or -1 with the 400 sent. */
static int check_grammar(struct server *s, h2o_req_t *req, const struct folio_oai_grammar *gr)
{
    char err[600];
    if (!s->cfg->grammar)
        snprintf(err, sizeof err, "structured outputs are not available on this server: %s",
                 s->cfg->grammar_error ? s->cfg->grammar_error : "no grammar engine");
    else if (folio_grammar_compile(s->cfg->grammar, gr->kind, gr->text, gr->len, err, sizeof err) ==
             0)
        return 0;
    http_send_error(s, req, 400, err, gr->param, 0);
    return -1;
}

/* The request's tools against what the server can do: tool_choice auto needs
 * a parser (vLLM's 400), required and a named function need each function's
 * parameters to compile as a grammar (a 400 naming the tool when one does
 * not). A parser whose marker is a special token (Llama's <|python_tag|>,
 * Mistral's [TOOL_CALLS]) needs special tokens kept in the text. 0, or -1
 * with the 400 sent. */
static int check_tools(struct server *s, h2o_req_t *req, struct gen_req *g)
{
    struct folio_oai_tools *t = &g->oai.tools;
    if (t->choice == FOLIO_TOOL_CHOICE_AUTO) {
        if (!s->cfg->enable_auto_tool_choice || !s->cfg->tool_parser) {
            http_send_error(s, req, 400,
                            "\"auto\" tool choice requires --enable-auto-tool-choice and "
                            "--tool-call-parser to be set",
                            "tool_choice", 0);
            return -1;
        }
        const char *marker = s->cfg->tool_parser->marker;
        int32_t id = marker ? folio_tokenizer_token_id(s->cfg->tokenizer, marker) : -1;
        if (id >= 0 && folio_tokenizer_is_special(s->cfg->tokenizer, id)) {
            g->oai.skip_special_tokens = false;
            g->hide_special_stop = true;
        }
        return 0;
    }
    if (t->choice != FOLIO_TOOL_CHOICE_REQUIRED && t->choice != FOLIO_TOOL_CHOICE_NAMED)
        return 0;
    for (size_t i = 0; i < t->num_tools && s->cfg->grammar; i++) {
        char *params = folio_oai_tool_parameters(t, i);
        json_t *fn = json_object_get(json_array_get(t->tools, i), "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (t->choice == FOLIO_TOOL_CHOICE_NAMED && strcmp(name, t->function) != 0) {
            free(params);
            continue;
        }
        char err[600], param[64];
        int rc = params ? folio_grammar_compile(s->cfg->grammar, FOLIO_GRAMMAR_JSON_SCHEMA, params,
                                                strlen(params), err, sizeof err)
                        : -1;
        free(params);
        if (rc != 0) {
            snprintf(param, sizeof param, "tools[%zu].function.parameters", i);
            http_send_error(s, req, params ? 400 : 500, params ? err : "out of memory", param, 0);
            return -1;
        }
    }
    return 0;
}

/* A generation request from its body to the scheduler: parsed, checked,
 * templated and tokenized, then submitted; or answered with its error. */
static void admit(struct server *s, h2o_req_t *req, enum folio_oai_endpoint ep, double t_arrival)
{
    if (req->entity.len > s->cfg->max_body_bytes) {
        char msg[160];
        snprintf(msg, sizeof msg, "the request body has %zu bytes; the maximum is %zu",
                 req->entity.len, s->cfg->max_body_bytes);
        http_send_error(s, req, 413, msg, NULL, 0);
        return;
    }
    struct gen_req *g = calloc(1, sizeof *g);
    if (!g) {
        http_send_error(s, req, 500, "out of memory", NULL, 0);
        return;
    }
    struct folio_oai_error e;
    char err[512];
    int32_t **ids = NULL, *max_tokens = NULL;
    size_t *num_ids = NULL, total = 0;
    uint32_t num_prompts = 0;
    if (folio_oai_parse_request(ep, req->entity.base ? req->entity.base : "", req->entity.len,
                                s->cfg->sampling_defaults, &g->oai, &e) != 0) {
        http_send_error(s, req, e.status, e.message, e.param, 0);
        goto fail;
    }
    if (!http_model_matches(s, g->oai.model)) {
        snprintf(err, sizeof err, "The model `%s` does not exist.", g->oai.model);
        http_send_error(s, req, 404, err, "model", 0);
        goto fail;
    }
    if (check_tools(s, req, g) != 0)
        goto fail;
    if (g->oai.grammar.on && check_grammar(s, req, &g->oai.grammar) != 0)
        goto fail;
    if (g->oai.logprobs > s->cfg->max_logprobs) {
        snprintf(err, sizeof err, "at most %d logprobs may be asked for (--max-logprobs), got %d",
                 s->cfg->max_logprobs, g->oai.logprobs);
        http_send_error(s, req, 400, err, ep == FOLIO_OAI_CHAT ? "top_logprobs" : "logprobs", 0);
        goto fail;
    }
    struct folio_link_status st;
    folio_link_get_status(s->link, &st);
    if (!st.valid) {
        http_send_error(s, req, 503, "the scheduler is not available; retry shortly", NULL, 0);
        goto fail;
    }
    int alloc_rc = gen_req_alloc(s, g, req, ep, t_arrival);
    num_prompts = g->num_prompts;
    if (alloc_rc != 0 || !(ids = calloc(g->num_prompts, sizeof *ids)) ||
        !(num_ids = calloc(g->num_prompts, sizeof *num_ids)) ||
        !(max_tokens = calloc(g->num_prompts, sizeof *max_tokens))) {
        http_send_error(s, req, 500, "out of memory", NULL, 0);
        goto fail;
    }
    int32_t vocab = folio_tokenizer_vocab_size(s->cfg->tokenizer);
    if (st.vocab_size > 0 && st.vocab_size > vocab)
        vocab = st.vocab_size;
    for (uint32_t i = 0; i < g->num_prompts; i++) {
        if (prepare_prompt(s, req, g, i, vocab, ids, num_ids, max_tokens) != 0)
            goto fail;
        total += num_ids[i];
    }
    if (submit_choices(s, req, g, ids, num_ids, max_tokens) != 0)
        goto fail;
    for (uint32_t i = 0; g->echo && i < g->num_prompts; i++) {
        g->echo_ids[i] = ids[i]; /* the streamed echo's logprobs name them */
        g->echo_num_ids[i] = num_ids[i];
        ids[i] = NULL;
    }
    folio_log(s->cfg->log_requests ? FOLIO_LOG_INFO : FOLIO_LOG_DEBUG, g->id,
              "request: %s, %u choices, %zu prompt tokens, max_tokens %d",
              ep == FOLIO_OAI_CHAT ? "chat" : "completion", g->num_choices, total, max_tokens[0]);
    s->metrics.prompt_tokens += total;
    s->metrics.requests_submitted++;
    s->metrics.requests_in_flight++;
    struct gen_req **slot = http_bucket(s, g->id);
    g->next = *slot;
    *slot = g;
    s->num_open++;
    struct gen_req **hook = h2o_mem_alloc_shared(&req->pool, sizeof *hook, on_req_dispose);
    *hook = g;
    g = NULL;
fail:
    for (uint32_t i = 0; ids && i < num_prompts; i++)
        free(ids[i]);
    free(ids);
    free(num_ids);
    free(max_tokens);
    if (g)
        gen_req_free(g);
}

void handle_generate(struct server *s, h2o_req_t *req, enum folio_oai_endpoint ep)
{
    double t0 = folio_mono_s(); /* the request's arrival: its body is in */
    admit(s, req, ep, t0);
    s->metrics.admit_seconds += folio_mono_s() - t0;
}
