/* mistral: [TOOL_CALLS] followed by a JSON list of {"name", "arguments"}
 * objects (or one such object), the format of Mistral's tokenizers before
 * v11 (Mistral-7B-Instruct-v0.3, Mixtral, Mistral-Nemo). [TOOL_CALLS] is a
 * special token there, so the text keeps special tokens while this parser
 * reads it. Each object of the list is a call once it is complete; a list
 * that breaks off gives back its unfinished part as content. Call ids are
 * 9 letters and digits, which Mistral's templates require. */
#include "tool_parser.h"

#include <string.h>

static const char MARK[] = "[TOOL_CALLS]";

enum { OUT, PRE, LIST };

struct mistral {
    struct folio_marked_text text;
    int state;
    struct folio_jw raw; /* text since the marker or the last call */
    struct folio_tj scan;
    struct folio_call_capture cap;
};

static void init(void *st, const struct folio_tool_parser_cfg *cfg)
{
    (void)cfg;
    struct mistral *m = st;
    memset(m, 0, sizeof *m);
    folio_marked_init(&m->text, MARK);
    folio_jw_init(&m->raw);
    folio_capture_init(&m->cap);
}

static void free_(void *st)
{
    struct mistral *m = st;
    folio_marked_free(&m->text);
    folio_jw_free(&m->raw);
    folio_capture_free(&m->cap);
}

static void give_back(struct mistral *m, struct folio_chat_sink *out)
{
    folio_marked_content(&m->text, m->raw.data, m->raw.len, out);
    folio_jw_reset(&m->raw);
    m->state = OUT;
}

static void byte(struct mistral *m, unsigned char c, struct folio_chat_sink *out)
{
    struct folio_tj_event ev;
    switch (m->state) {
    case OUT:
        if (folio_marked_byte(&m->text, c, out, &m->raw))
            m->state = PRE;
        return;
    case PRE:
        if (folio_tool_is_ws(c)) {
            folio_jw_raw(&m->raw, (const char *)&c, 1);
            return;
        }
        if (c != '[' && c != '{') {
            give_back(m, out);
            byte(m, c, out);
            return;
        }
        folio_tj_init(&m->scan, c == '[' ? 2 : 1);
        folio_capture_reset(&m->cap);
        m->state = LIST;
        break;
    }
    enum folio_tj_status st = folio_tj_byte(&m->scan, c, &ev);
    if (st == FOLIO_TJ_ERROR) {
        give_back(m, out);
        byte(m, c, out);
        return;
    }
    folio_jw_raw(&m->raw, (const char *)&c, 1);
    if (ev.object_start)
        folio_capture_reset(&m->cap);
    folio_capture_byte(&m->cap, &m->scan, &ev, c);
    if (ev.object_end) {
        if (!folio_capture_valid(&m->cap)) {
            give_back(m, out);
            return;
        }
        folio_capture_emit(&m->cap, out);
        m->text.any_call = m->text.after_call = true;
        folio_jw_reset(&m->raw);
    }
    if (st == FOLIO_TJ_DONE) {
        folio_jw_reset(&m->raw);
        m->state = OUT;
    }
}

static void push(void *st, const char *text, size_t len, struct folio_chat_sink *out)
{
    for (size_t i = 0; i < len; i++)
        byte(st, (unsigned char)text[i], out);
}

static void finish(void *st, struct folio_chat_sink *out)
{
    struct mistral *m = st;
    if (m->state != OUT)
        give_back(m, out);
    folio_marked_finish(&m->text, out);
}

const struct folio_tool_parser_ops folio_tool_parser_mistral = {
    .name = "mistral",
    .state_size = sizeof(struct mistral),
    .init = init,
    .push = push,
    .finish = finish,
    .free = free_,
    .marker = MARK,
    .short_ids = true,
};
