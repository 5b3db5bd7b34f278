/* The OpenAI HTTP API as pure functions: a request body in, a validated
 * request out (or a status + message); the response bodies and SSE chunks out,
 * in the exact shape OpenAI's and vLLM's servers write them, so that the
 * official clients, GuideLLM and curl scripts all read them. No I/O here:
 * tests/unit/test_openai_api.c covers it without a server. */
#ifndef FOLIO_OPENAI_API_H
#define FOLIO_OPENAI_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json_writer.h"
#include "openai_error.h"
#include "sampling_params.h"
#include "seq_params.h"
#include "structured_output.h"
#include "tool_request.h"

enum folio_oai_endpoint {
    FOLIO_OAI_COMPLETIONS,
    FOLIO_OAI_CHAT,
};

#define FOLIO_OAI_MAX_STOPS 64
#define FOLIO_OAI_MAX_N 128        /* OpenAI's limit on n */
#define FOLIO_OAI_MAX_CHOICES 1024 /* prompts x n of one request */

struct folio_oai_message {
    char *role;
    char *content; /* the text parts joined; "" for null content */
};

/* One completions prompt: text, or token ids (text NULL). */
struct folio_oai_prompt {
    char *text;
    size_t len;
    int32_t *ids;
    size_t num_ids;
};

struct folio_oai_request {
    enum folio_oai_endpoint endpoint;
    char *model; /* NULL when absent */

    /* completions: one prompt or a batch; choice i * n + j is prompt i's
     * sample j */
    struct folio_oai_prompt *prompts;
    size_t num_prompts;
    int32_t n; /* samples per prompt */
    bool echo; /* completions: the prompt leads each choice's text */
    /* chat */
    struct folio_oai_message *messages;
    size_t num_messages;
    json_t *template_messages; /* the messages as the chat template sees them, tool fields too */
    struct folio_oai_tools tools;
    bool add_generation_prompt; /* vLLM's extension; default true */

    bool stream;
    bool include_usage;    /* stream_options.include_usage */
    bool continuous_usage; /* stream_options.continuous_usage_stats, with include_usage */

    int32_t max_tokens; /* -1: to the end of the context (chat's default) */
    int32_t min_tokens;
    char **stop; /* stop strings, each non-empty UTF-8 */
    size_t *stop_len;
    size_t num_stop;
    int32_t *stop_token_ids;
    size_t num_stop_token_ids;
    bool ignore_eos;
    bool skip_special_tokens;
    bool spaces_between_special_tokens;  /* vLLM's; default true */
    bool include_stop_str_in_output;     /* vLLM's: a matched stop string stays in the text */
    struct folio_logit_bias *logit_bias; /* [num_logit_bias] */
    size_t num_logit_bias;

    float temperature, top_p, min_p;
    int32_t top_k; /* <= 0: off */
    float presence_penalty, frequency_penalty, repetition_penalty;
    bool has_seed;
    uint64_t seed;
    /* -1: no logprobs. completions: logprobs=N gives N top entries (0 gives
     * just the sampled token's); chat: logprobs=true, top_logprobs=N. */
    int32_t logprobs;
    /* response_format, structured_outputs or guided_* (or tool_choice required or
     * naming a function): the output's grammar */
    struct folio_oai_grammar grammar;
};

/* Parses and validates a request body. A field Folio does not implement is
 * a 400 naming it (openai_fields.h); invalid JSON, invalid UTF-8, wrong types and out-of-range
 * values give -1 with e filled (status 400). A sampling field the body leaves
 * out (or sends as null) takes the model's value from defaults, else
 * OpenAI's (defaults NULL: OpenAI's only). The request owns its strings; free
 * it with folio_oai_request_free (also after a failed parse). */
int folio_oai_parse_request(enum folio_oai_endpoint ep, const char *body, size_t len,
                            const struct folio_sampling_defaults *defaults,
                            struct folio_oai_request *r, struct folio_oai_error *e);
void folio_oai_request_free(struct folio_oai_request *r);

/* What sample `sample_index` of the request asks of the engine: its seed is
 * the request's plus the index (vLLM's), max_tokens as the caller resolved it
 * against the context. The pointers are the request's own. */
void folio_oai_seq_params(const struct folio_oai_request *r, uint32_t sample_index,
                          int32_t max_tokens, struct folio_seq_params *out);

/* ---- responses ---------------------------------------------------------- */

/* {"error": {"message", "type", "param", "code"}}; type follows the status
 * (invalid_request_error, not_found_error, rate_limit_error, ...). */
void folio_oai_write_error(struct folio_jw *b, int status, const char *message, const char *param);
const char *folio_oai_error_type(int status);

struct folio_oai_usage {
    uint32_t prompt_tokens;
    uint32_t completion_tokens;
    uint32_t cached_tokens;
};

