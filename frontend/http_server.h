/* The frontend's HTTP server on h2o's own event loop (libh2o-evloop):
 * HTTP/1.1 with keep-alive, h2c with prior knowledge (and the h2c upgrade),
 * HTTP/2 over TLS with ALPN when a certificate is given; SO_REUSEPORT so any
 * number of frontends share one port. Routes the OpenAI endpoints, vLLM's
 * /tokenize, /detokenize, /version and /ping, /health and /metrics (with the
 * API keys' check where keys are set), and runs each generation request: tokenize, Submit, turn
 * token events into SSE chunks or one response, Abort when the client goes. */
#ifndef FOLIO_HTTP_SERVER_H
#define FOLIO_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api_keys.h"
#include "chat_template.h"
#include "reasoning_parser.h"
#include "sampling_params.h"
#include "tokenizer.h"
#include "tool_parser.h"

struct folio_server_config {
    const char *host;
    int port;
    const char *tls_cert, *tls_key; /* both or neither */
    const char *served_model_name;
    const char *model_dir;
    int32_t max_model_len; /* from config.json; the scheduler's RegisterReply wins */
    uint32_t frontend_id;
    const char *submit_url, *ctl_url; /* nng URLs of the scheduler */
    const char *ring_name;            /* this frontend's token-event ring */
    size_t ring_bytes;
    size_t max_body_bytes;
    double drain_seconds; /* on SIGTERM: wait this long for open requests */
    const struct folio_tokenizer *tokenizer;
    const struct folio_chat_template *chat_template; /* NULL: chat requests get 400 */
    const struct folio_api_keys *api_keys;           /* none: every route is open */
    bool metrics_require_key;                        /* /metrics needs a key too */
    const char *metrics_shm_name; /* the counters all frontends share (NULL: private) */
    int32_t max_logprobs;         /* a request asking for more gets 400 */
    /* The model's recommended sampling settings, for requests that omit them. */
    const struct folio_sampling_defaults *sampling_defaults;
    bool log_requests; /* one info line per request (else debug) */
    /* Structured outputs: the compile cache that validates each request's constraint (over
     * the tokenizer's vocab); NULL when it could not be built, grammar_error saying why. */
    struct folio_grammar_cache *grammar;
    const char *grammar_error;
    /* Tool calling and reasoning: --tool-call-parser (NULL: none), --enable-auto-tool-choice,
     * --reasoning-parser. */
    const struct folio_tool_parser_ops *tool_parser;
    bool enable_auto_tool_choice;
    enum folio_reasoning_kind reasoning;
};

/* Serves until SIGTERM/SIGINT, then stops accepting, lets open requests
 * finish (up to drain_seconds) and returns 0. -1 with err on a start-up
 * failure (port in use, bad certificate, ...). */
int folio_server_run(const struct folio_server_config *cfg, char *err, size_t errlen);

#endif
