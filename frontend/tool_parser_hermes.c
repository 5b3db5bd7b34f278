/* hermes: calls as <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
 * any number of them, with text before, between or after (Qwen2.5's and
 * the Hermes models' format, and assets/templates/'s ChatML tool template).
 * A complete object is a call even when its closing tag is missing (models
 * often write the next <tool_call> or stop right after the object, as
 * vLLM's parser accepts); whitespace next to calls is dropped. */
#include "tool_parser.h"

#include <stdlib.h>
#include <string.h>

static const char START[] = "<tool_call>";
static const char END[] = "</tool_call>";
#define END_LEN (sizeof END - 1)

enum { OUT, IN, TAIL };

struct hermes {
    struct folio_marked_text text;
    int state;
    struct folio_jw raw; /* the call's text so far: content again if it breaks off */
    struct folio_tj scan;
    struct folio_call_capture cap;
    size_t tail; /* bytes of END matched after the object */
};

static void init(void *st, const struct folio_tool_parser_cfg *cfg)
{
    (void)cfg;
    struct hermes *h = st;
    memset(h, 0, sizeof *h);
    folio_marked_init(&h->text, START);
    folio_jw_init(&h->raw);
    folio_capture_init(&h->cap);
}

static void free_(void *st)
{
    struct hermes *h = st;
    folio_marked_free(&h->text);
    folio_jw_free(&h->raw);
    folio_capture_free(&h->cap);
}

/* The call's text was not a call: it is content. */
static void give_back(struct hermes *h, struct folio_chat_sink *out)
{
    folio_marked_content(&h->text, h->raw.data, h->raw.len, out);
    folio_jw_reset(&h->raw);
    h->state = OUT;
}

static void end_call(struct hermes *h, struct folio_chat_sink *out)
{
    if (!folio_capture_valid(&h->cap)) {
        give_back(h, out);
        return;
    }
    folio_capture_emit(&h->cap, out);
    h->text.any_call = h->text.after_call = true;
    folio_jw_reset(&h->raw);
    h->state = OUT;
}

static void byte(struct hermes *h, unsigned char c, struct folio_chat_sink *out)
{
    struct folio_tj_event ev;
    switch (h->state) {
    case OUT:
        if (folio_marked_byte(&h->text, c, out, &h->raw)) {
            h->state = IN;
            folio_tj_init(&h->scan, 1);
            folio_capture_reset(&h->cap);
        }
        return;
    case IN: {
        enum folio_tj_status st = folio_tj_byte(&h->scan, c, &ev);
        if (st == FOLIO_TJ_ERROR) {
            give_back(h, out);
            byte(h, c, out);
            return;
        }
        folio_jw_raw(&h->raw, (const char *)&c, 1);
        folio_capture_byte(&h->cap, &h->scan, &ev, c);
        if (st == FOLIO_TJ_DONE) {
            h->state = TAIL;
            h->tail = 0;
        }
        return;
    }
    default: /* TAIL */
        if (h->tail == 0 && folio_tool_is_ws(c)) {
            folio_jw_raw(&h->raw, (const char *)&c, 1);
            return;
        }
        if (c == (unsigned char)END[h->tail]) {
            folio_jw_raw(&h->raw, (const char *)&c, 1);
            if (++h->tail == END_LEN)
                end_call(h, out);
            return;
        }
        /* Something else follows the object: the call ends there, and what
         * followed it (a partial closing tag included) is text again. */
        size_t matched = h->tail;
        if (!folio_capture_valid(&h->cap)) {
            give_back(h, out);
        } else {
            end_call(h, out);
            for (size_t i = 0; i < matched; i++)
                byte(h, (unsigned char)END[i], out);
        }
        byte(h, c, out);
        return;
    }
}

static void push(void *st, const char *text, size_t len, struct folio_chat_sink *out)
{
    for (size_t i = 0; i < len; i++)
        byte(st, (unsigned char)text[i], out);
}

static void finish(void *st, struct folio_chat_sink *out)
{
    struct hermes *h = st;
    if (h->state == IN)
        give_back(h, out); /* a call cut short is text, never half a call */
    else if (h->state == TAIL)
        end_call(h, out); /* a closing tag cut short (or none) still closes the call */
    folio_marked_finish(&h->text, out);
}

const struct folio_tool_parser_ops folio_tool_parser_hermes = {
    .name = "hermes",
    .state_size = sizeof(struct hermes),
    .init = init,
    .push = push,
    .finish = finish,
    .free = free_,
    .marker = START,
};