/* One generated token's logprob and its top alternatives, with the token's
 * text (the caller decodes the ids). */
struct folio_oai_top {
    const char *text;
    size_t len;
    float logprob;
};
struct folio_oai_token_logprob {
    const char *text;
    size_t len;
    float logprob;
    uint32_t num_top;
    struct folio_oai_top top[FOLIO_MAX_LOGPROBS + 1]; /* completions: the sampled token may
                                                         come last */
};

/* What every chunk and response of one request shares. */
struct folio_oai_response_ctx {
    enum folio_oai_endpoint endpoint;
    const char *id;  /* "cmpl-..." or "chatcmpl-..." */
    int64_t created; /* unix seconds */
    const char *model;
    bool include_usage; /* write "usage": null in chunks without usage */
    uint32_t index;     /* the choice a chunk belongs to */
};

/* Writes "cmpl-" or "chatcmpl-" and 32 hex digits derived from request_id. */
void folio_oai_make_id(enum folio_oai_endpoint ep, uint64_t request_id, uint64_t salt, char *out,
                       size_t outlen);

/* A tool call in a message, or what a chunk adds to one: id, type and
 * name come in the call's first chunk (id NULL in the others), then pieces
 * of its arguments' JSON text. */
struct folio_oai_tool_call {
    uint32_t index;
    const char *id;
    const char *name;
    const char *args;
    size_t args_len;
};

/* What a chat message or delta carries beside its content (chat_output.h). */
struct folio_oai_chat_parts {
    bool reasoning_field; /* a reasoning parser runs: the message has reasoning_content */
    const char *reasoning;
    size_t reasoning_len;
    const struct folio_oai_tool_call *calls;
    size_t num_calls;
};

/* One SSE event "data: {...}\n\n". role_chunk: the first chat chunk (delta
 * carries role "assistant"). finish_reason NULL while more follows. lp: the
 * logprobs of this chunk's tokens (NULL when not asked); text_offset: where
 * this chunk's text starts in the whole completion (completions logprobs).
 * usage non-NULL: continuous usage stats in this chunk. */
void folio_oai_write_chunk(struct folio_jw *b, const struct folio_oai_response_ctx *c,
                           bool role_chunk, const char *text, size_t len, const char *finish_reason,
                           const struct folio_oai_token_logprob *lp, size_t num_lp,
                           size_t text_offset, const struct folio_oai_usage *usage);
/* A chat chunk whose delta may carry reasoning_content and tool_calls
 * (parts NULL: folio_oai_write_chunk's). */
void folio_oai_write_chat_chunk(struct folio_jw *b, const struct folio_oai_response_ctx *c,
                                bool role_chunk, const char *text, size_t len,
                                const struct folio_oai_chat_parts *parts, const char *finish_reason,
                                const struct folio_oai_token_logprob *lp, size_t num_lp,
                                const struct folio_oai_usage *usage);
/* The chat parts of a chunk and of a response (openai_chat_json.c): a
 * chunk's "delta":{...} (role, content unless reasoning or calls come alone,
 * reasoning_content, tool_calls with their index), and a response's
 * "message":{...} (content null when calls come without text). */
void folio_oai_write_chat_delta(struct folio_jw *b, bool role_chunk, const char *text, size_t len,
                                const struct folio_oai_chat_parts *parts,
                                const char *finish_reason);
void folio_oai_write_chat_message(struct folio_jw *b, const char *text, size_t len,
                                  const struct folio_oai_chat_parts *parts);
/* The final usage chunk of stream_options.include_usage: empty choices. */
void folio_oai_write_usage_chunk(struct folio_jw *b, const struct folio_oai_response_ctx *c,
                                 const struct folio_oai_usage *usage);
/* An error inside a stream that has already started: "data: {"error":...}\n\n". */
void folio_oai_write_stream_error(struct folio_jw *b, int status, const char *message);
#define FOLIO_OAI_SSE_DONE "data: [DONE]\n\n"

/* One choice of a whole response. A logprob that is NaN is written as null
 * (the first prompt token's under echo, which nothing precedes). */
struct folio_oai_choice {
    const char *text;
    size_t len;
    const char *finish_reason;
    const struct folio_oai_token_logprob *lp; /* NULL when not asked */
    size_t num_lp;
    /* chat: reasoning and tool calls (NULL: none); content is null when
     * there are calls and no text */
    const struct folio_oai_chat_parts *parts;
};

/* The whole non-streaming response: text_completion or chat.completion, its
 * choices indexed 0..n-1 in order. */
void folio_oai_write_response(struct folio_jw *b, const struct folio_oai_response_ctx *c,
                              const struct folio_oai_choice *choices, size_t num_choices,
                              const struct folio_oai_usage *usage);

/* GET /v1/models */
void folio_oai_write_models(struct folio_jw *b, const char *model, int64_t created,
                            int32_t max_model_len);

#endif
