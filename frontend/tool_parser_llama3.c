/* llama3_json: Llama 3.x's JSON calls, {"name": ..., "parameters": {...}}
 * ("arguments" also read), which the answer must start with (after an
 * optional <|python_tag|>); several are separated by ';'. An answer that
 * starts otherwise is content throughout, as in vLLM's parser; text after
 * the calls is content, and a call that breaks off is content from its
 * first byte. */
#include "tool_parser.h"

#include <string.h>

static const char TAG[] = "<|python_tag|>";
#define TAG_LEN (sizeof TAG - 1)

enum {
    START, /* nothing but whitespace so far */
    IN_TAG,
    SEP, /* before a call: whitespace, ';' */
    OBJ,
    TEXT, /* content to the end */
};

struct llama3 {
    int state;
    size_t tag;          /* bytes of TAG matched */
    struct folio_jw raw; /* text since the last call: content if no call follows */
    struct folio_tj scan;
    struct folio_call_capture cap;
    struct folio_marked_text text; /* only for its content rules: no marker is looked for */
};

static void init(void *st, const struct folio_tool_parser_cfg *cfg)
{
    (void)cfg;
    struct llama3 *l = st;
    memset(l, 0, sizeof *l);
    folio_jw_init(&l->raw);
    folio_capture_init(&l->cap);
    folio_marked_init(&l->text, TAG);
}

static void free_(void *st)
{
    struct llama3 *l = st;
    folio_jw_free(&l->raw);
    folio_capture_free(&l->cap);
    folio_marked_free(&l->text);
}

static void to_text(struct llama3 *l, struct folio_chat_sink *out)
{
    folio_marked_content(&l->text, l->raw.data, l->raw.len, out);
    folio_jw_reset(&l->raw);
    l->state = TEXT;
}

static void start_object(struct llama3 *l)
{
    l->state = OBJ;
    folio_tj_init(&l->scan, 1);
    folio_capture_reset(&l->cap);
}

static void byte(struct llama3 *l, unsigned char c, struct folio_chat_sink *out)
{
    struct folio_tj_event ev;
    switch (l->state) {
    case START:
    case SEP:
        if (folio_tool_is_ws(c) || (l->state == SEP && c == ';' && l->text.any_call)) {
            folio_jw_raw(&l->raw, (const char *)&c, 1);
            return;
        }
        if (c == '{') {
            start_object(l);
            break; /* the scanner takes the brace */
        }
        if (l->state == START && c == (unsigned char)TAG[0]) {
            folio_jw_raw(&l->raw, (const char *)&c, 1);
            l->state = IN_TAG;
            l->tag = 1;
            return;
        }
        to_text(l, out);
        byte(l, c, out);
        return;
    case IN_TAG:
        if (c != (unsigned char)TAG[l->tag]) {
            to_text(l, out);
            byte(l, c, out);
            return;
        }
        folio_jw_raw(&l->raw, (const char *)&c, 1);
        if (++l->tag == TAG_LEN)
            l->state = SEP;
        return;
    case TEXT:
        folio_marked_content(&l->text, (const char *)&c, 1, out);
        return;
    }
    /* OBJ */
    enum folio_tj_status st = folio_tj_byte(&l->scan, c, &ev);
    if (st == FOLIO_TJ_ERROR) {
        to_text(l, out);
        byte(l, c, out);
        return;
    }
    folio_jw_raw(&l->raw, (const char *)&c, 1);
    folio_capture_byte(&l->cap, &l->scan, &ev, c);
    if (st != FOLIO_TJ_DONE)
        return;
    if (!folio_capture_valid(&l->cap)) {
        to_text(l, out);
        return;
    }
    folio_capture_emit(&l->cap, out);
    l->text.any_call = l->text.after_call = true;
    folio_jw_reset(&l->raw);
    l->state = SEP;
}

static void push(void *st, const char *text, size_t len, struct folio_chat_sink *out)
{
    for (size_t i = 0; i < len; i++)
        byte(st, (unsigned char)text[i], out);
}

static void finish(void *st, struct folio_chat_sink *out)
{
    struct llama3 *l = st;
    /* Separators after the last call are dropped; anything else held (leading
     * whitespace, a tag alone, a call cut short) is content. */
    if (l->state != TEXT && !(l->state == SEP && l->text.any_call))
        to_text(l, out);
}

const struct folio_tool_parser_ops folio_tool_parser_llama3_json = {
    .name = "llama3_json",
    .state_size = sizeof(struct llama3),
    .init = init,
    .push = push,
    .finish = finish,
    .free = free_,
    .marker = TAG,
};
