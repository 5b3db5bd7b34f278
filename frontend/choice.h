/* One choice of a completion request: prompt i's sample j (index i * n + j),
 * which the scheduler runs as a request of its own. Its text as it streams
 * (stop strings, detokenization), its logprobs, the echoed prompt, and the
 * SSE chunks or the text it adds to the whole response. Pure: no I/O, so the
 * HTTP loop only routes token events to it. */
#ifndef FOLIO_CHOICE_H
#define FOLIO_CHOICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_output.h"
#include "ipc_records.h"
#include "json_writer.h"
#include "openai_api.h"
#include "stream.h"
#include "tokenizer.h"

struct folio_choice {
    uint32_t index;                     /* in the response: prompt * n + sample */
    uint32_t prompt;                    /* which prompt of the request */
    uint32_t prompt_tokens;             /* its length, for continuous usage stats */
    struct folio_oai_response_ctx rctx; /* the request's, with this choice's index */
    struct folio_text_stream ts;
    struct folio_jw text;                /* non-streaming: the echo and the completion */
    struct folio_oai_token_logprob *lps; /* non-streaming logprobs, texts owned */
    size_t num_lps, cap_lps;
    size_t text_base;   /* bytes of echoed prompt before the completion */
    const char *finish; /* "stop" or "length" once finished, else NULL */
    /* echo with logprobs, streaming: the echo chunk waits for the prompt's
     * logprobs (the first token's null, then one per further token). */
    const char *echo_text; /* borrowed from the request; NULL once written */
    size_t echo_len;
    struct folio_oai_token_logprob *echo_lps;
    size_t num_echo_lps, want_echo_lps;
    /* chat with a reasoning or tool parser: the text as a message (NULL: plain text) */
    struct folio_chat_output *out;
    struct folio_oai_chat_parts parts; /* the whole message's, for the response */
    bool reasoning_field;              /* the message has reasoning_content */
    bool named_call;                   /* a named function: finish_reason stays "stop" */
    bool hide_special_stop; /* special tokens are text for the parser: not the one that ends it */
};

int folio_choice_init(struct folio_choice *c, const struct folio_tokenizer *t,
                      const struct folio_oai_request *r, const struct folio_oai_response_ctx *rctx,
                      uint32_t index, uint32_t prompt, uint32_t prompt_tokens);
void folio_choice_free(struct folio_choice *c);

/* The choice's text goes through a reasoning and/or tool parser (chat_output.h).
 * reasoning_field: the message carries reasoning_content; named_call: the calls
 * come from a named tool_choice; hide_special_stop: special tokens were kept in
 * the text for the parser, but the one that stops the text is not text. 0, or
 * -1 when out of memory. */
int folio_choice_set_output(struct folio_choice *c, const struct folio_chat_output_cfg *cfg,
                            bool reasoning_field, bool named_call, bool hide_special_stop);

/* A streamed chat choice's first chunk: the role, no text. */
void folio_choice_role_chunk(const struct folio_choice *c, const struct folio_oai_request *r,
                             struct folio_jw *out);

/* echo: the prompt's text leads the choice's text (a chunk of its own when
 * streaming, into out). With logprobs, the prompt's tokens lead its logprobs:
 * the first one's null (nothing precedes it), the others' as the scheduler
 * sends them (folio_choice_prompt_lps); a streamed echo waits for them. text
 * must outlive the choice. */
int folio_choice_echo(struct folio_choice *c, const struct folio_tokenizer *t,
                      const struct folio_oai_request *r, const char *text, size_t len,
                      const int32_t *prompt_ids, size_t num_prompt_ids, struct folio_jw *out);

/* An event's prompt logprobs (echo with logprobs). */
void folio_choice_prompt_lps(struct folio_choice *c, const struct folio_tokenizer *t,
                             const struct folio_oai_request *r, const struct folio_event_view *v,
                             struct folio_jw *out);

/* What a token event did to the choice. */
enum folio_choice_step {
    FOLIO_CHOICE_MORE,        /* more tokens follow */
    FOLIO_CHOICE_FINISHED,    /* finish is set */
    FOLIO_CHOICE_STOP_STRING, /* finished by a stop string the scheduler does not know of */
    FOLIO_CHOICE_BAD_TOKEN,   /* a token id the tokenizer does not know */
};

/* Takes the event's tokens: streaming, a chunk into out; else into the
 * choice's text and logprobs. With continuous usage stats every chunk of
 * the choice (role and echo ones too) carries its prompt's tokens and the
 * tokens it has generated up to and including that chunk, as vLLM counts
 * them per choice. *used: tokens taken (those after a stop string are
 * dropped). */
enum folio_choice_step folio_choice_event(struct folio_choice *c, const struct folio_tokenizer *t,
                                          const struct folio_oai_request *r,
                                          const struct folio_event_view *v, struct folio_jw *out,
                                          uint32_t *used);

/* The choice as the whole response lists it (valid while c is). */
struct folio_oai_choice folio_choice_result(struct folio_choice *c, bool with_logprobs);

#endif
