/* Tool-call parsers: each turns a model's text, fed in deltas of any size,
 * into content and tool calls (a name, then its arguments' JSON text) on a
 * sink (chat_output.h). A parser's state moves one byte at a time and its
 * output depends on the bytes alone, so the deltas' concatenation is the
 * same wherever the text was split; the whole answer of a non-streaming
 * request is the same parser fed everything at once.
 *
 * The parsers (vLLM's names):
 *   hermes       <tool_call>{"name": ..., "arguments": {...}}</tool_call>, any number
 *                (Qwen2.5, Hermes, ChatML models with a tool template)
 *   llama3_json  {"name": ..., "parameters": {...}} at the start of the answer, after
 *                an optional <|python_tag|>, several separated by ';' (Llama 3.x)
 *   mistral      [TOOL_CALLS] followed by a JSON list of {"name", "arguments"} (Mistral's
 *                tokenizers before v11)
 * and the two that read grammar-constrained output (tool_choice "required": a JSON
 * list of {"name", "parameters"}; a named function: its arguments alone).
 *
 * The text parsers emit a call only once its JSON object is complete and holds
 * a string name (and an object of arguments, "{}" when absent): text that
 * starts a call and breaks off, or is cut by max_tokens, is content, never a
 * half call. The constrained ones stream the arguments as they come, since
 * the grammar admits nothing but calls. */
#ifndef FOLIO_TOOL_PARSER_H
#define FOLIO_TOOL_PARSER_H

#include <stdbool.h>
#include <stddef.h>

#include "json_writer.h"
#include "tool_json.h"

struct folio_chat_sink;

/* What the sink takes from parsers (chat_output.c). */
void folio_sink_content(struct folio_chat_sink *o, const char *s, size_t n);
/* Begins call number num_calls with its name (the decoded JSON string). */
void folio_sink_call(struct folio_chat_sink *o, const char *name, size_t name_len);
/* Appends to the arguments of the call begun last. */
void folio_sink_args(struct folio_chat_sink *o, const char *s, size_t n);

struct folio_tool_parser_cfg {
    const char *function; /* the named parser's function */
};

struct folio_tool_parser_ops {
    const char *name;
    size_t state_size;
    void (*init)(void *st, const struct folio_tool_parser_cfg *cfg);
    void (*push)(void *st, const char *text, size_t len, struct folio_chat_sink *out);
    /* The text has ended: what was held goes out as content or calls. */
    void (*finish)(void *st, struct folio_chat_sink *out);
    void (*free)(void *st);
    /* The text a model writes before its calls, NULL when none; when that is a
     * special token, the text must keep special tokens for the parser to see it. */
    const char *marker;
    bool short_ids; /* Mistral's templates want 9-character call ids */
};

extern const struct folio_tool_parser_ops folio_tool_parser_hermes;
extern const struct folio_tool_parser_ops folio_tool_parser_llama3_json;
extern const struct folio_tool_parser_ops folio_tool_parser_mistral;
extern const struct folio_tool_parser_ops folio_tool_parser_required;
extern const struct folio_tool_parser_ops folio_tool_parser_named;

/* The --tool-call-parser of that name, NULL when there is none. */
const struct folio_tool_parser_ops *folio_tool_parser_find(const char *name);
#define FOLIO_TOOL_PARSER_NAMES "hermes|llama3_json|mistral"

/* ---- pieces the parsers share (tool_parser_common.c) ---- */

/* A call object's members as the scanner passes them: "name"'s JSON string
 * and the raw JSON of "arguments" (or "parameters", Llama's word). */
struct folio_call_capture {
    struct folio_jw name_raw, args;
    int cur; /* the member being read: 0 none, 1 name, 2 arguments, 3 another */
    bool bad, have_name, have_args;
};
void folio_capture_init(struct folio_call_capture *c);
void folio_capture_free(struct folio_call_capture *c);
void folio_capture_reset(struct folio_call_capture *c);
/* One byte the scanner s took, with its event. */
void folio_capture_byte(struct folio_call_capture *c, const struct folio_tj *s,
                        const struct folio_tj_event *ev, unsigned char byte);
/* The decoded name (malloc'ed, *len bytes) once "name" has ended as a
 * non-empty string; NULL otherwise. */
char *folio_capture_name(const struct folio_call_capture *c, size_t *len);
/* The whole object was a call: a name, and arguments that are an object or absent. */
bool folio_capture_valid(const struct folio_call_capture *c);
/* Emits the call to out: its name and arguments ("{}" when absent). */
void folio_capture_emit(const struct folio_call_capture *c, struct folio_chat_sink *out);

/* Text outside calls, for parsers whose calls follow a marker: emitted as
 * content except a tail that may begin the marker and trailing whitespace,
 * which is dropped next to a call (before it, or at the end after one). */
struct folio_marked_text {
    const char *marker;
    size_t marker_len;
    struct folio_jw held;
    bool after_call; /* the next text's leading whitespace is dropped */
    bool any_call;
};
void folio_marked_init(struct folio_marked_text *m, const char *marker);
void folio_marked_free(struct folio_marked_text *m);
/* One byte of text; true when it completed the marker, the held whitespace
 * and the marker then moved into raw (the call's text, content again if
 * the call breaks). */
bool folio_marked_byte(struct folio_marked_text *m, unsigned char c, struct folio_chat_sink *out,
                       struct folio_jw *raw);
/* Content, its leading whitespace dropped right after a call. */
void folio_marked_content(struct folio_marked_text *m, const char *s, size_t n,
                          struct folio_chat_sink *out);
void folio_marked_finish(struct folio_marked_text *m, struct folio_chat_sink *out);

bool folio_tool_is_ws(unsigned char c);

#endif
