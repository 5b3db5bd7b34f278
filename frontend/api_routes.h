/* The routes beside generation, as vLLM and OpenAI serve them: /tokenize,
 * /detokenize, /version and /v1/models/{id}. Pure functions like
 * openai_api.h (a body in, a JSON body or an error out) so that
 * tests/unit/test_api_routes.c covers them without a server. */
#ifndef FOLIO_API_ROUTES_H
#define FOLIO_API_ROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_template.h"
#include "json_writer.h"
#include "openai_api.h"
#include "tokenizer.h"

struct folio_api_text_ctx {
    const struct folio_tokenizer *tokenizer;
    const struct folio_chat_template *chat_template; /* NULL: messages get 400 */
    int32_t max_model_len;
    /* Whether a request's "model" names the served model (NULL: absent). */
    bool (*model_ok)(void *arg, const char *model);
    void *model_ok_arg;
    const char *model_name; /* as /v1/models lists it */
    int64_t created;
};

enum folio_api_route {
    FOLIO_API_TOKENIZE,   /* in: the request body */
    FOLIO_API_DETOKENIZE, /* in: the request body */
    FOLIO_API_VERSION,    /* in: nothing */
    FOLIO_API_MODEL,      /* in: the {id} of /v1/models/{id}, maybe percent-encoded */
};

/* The answer of one route: 0 with out's JSON, or -1 with e (400, 404...). */
int folio_api_answer(const struct folio_api_text_ctx *c, enum folio_api_route route, const char *in,
                     size_t len, struct folio_jw *out, struct folio_oai_error *e);

/* POST /tokenize: {"prompt": str, "add_special_tokens": true} or
 * {"messages": [...], "add_generation_prompt": true, "add_special_tokens":
 * false}; writes {"count", "max_model_len", "tokens", "token_strs": null}.
 * Messages give exactly the ids a chat request would (the template's text,
 * plus the tokenizer's BOS when the template writes none), unless
 * add_special_tokens is false: then only the template's own. Returns 0, or -1
 * with e (400, or 404 for an unknown model). */
int folio_api_tokenize(const struct folio_api_text_ctx *c, const char *body, size_t len,
                       struct folio_jw *out, struct folio_oai_error *e);

/* POST /detokenize: {"tokens": [ids]} gives {"prompt": text}. */
int folio_api_detokenize(const struct folio_api_text_ctx *c, const char *body, size_t len,
                         struct folio_jw *out, struct folio_oai_error *e);

#endif
