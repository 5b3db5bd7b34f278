/* The parsers of grammar-constrained calls, where the grammar admits nothing
 * but calls, so arguments stream as the model writes them:
 *   required  tool_choice "required": a JSON list of {"name", "parameters"}
 *             (vLLM's schema: an anyOf of the tools), each element a call
 *   named     tool_choice naming a function: the text is its arguments
 * A text that is not what the grammar allows (no grammar engine would let
 * that happen) is content from the first byte that breaks it. Only
 * max_tokens can cut a call short, and finish_reason "length" says so. */
#include "tool_parser.h"

#include <stdlib.h>
#include <string.h>

/* ---- required ---- */

enum { LIST, DONE, BROKEN };

struct required {
    int state;
    struct folio_tj scan;
    struct folio_call_capture cap;
    bool begun;       /* the current element's call has been given to the sink */
    size_t args_sent; /* of cap.args */
};

static void required_init(void *st, const struct folio_tool_parser_cfg *cfg)
{
    (void)cfg;
    struct required *r = st;
    memset(r, 0, sizeof *r);
    folio_tj_init(&r->scan, 2);
    folio_capture_init(&r->cap);
}

static void required_free(void *st)
{
    folio_capture_free(&((struct required *)st)->cap);
}

/* The call begins once its name is known; arguments read before it follow. */
static void required_flush(struct required *r, struct folio_chat_sink *out)
{
    if (!r->begun) {
        size_t n = 0;
        char *name = folio_capture_name(&r->cap, &n);
        if (!name)
            return;
        folio_sink_call(out, name, n);
        free(name);
        r->begun = true;
    }
    if (r->cap.args.len > r->args_sent) {
        folio_sink_args(out, r->cap.args.data + r->args_sent, r->cap.args.len - r->args_sent);
        r->args_sent = r->cap.args.len;
    }
}

static void required_push(void *st, const char *text, size_t len, struct folio_chat_sink *out)
{
    struct required *r = st;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (r->state == BROKEN) {
            folio_sink_content(out, (const char *)&c, 1);
            continue;
        }
        if (r->state == DONE)
            continue; /* whitespace after the list */
        struct folio_tj_event ev;
        enum folio_tj_status st = folio_tj_byte(&r->scan, c, &ev);
        if (st == FOLIO_TJ_ERROR) {
            r->state = BROKEN;
            folio_sink_content(out, (const char *)&c, 1);
            continue;
        }
        if (ev.object_start) {
            folio_capture_reset(&r->cap);
            r->begun = false;
            r->args_sent = 0;
        }
        folio_capture_byte(&r->cap, &r->scan, &ev, c);
        required_flush(r, out);
        if (ev.object_end && r->begun && !r->cap.have_args)
            folio_sink_args(out, "{}", 2);
        if (st == FOLIO_TJ_DONE)
            r->state = DONE;
    }
}

static void required_finish(void *st, struct folio_chat_sink *out)
{
    (void)st;
    (void)out;
}

const struct folio_tool_parser_ops folio_tool_parser_required = {
    .name = "required",
    .state_size = sizeof(struct required),
    .init = required_init,
    .push = required_push,
    .finish = required_finish,
    .free = required_free,
};

/* ---- named ---- */

struct named {
    const char *function;
    bool begun;
};

static void named_init(void *st, const struct folio_tool_parser_cfg *cfg)
{
    struct named *n = st;
    n->function = cfg->function ? cfg->function : "";
    n->begun = false;
}

static void named_begin(struct named *n, struct folio_chat_sink *out)
{
    if (!n->begun)
        folio_sink_call(out, n->function, strlen(n->function));
    n->begun = true;
}

static void named_push(void *st, const char *text, size_t len, struct folio_chat_sink *out)
{
    named_begin(st, out);
    folio_sink_args(out, text, len);
}

static void named_finish(void *st, struct folio_chat_sink *out)
{
    named_begin(st, out);
}

static void named_free(void *st)
{
    (void)st;
}

const struct folio_tool_parser_ops folio_tool_parser_named = {
    .name = "named",
    .state_size = sizeof(struct named),
    .init = named_init,
    .push = named_push,
    .finish = named_finish,
    .free = named_free,
};
