/* An incremental, validating JSON scanner for tool calls in a model's text:
 * fed one byte at a time, it says when the value is complete or broken, and
 * which bytes belong to the members of the objects at one depth (a call's
 * "name" and "arguments"), so a parser can take a call's pieces as they
 * stream without ever parsing a prefix twice. Strict RFC 8259 (no trailing
 * commas, no comments); the top-level value must be an object or an array,
 * and the values at the watched depth objects. */
#ifndef FOLIO_TOOL_JSON_H
#define FOLIO_TOOL_JSON_H

#include <stdbool.h>
#include <stddef.h>

#define FOLIO_TJ_MAX_DEPTH 64 /* deeper nesting is an error */
#define FOLIO_TJ_KEY_MAX 32   /* longer keys are kept cut (no call key is that long) */

enum folio_tj_status {
    FOLIO_TJ_MORE,  /* the value goes on */
    FOLIO_TJ_DONE,  /* this byte completed the top-level value */
    FOLIO_TJ_ERROR, /* this byte cannot continue valid JSON (it was not consumed) */
};

/* What one byte did at the watched depth: the members of objects that sit
 * at nesting `watch` (1: the top-level object; 2: objects in a top-level
 * array). */
struct folio_tj_event {
    bool value_byte;   /* the byte is part of a watched member's value (key in s->key) */
    bool member_end;   /* a watched member's value ended, with this byte or just before it */
    bool object_start; /* the byte opened a watched object */
    bool object_end;   /* the byte closed a watched object */
};

struct folio_tj {
    unsigned char stack[FOLIO_TJ_MAX_DEPTH]; /* '{' or '[' per open container */
    int depth;
    int state;
    int aux;         /* \u digits left, or the literal's next byte */
    const char *lit; /* the literal being matched: "true", "false", "null" */
    bool str_is_key;
    int watch;
    bool in_value; /* inside a watched member's value */
    char key[FOLIO_TJ_KEY_MAX + 1];
    size_t key_len;
};

void folio_tj_init(struct folio_tj *s, int watch);
/* Feeds one byte; ev says what it did at the watched depth. After DONE or
 * ERROR the scanner must be re-initialised before it is fed again. */
enum folio_tj_status folio_tj_byte(struct folio_tj *s, unsigned char c, struct folio_tj_event *ev);

#endif
