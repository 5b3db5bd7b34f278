/* What the tool-call parsers share: a call object's members as the JSON
 * scanner passes them, and text around markers. */
#include "tool_parser.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

bool folio_tool_is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* ---- a call object's members ---- */

void folio_capture_init(struct folio_call_capture *c)
{
    memset(c, 0, sizeof *c);
    folio_jw_init(&c->name_raw);
    folio_jw_init(&c->args);
}

void folio_capture_free(struct folio_call_capture *c)
{
    folio_jw_free(&c->name_raw);
    folio_jw_free(&c->args);
}

void folio_capture_reset(struct folio_call_capture *c)
{
    folio_jw_reset(&c->name_raw);
    folio_jw_reset(&c->args);
    c->cur = 0;
    c->bad = c->have_name = c->have_args = false;
}

void folio_capture_byte(struct folio_call_capture *c, const struct folio_tj *s,
                        const struct folio_tj_event *ev, unsigned char byte)
{
    if (ev->value_byte) {
        if (c->cur == 0) {
            /* the first byte of a member's value: which member is it */
            if (!strcmp(s->key, "name"))
                c->cur = 1;
            else if (!strcmp(s->key, "arguments") || !strcmp(s->key, "parameters"))
                c->cur = 2;
            else
                c->cur = 3;
            if ((c->cur == 1 && c->have_name) || (c->cur == 2 && c->have_args))
                c->bad = true; /* a second name or arguments: which one was meant? */
        }
        if (c->cur == 1)
            folio_jw_raw(&c->name_raw, (const char *)&byte, 1);
        else if (c->cur == 2)
            folio_jw_raw(&c->args, (const char *)&byte, 1);
    }
    if (ev->member_end) {
        if (c->cur == 1) {
            c->have_name = true;
            c->bad |= c->name_raw.len < 3 || c->name_raw.data[0] != '"'; /* a non-empty string */
        } else if (c->cur == 2) {
            c->have_args = true;
            c->bad |= c->args.data[0] != '{';
        }
        c->cur = 0;
    }
}

char *folio_capture_name(const struct folio_call_capture *c, size_t *len)
{
    if (!c->have_name || c->bad)
        return NULL;
    json_t *v = json_loadb(c->name_raw.data, c->name_raw.len, JSON_DECODE_ANY, NULL);
    char *name = NULL;
    if (json_is_string(v) && json_string_length(v) > 0) {
        *len = json_string_length(v);
        name = malloc(*len + 1);
        if (name)
            memcpy(name, json_string_value(v), *len + 1);
    }
    json_decref(v);
    return name;
}

bool folio_capture_valid(const struct folio_call_capture *c)
{
    return c->have_name && !c->bad;
}

void folio_capture_emit(const struct folio_call_capture *c, struct folio_chat_sink *out)
{
    size_t n = 0;
    char *name = folio_capture_name(c, &n);
    folio_sink_call(out, name ? name : "", n);
    free(name);
    if (c->have_args)
        folio_sink_args(out, c->args.data, c->args.len);
    else
        folio_sink_args(out, "{}", 2);
}

/* ---- text around markers ---- */

void folio_marked_init(struct folio_marked_text *m, const char *marker)
{
    memset(m, 0, sizeof *m);
    m->marker = marker;
    m->marker_len = strlen(marker);
    folio_jw_init(&m->held);
}

void folio_marked_free(struct folio_marked_text *m)
{
    folio_jw_free(&m->held);
}

void folio_marked_content(struct folio_marked_text *m, const char *s, size_t n,
                          struct folio_chat_sink *out)
{
    if (m->after_call) {
        while (n > 0 && folio_tool_is_ws((unsigned char)*s))
            s++, n--;
        if (n == 0)
            return;
        m->after_call = false;
    }
    folio_sink_content(out, s, n);
}

/* The longest tail of held that is a proper prefix of the marker. */
static size_t marker_tail(const struct folio_marked_text *m)
{
    size_t k = m->marker_len - 1 < m->held.len ? m->marker_len - 1 : m->held.len;
    for (; k > 0; k--)
        if (!memcmp(m->held.data + m->held.len - k, m->marker, k))
            return k;
    return 0;
}

bool folio_marked_byte(struct folio_marked_text *m, unsigned char c, struct folio_chat_sink *out,
                       struct folio_jw *raw)
{
    folio_jw_raw(&m->held, (const char *)&c, 1);
    struct folio_jw *h = &m->held;
    if (h->len >= m->marker_len &&
        !memcmp(h->data + h->len - m->marker_len, m->marker, m->marker_len)) {
        folio_jw_reset(raw);
        folio_jw_raw(raw, h->data, h->len);
        folio_jw_reset(h);
        return true;
    }
    size_t end = h->len - marker_tail(m), keep = end;
    while (keep > 0 && folio_tool_is_ws((unsigned char)h->data[keep - 1]))
        keep--;
    if (keep > 0) {
        folio_marked_content(m, h->data, keep, out);
        memmove(h->data, h->data + keep, h->len - keep);
        h->len -= keep;
    }
    return false;
}

void folio_marked_finish(struct folio_marked_text *m, struct folio_chat_sink *out)
{
    bool only_ws = true;
    for (size_t i = 0; i < m->held.len; i++)
        only_ws &= folio_tool_is_ws((unsigned char)m->held.data[i]);
    if (!only_ws || !m->any_call)
        folio_marked_content(m, m->held.data, m->held.len, out);
    folio_jw_reset(&m->held);
}
