/* One chat choice's generated text as a message: reasoning (a reasoning
 * parser), content and tool calls (a tool parser), built as the text
 * streams. The whole message is the one record; a stream's delta is what
 * it gained since the last chunk, so the chunks add up to the message. Pure:
 * no I/O, tested alone (tests/unit/test_tool_parsers.c). */
#ifndef FOLIO_CHAT_OUTPUT_H
#define FOLIO_CHAT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json_writer.h"
#include "openai_api.h"
#include "reasoning_parser.h"
#include "tool_parser.h"

struct folio_chat_call {
    char id[48];
    char *name;
    struct folio_jw args;
};

/* The message so far, and where the current delta starts in it. */
struct folio_chat_sink {
    struct folio_jw reasoning, content;
    struct folio_chat_call *calls;
    size_t num_calls, cap_calls;
    size_t max_calls; /* 0: any number; parallel_tool_calls false: 1, later calls dropped */
    bool dropping;    /* a call past max_calls is being dropped */
    uint64_t id_seed; /* call i's id derives from it and i */
    bool short_ids;   /* 9 letters and digits (Mistral's) */
    bool failed;      /* out of memory */
    size_t d_reasoning, d_content, d_calls, d_args; /* the delta's start */
};

struct folio_chat_output_cfg {
    enum folio_reasoning_kind reasoning;
    const struct folio_tool_parser_ops *parser; /* NULL: no tool calls */
    const char *function;                       /* the named parser's */
    size_t max_calls;
    uint64_t id_seed;
};

struct folio_chat_output {
    struct folio_chat_sink sink;
    struct folio_reasoning_parser reasoning;
    const struct folio_tool_parser_ops *parser;
    void *parser_state;
    struct folio_jw answer;           /* scratch: the reasoning parser's answer text of one push */
    struct folio_oai_tool_call *view; /* the calls of the last delta or message view */
    size_t cap_view;
};

int folio_chat_output_init(struct folio_chat_output *o, const struct folio_chat_output_cfg *cfg);
void folio_chat_output_free(struct folio_chat_output *o);
void folio_chat_output_push(struct folio_chat_output *o, const char *text, size_t len);
/* The text has ended: held text goes out. */
void folio_chat_output_finish(struct folio_chat_output *o);
/* What the message gained since the last call (its content in *content,
 * the rest in parts, with parts->reasoning_field as given), valid until the
 * next push; the delta then starts anew. */
void folio_chat_output_take(struct folio_chat_output *o, bool reasoning_field,
                            struct folio_oai_chat_parts *parts, const char **content, size_t *len);
/* The whole message. */
void folio_chat_output_message(struct folio_chat_output *o, bool reasoning_field,
                               struct folio_oai_chat_parts *parts, const char **content,
                               size_t *len);

#endif
