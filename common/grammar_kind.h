/* The kinds of structured-output constraint (grammar/grammar.h compiles
 * them), defined where every process can name them: the frontend parses a
 * request into one, the Submit and the step plan carry it, the worker's
 * matcher runs it. */
#ifndef FOLIO_GRAMMAR_KIND_H
#define FOLIO_GRAMMAR_KIND_H

#include <stdbool.h>
#include <stdint.h>

/* The longest grammar text a request may bring: it travels in the Submit and
 * in a step plan, whose ring is sized for it. */
#define FOLIO_MAX_GRAMMAR_BYTES (256 * 1024)

enum folio_grammar_kind {
    FOLIO_GRAMMAR_JSON_OBJECT, /* any JSON object (response_format json_object); text unused */
    FOLIO_GRAMMAR_JSON_SCHEMA, /* text: a JSON schema (Draft 2020-12, as llguidance supports) */
    FOLIO_GRAMMAR_REGEX,       /* text: a regular expression (Rust regex syntax), matched whole */
    FOLIO_GRAMMAR_CHOICE,      /* text: a JSON array of strings, the output being one of them */
    FOLIO_GRAMMAR_LARK,        /* text: a grammar in llguidance's Lark syntax, rule `start` */
};
#define FOLIO_GRAMMAR_NUM_KINDS 5

/* A sequence's constraint: on false for none. text is the kind's (""
 * for json_object), not NUL-terminated. */
struct folio_seq_grammar {
    bool on;
    enum folio_grammar_kind kind;
    const char *text;
    int32_t len;
};

#endif
