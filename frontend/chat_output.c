#include "chat_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the sink the parsers write to ---- */

void folio_sink_content(struct folio_chat_sink *o, const char *s, size_t n)
{
    folio_jw_raw(&o->content, s, n);
    o->failed |= o->content.failed;
}

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* vLLM's "chatcmpl-tool-" and 32 hex digits, or Mistral's 9 letters and digits. */
static void make_id(const struct folio_chat_sink *o, size_t index, char *out, size_t outlen)
{
    uint64_t a = mix(o->id_seed ^ mix(index)), b = mix(a);
    if (!o->short_ids) {
        snprintf(out, outlen, "chatcmpl-tool-%016llx%016llx", (unsigned long long)a,
                 (unsigned long long)b);
        return;
    }
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (int i = 0; i < 9; i++, a /= 62)
        out[i] = abc[a % 62];
    out[9] = 0;
}

void folio_sink_call(struct folio_chat_sink *o, const char *name, size_t name_len)
{
    o->dropping = o->max_calls && o->num_calls >= o->max_calls;
    if (o->dropping)
        return;
    if (o->num_calls == o->cap_calls) {
        size_t cap = o->cap_calls ? 2 * o->cap_calls : 4;
        void *p = realloc(o->calls, cap * sizeof *o->calls);
        if (!p) {
            o->failed = true;
            o->dropping = true;
            return;
        }
        o->calls = p;
        o->cap_calls = cap;
    }
    struct folio_chat_call *c = &o->calls[o->num_calls];
    memset(c, 0, sizeof *c);
    make_id(o, o->num_calls, c->id, sizeof c->id);
    c->name = malloc(name_len + 1);
    if (!c->name) {
        o->failed = true;
        o->dropping = true;
        return;
    }
    if (name_len)
        memcpy(c->name, name, name_len);
    c->name[name_len] = 0;
    folio_jw_init(&c->args);
    o->num_calls++;
}

void folio_sink_args(struct folio_chat_sink *o, const char *s, size_t n)
{
    if (o->dropping || o->num_calls == 0)
        return;
    struct folio_jw *a = &o->calls[o->num_calls - 1].args;
    folio_jw_raw(a, s, n);
    o->failed |= a->failed;
}

/* ---- the pipeline: reasoning, then tool calls ---- */

int folio_chat_output_init(struct folio_chat_output *o, const struct folio_chat_output_cfg *cfg)
{
    memset(o, 0, sizeof *o);
    folio_jw_init(&o->sink.reasoning);
    folio_jw_init(&o->sink.content);
    folio_jw_init(&o->answer);
    o->sink.max_calls = cfg->max_calls;
    o->sink.id_seed = cfg->id_seed;
    o->sink.short_ids = cfg->parser && cfg->parser->short_ids;
    folio_reasoning_init(&o->reasoning, cfg->reasoning);
    o->parser = cfg->parser;
    if (o->parser) {
        if (!(o->parser_state = calloc(1, o->parser->state_size)))
            return -1;
        struct folio_tool_parser_cfg pc = {.function = cfg->function};
        o->parser->init(o->parser_state, &pc);
    }
    return 0;
}

void folio_chat_output_free(struct folio_chat_output *o)
{
    if (o->parser_state) {
        o->parser->free(o->parser_state);
        free(o->parser_state);
    }
    folio_reasoning_free(&o->reasoning);
    folio_jw_free(&o->sink.reasoning);
    folio_jw_free(&o->sink.content);
    for (size_t i = 0; i < o->sink.num_calls; i++) {
        free(o->sink.calls[i].name);
        folio_jw_free(&o->sink.calls[i].args);
    }
    free(o->sink.calls);
    folio_jw_free(&o->answer);
    free(o->view);
    memset(o, 0, sizeof *o);
}

