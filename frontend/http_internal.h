/* The HTTP server's internal types, and the functions its files share: the
 * request table (request_table.c), plain responses (http_reply.c) and the
 * generation handler (generate_handler.c), which http_server.c calls. */
#ifndef FOLIO_HTTP_INTERNAL_H
#define FOLIO_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "h2o.h"

#include "choice.h"
#include "http_server.h"
#include "json_writer.h"
#include "metrics.h"
#include "metrics_shared.h"
#include "openai_api.h"
#include "scheduler_link.h"

#define NUM_BUCKETS 4096

/* One generation request (completion or chat) from arrival to its last byte.
 * It lives exactly as long as the h2o request: freed when h2o disposes of the
 * request's memory pool, which also tells us the client went away. Its
 * choices (prompts x n) run as scheduler requests id + 0 .. id + k - 1. */
struct gen_req {
    struct gen_req *next; /* hash chain */
    struct server *srv;
    uint64_t id; /* choice k's scheduler request id is id | k */
    h2o_req_t *req;
    h2o_generator_t gen;
    struct folio_oai_request oai;
    char oai_id[64];
    struct folio_oai_response_ctx rctx;
    bool started; /* streaming: 200 and headers sent */
    bool sending; /* h2o_send issued, proceed not yet called */
    bool final_queued;
    bool got_event;
    bool done;              /* the last byte is handed to h2o: later events are ignored */
    bool rejected;          /* refused by the scheduler's admission control */
    bool counted;           /* its one finish reason is counted (it may still be sending) */
    bool hide_special_stop; /* special tokens kept for the tool parser; the stopping one hidden */
    struct folio_jw pending, inflight;
    struct folio_choice *choices;
    uint32_t num_choices, num_submitted, num_finished;
    uint32_t num_prompts;
    uint32_t *prompt_tokens, *cached_tokens; /* per prompt */
    char **echo;                             /* per prompt: its text, when echo */
    size_t *echo_len;
    int32_t **echo_ids; /* per prompt: its token ids, when echo */
    size_t *echo_num_ids;
    double t_arrival, t_first, t_last;
};

/* Choice k of a request travels as request id | k. */
#define CHOICE_BITS 10
#define CHOICE_MASK ((1ull << CHOICE_BITS) - 1)
_Static_assert(FOLIO_OAI_MAX_CHOICES <= (1 << CHOICE_BITS), "choice index bits");

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
    struct folio_metrics_block *metrics_block;   /* every frontend's counters; NULL: own only */
    const h2o_conn_callbacks_t *http1_callbacks; /* h2o's HTTP/1 connections' */
    struct gen_req *buckets[NUM_BUCKETS];
    size_t num_open;
    uint64_t next_seq, id_salt;
    uint32_t sched_epoch;
    bool registered_once;
    int64_t started_unix;
    const char *model_name;
    double last_reap;
    double cpu_base; /* a restarted frontend's predecessor's CPU seconds */
};

struct gen_req **http_bucket(struct server *s, uint64_t id);
struct gen_req *http_find(struct server *s, uint64_t id);
void http_table_remove(struct server *s, struct gen_req *g);
void http_send_body(struct server *s, h2o_req_t *req, int status, const char *type,
                    const char *body, size_t len);
void http_send_error(struct server *s, h2o_req_t *req, int status, const char *message,
                     const char *param, uint32_t retry_after_s);
void http_fail_all(struct server *s, const char *why);
void http_on_link_messages(h2o_multithread_receiver_t *receiver, h2o_linklist_t *messages);
void http_deliver(void *arg, struct folio_link_msg *m);
void http_reap_hung_up_clients(struct server *s);
bool http_model_matches(const struct server *s, const char *model);
int32_t http_max_model_len(struct server *s);
void handle_generate(struct server *s, h2o_req_t *req, enum folio_oai_endpoint ep);
/* Brings what this frontend publishes up to date: metrics.cpu_seconds (the
 * process's CPU time) and metrics.sched (the scheduler's latest status). */
void http_note_metrics(struct server *s);

#endif
