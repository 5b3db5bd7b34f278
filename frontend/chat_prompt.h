/* A chat request's messages as the prompt's token ids: rendered by the
 * model's chat template, then tokenized. One function, so that generation
 * and /tokenize count the same tokens. */
#ifndef FOLIO_CHAT_PROMPT_H
#define FOLIO_CHAT_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_template.h"
#include "openai_api.h"
#include "tokenizer.h"

/* The request's messages (its template_messages) and tools, rendered by
 * tmpl with add_generation_prompt, bos_token and eos_token as transformers
 * gives them. tmpl NULL: the model has no chat template, an error in err.
 * add_bos: give the tokenizer's BOS when the rendered text does not start
 * with it (false: only what the template writes). Returns malloc'ed ids (*n
 * of them), or NULL with err set (err[0] == 0: out of memory). */
int32_t *folio_chat_prompt_ids(const struct folio_tokenizer *t,
                               const struct folio_chat_template *tmpl,
                               const struct folio_oai_request *r, bool add_bos, size_t *n,
                               char *err, size_t errlen);

#endif
