/* Reasoning parsers: a model's text split into its reasoning (between
 * <think> and </think>) and its answer, fed in deltas of any size. As with
 * the tool parsers, the state moves one byte at a time and the split
 * depends only on the text, so a stream's pieces add up to the whole
 * answer's.
 *
 *   deepseek_r1  reasoning from the start (a leading <think> is dropped: the
 *                template may have written it) to </think>; no </think> at all
 *                means the whole text was reasoning (vLLM's rule)
 *   qwen3        reasoning only when the text starts with <think>, to </think> or
 *                the end; a text that does not start with it is all answer
 *
 * vLLM's qwen3 parser turns an unclosed <think> into answer text when the
 * request is not streamed but into reasoning when it is; Folio decides by
 * what the text starts with, the same both ways. */
#ifndef FOLIO_REASONING_PARSER_H
#define FOLIO_REASONING_PARSER_H

#include <stdbool.h>
#include <stddef.h>

#include "json_writer.h"

enum folio_reasoning_kind {
    FOLIO_REASONING_NONE,
    FOLIO_REASONING_DEEPSEEK_R1,
    FOLIO_REASONING_QWEN3,
};
#define FOLIO_REASONING_PARSER_NAMES "deepseek_r1|qwen3"

/* The --reasoning-parser of that name: 0, or -1 for an unknown one. */
int folio_reasoning_kind_parse(const char *name, enum folio_reasoning_kind *out);

struct folio_reasoning_parser {
    enum folio_reasoning_kind kind;
    int state;
    struct folio_jw held; /* a possible start of the tag being looked for */
};

void folio_reasoning_init(struct folio_reasoning_parser *p, enum folio_reasoning_kind kind);
void folio_reasoning_free(struct folio_reasoning_parser *p);
/* Appends what text adds to the reasoning and to the answer. */
void folio_reasoning_push(struct folio_reasoning_parser *p, const char *text, size_t len,
                          struct folio_jw *reasoning, struct folio_jw *answer);
void folio_reasoning_finish(struct folio_reasoning_parser *p, struct folio_jw *reasoning,
                            struct folio_jw *answer);

#endif
