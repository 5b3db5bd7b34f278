/* A model, its tokenizer and chat template, and one sequence on a worker
 * backend, all in this process: what `folio generate` and `folio chat` run
 * on, with no scheduler or server. */
#ifndef FOLIO_LOCAL_SESSION_H
#define FOLIO_LOCAL_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "chat_template.h"
#include "tokenizer.h"

struct folio_session_options {
    const char *model_dir;
    const char *backend; /* "cpu", "cpu-ref" or "cuda" */
    int threads;         /* CPU threads; 0: all cores */
    int max_context;     /* tokens the KV cache holds; capped at max_position_embeddings */
};

struct folio_session;

/* Opens the model, its tokenizer, its chat template (when it has one) and a
 * backend with room for one sequence of max_context tokens. */
int folio_session_open(const struct folio_session_options *o, struct folio_session **out, char *err,
                       size_t errlen);
void folio_session_close(struct folio_session *s);

const struct folio_tokenizer *folio_session_tokenizer(const struct folio_session *s);
int folio_session_max_context(const struct folio_session *s);

/* Text as the server tokenizes a completion prompt (with the post-processor's
 * BOS). Returns a malloc'ed array, or NULL with the reason in err. */
int32_t *folio_session_encode(const struct folio_session *s, const char *text, size_t *n, char *err,
                              size_t errlen);

/* The messages rendered through the model's chat template with the generation
 * prompt, then tokenized as the server tokenizes a chat (BOS added only when
 * the template did not write it). NULL with the reason in err when the model
 * has no template or the template refuses the conversation. */
int32_t *folio_session_chat_prompt(const struct folio_session *s,
                                   const struct folio_chat_message *msgs, size_t n_msgs, size_t *n,
                                   char *err, size_t errlen);

/* Receives each piece of the reply as it becomes whole UTF-8 text. */
typedef void (*folio_session_text_fn)(const char *text, size_t len, void *arg);

struct folio_generation {
    size_t prompt_tokens;
    size_t reused_tokens; /* prompt tokens whose KV the previous call left in place */
    long generated;       /* sampled tokens, the end-of-sequence one included */
    bool stopped;         /* an end-of-sequence token ended it, not max_tokens */
    double prefill_s, decode_s;
    char *text; /* the whole reply (malloc'ed, the caller frees it) */
};

/* Generates up to max_tokens after ids, streaming the text to on_text. The
 * KV of the longest common prefix with the tokens of the previous call (its
 * prompt and reply) is kept, so a chat's next turn prefills only what is new.
 * Stops at any of the model's end-of-sequence ids unless ignore_eos. */
int folio_session_generate(struct folio_session *s, const int32_t *ids, size_t n, long max_tokens,
                           const struct folio_sampling_params *sampling, bool ignore_eos,
                           folio_session_text_fn on_text, void *arg, struct folio_generation *out,
                           char *err, size_t errlen);

#endif
