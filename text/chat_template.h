/* Chat templates: the Jinja2 template of tokenizer_config.json rendered
 * into a prompt, as Hugging Face transformers' apply_chat_template renders
 * it (jinja2 ImmutableSandboxedEnvironment with trim_blocks=True,
 * lstrip_blocks=True, the loopcontrols extension, a tojson filter that does
 * not escape HTML, and the globals raise_exception and strftime_now).
 *
 * A template is compiled once (when the model loads) and rendered per
 * request; a compiled template is immutable, so any number of threads may
 * render it at once. Each render allocates from its own arena and stops with
 * an error, never a hang, when it passes the limits below. */
#ifndef FOLIO_CHAT_TEMPLATE_H
#define FOLIO_CHAT_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct folio_chat_template;

/* One chat message with string content; content NULL renders as none. */
struct folio_chat_message {
    const char *role;
    const char *content;
};

/* Per-render limits; a zero field takes its default. */
struct folio_chat_template_limits {
    size_t max_output_bytes; /* default 32 MiB */
    size_t max_memory_bytes; /* all values made while rendering; default 256 MiB */
    uint64_t max_steps;      /* expression evaluations + loop iterations; default 20M */
    int max_call_depth;      /* macro recursion; default 64 */
};

/* Parses src (the chat_template string). Syntax errors, unknown tags,
 * filters and tests are reported with line and column. */
int folio_chat_template_compile(const char *src, struct folio_chat_template **out, char *err,
                                size_t errlen);
void folio_chat_template_free(struct folio_chat_template *t);

/* Renders messages the way transformers does: variables messages (list of
 * {role, content}), add_generation_prompt, bos_token, eos_token (NULL leaves
 * one undefined), tools = none, documents = none. On success *out is a
 * malloc'ed NUL-terminated string of *outlen bytes. On failure returns -1
 * with the message in err: raise_exception('msg') gives exactly msg (the
 * caller reports it as a bad request), other errors say what went wrong. */
int folio_chat_template_render(const struct folio_chat_template *t,
                               const struct folio_chat_message *msgs, size_t n,
                               bool add_generation_prompt, const char *bos_token,
                               const char *eos_token, char **out, size_t *outlen, char *err,
                               size_t errlen);

/* The general form: the template's variables are the members of the JSON
 * object vars (messages with tool_calls or list content, tools, documents,
 * date_string, ...); tools and documents are none when absent, as in
 * transformers. limits may be NULL. */
int folio_chat_template_render_json(const struct folio_chat_template *t, const json_t *vars,
                                    const struct folio_chat_template_limits *limits, char **out,
                                    size_t *outlen, char *err, size_t errlen);

#endif