/* The answer text of a push, to the tool parser or straight to content. */
static void answer(struct folio_chat_output *o, const char *text, size_t len, bool final)
{
    if (o->parser) {
        if (len)
            o->parser->push(o->parser_state, text, len, &o->sink);
        if (final)
            o->parser->finish(o->parser_state, &o->sink);
    } else {
        folio_sink_content(&o->sink, text, len);
    }
}

void folio_chat_output_push(struct folio_chat_output *o, const char *text, size_t len)
{
    if (o->reasoning.kind == FOLIO_REASONING_NONE) {
        answer(o, text, len, false);
        return;
    }
    folio_jw_reset(&o->answer);
    folio_reasoning_push(&o->reasoning, text, len, &o->sink.reasoning, &o->answer);
    answer(o, o->answer.data, o->answer.len, false);
}

void folio_chat_output_finish(struct folio_chat_output *o)
{
    folio_jw_reset(&o->answer);
    folio_reasoning_finish(&o->reasoning, &o->sink.reasoning, &o->answer);
    answer(o, o->answer.data, o->answer.len, true);
    o->sink.failed |= o->sink.reasoning.failed || o->answer.failed;
}

static struct folio_oai_tool_call *view_room(struct folio_chat_output *o, size_t n)
{
    if (n > o->cap_view) {
        void *p = realloc(o->view, n * sizeof *o->view);
        if (!p)
            return NULL;
        o->view = p;
        o->cap_view = n;
    }
    return o->view;
}

/* Calls from `first` on; the one at `first` from byte `args_from` of its
 * arguments, and without its id and name when `begun` (an earlier chunk
 * carried them). Calls with nothing new are left out. */
static size_t view_calls(struct folio_chat_output *o, size_t first, size_t args_from, bool begun)
{
    const struct folio_chat_sink *s = &o->sink;
    size_t n = 0;
    if (!view_room(o, s->num_calls - first + 1))
        return 0;
    for (size_t i = first; i < s->num_calls; i++) {
        const struct folio_chat_call *c = &s->calls[i];
        bool head = !(i == first && begun);
        size_t from = i == first ? args_from : 0;
        if (!head && c->args.len == from)
            continue;
        o->view[n++] = (struct folio_oai_tool_call){
            .index = (uint32_t)i,
            .id = head ? c->id : NULL,
            .name = head ? c->name : NULL,
            .args = c->args.data ? c->args.data + from : "",
            .args_len = c->args.len - from,
        };
    }
    return n;
}

void folio_chat_output_take(struct folio_chat_output *o, bool reasoning_field,
                            struct folio_oai_chat_parts *parts, const char **content, size_t *len)
{
    struct folio_chat_sink *s = &o->sink;
    size_t first = s->d_calls ? s->d_calls - 1 : 0;
    *parts = (struct folio_oai_chat_parts){
        .reasoning_field = reasoning_field,
        .reasoning = s->reasoning.data ? s->reasoning.data + s->d_reasoning : "",
        .reasoning_len = s->reasoning.len - s->d_reasoning,
        .calls = o->view,
        .num_calls = view_calls(o, first, s->d_calls ? s->d_args : 0, s->d_calls > 0),
    };
    parts->calls = o->view;
    *content = s->content.data ? s->content.data + s->d_content : "";
    *len = s->content.len - s->d_content;
    s->d_reasoning = s->reasoning.len;
    s->d_content = s->content.len;
    s->d_calls = s->num_calls;
    s->d_args = s->num_calls ? s->calls[s->num_calls - 1].args.len : 0;
}

void folio_chat_output_message(struct folio_chat_output *o, bool reasoning_field,
                               struct folio_oai_chat_parts *parts, const char **content,
                               size_t *len)
{
    const struct folio_chat_sink *s = &o->sink;
    *parts = (struct folio_oai_chat_parts){
        .reasoning_field = reasoning_field,
        .reasoning = s->reasoning.data ? s->reasoning.data : "",
        .reasoning_len = s->reasoning.len,
        .num_calls = view_calls(o, 0, 0, false),
    };
    parts->calls = o->view;
    *content = s->content.data ? s->content.data : "";
    *len = s->content.len;
}
