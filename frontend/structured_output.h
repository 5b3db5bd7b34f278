/* Structured outputs in a request: OpenAI's response_format, vLLM's
 * structured_outputs and its older guided_* fields, read into the one
 * constraint a request may carry (common/grammar_kind.h). Only their shape
 * is checked here; the frontend then compiles the constraint with the
 * engine (grammar/grammar.h), which judges the schema, regex or grammar
 * itself. */
#ifndef FOLIO_STRUCTURED_OUTPUT_H
#define FOLIO_STRUCTURED_OUTPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "grammar_kind.h"
#include "openai_error.h"

struct folio_oai_grammar {
    bool on;
    enum folio_grammar_kind kind;
    char *text; /* the kind's text (NUL-terminated; "" for json_object) */
    size_t len;
    const char *param; /* the field it came from, for errors: "response_format", "guided_json" */
};

/* Reads the request object's constraint into g: none when it has none (or
 * response_format {"type": "text"}). -1 with e filled (400 naming the
 * field) for a malformed one, for a text past FOLIO_MAX_GRAMMAR_BYTES, or
 * for two constraints in one request. */
int folio_oai_parse_structured(json_t *root, struct folio_oai_grammar *g,
                               struct folio_oai_error *e);
void folio_oai_grammar_free(struct folio_oai_grammar *g);

#endif
