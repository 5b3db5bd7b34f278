/* The request fields Folio accepts per endpoint, and a 400 naming each field
 * it does not implement (the table is in openai_fields.c). */
#ifndef FOLIO_OPENAI_FIELDS_H
#define FOLIO_OPENAI_FIELDS_H

#include <jansson.h>
#include <stdint.h>

#include "openai_api.h"

#define FOLIO_OAI_COMPLETIONS_DEFAULT_MAX_TOKENS 16

/* 0 when every field of the request object is one Folio implements (or one
 * OpenAI ignores too); -1 with e filled (400, param naming the field). */
int folio_oai_check_fields(enum folio_oai_endpoint ep, json_t *root, struct folio_oai_error *e);

/* max_tokens when the request gives none: 16 for completions, -1 (to the end
 * of the context) for chat. */
int32_t folio_oai_default_max_tokens(enum folio_oai_endpoint ep);

#endif
