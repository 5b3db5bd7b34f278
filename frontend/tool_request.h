/* Tool calling in a chat request: `tools` (checked, then handed to the chat
 * template as given), `tool_choice`, `parallel_tool_calls`, and the tool
 * fields of messages (an assistant's tool_calls, a tool's tool_call_id).
 * tool_choice "required" and a named function become the request's
 * structured-output constraint (vLLM's schemas), so the grammar makes the
 * model write calls whose arguments fit the function's parameters. */
#ifndef FOLIO_TOOL_REQUEST_H
#define FOLIO_TOOL_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "openai_error.h"
#include "structured_output.h"

enum folio_tool_choice {
    FOLIO_TOOL_CHOICE_NONE,
    FOLIO_TOOL_CHOICE_AUTO,
    FOLIO_TOOL_CHOICE_REQUIRED,
    FOLIO_TOOL_CHOICE_NAMED,
};

struct folio_oai_tools {
    json_t *tools; /* the request's tools, for the template; NULL when none */
    size_t num_tools;
    enum folio_tool_choice choice; /* tools without tool_choice: auto, as OpenAI's default */
    char *function;                /* the named function */
    bool parallel;                 /* parallel_tool_calls (default true) */
};

/* Reads tools, tool_choice and parallel_tool_calls of the request object.
 * For "required" or a named function, g (the request's constraint, which
 * must be none so far) becomes its JSON schema, param "tool_choice". -1 with
 * e filled (400 naming the field) for a malformed tool or choice. */
int folio_oai_parse_tools(json_t *root, struct folio_oai_tools *t, struct folio_oai_grammar *g,
                          struct folio_oai_error *e);
void folio_oai_tools_free(struct folio_oai_tools *t);

/* The parameters schema of tool i as JSON text (malloc'ed), "{}"-like
 * defaults filled, for checking it alone; NULL when out of memory. */
char *folio_oai_tool_parameters(const struct folio_oai_tools *t, size_t i);

/* The tool fields of messages[i] (name, tool_calls with their arguments
 * parsed for the template, tool_call_id, reasoning_content) copied from msg
 * into out, the message the template sees. -1 with e filled (400) for a
 * tool message without tool_call_id or a malformed tool call. */
int folio_oai_message_tool_fields(json_t *msg, size_t i, json_t *out, struct folio_oai_error *e);

#endif
