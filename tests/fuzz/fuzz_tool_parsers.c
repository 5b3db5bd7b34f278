/* Fuzzes frontend/chat_output.h with every tool parser and reasoning parser:
 * arbitrary UTF-8 as a model's text (the text stream gives nothing else).
 * The first byte picks the parsers and the call limit, the next two a split
 * point. The text parsed whole, and parsed in two pieces at the split point
 * and one character at a time (a delta taken after each push, as the text
 * stream passes whole characters), must give the same message byte for byte;
 * every call's name is non-empty for the text parsers, and the chunk and
 * response JSON the writers make of it must be valid JSON. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_output.h"
#include "openai_api.h"

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_tool_parsers: %s\n", what);
    abort();
}

struct joined {
    struct folio_jw content, reasoning, names, args;
    size_t calls;
};

static void joined_free(struct joined *j)
{
    folio_jw_free(&j->content);
    folio_jw_free(&j->reasoning);
    folio_jw_free(&j->names);
    folio_jw_free(&j->args);
}

static void check_json(const struct folio_jw *b, size_t skip)
{
    json_t *v = json_loadb(b->data + skip, b->len - skip - (skip ? 2 : 0), JSON_ALLOW_NUL, NULL);
    if (!v)
        fail("the writer's JSON does not parse");
    json_decref(v);
}

/* Adds a delta (or the message) to j; a call's name and arguments are kept
 * apart by a NUL so that concatenations cannot meet by accident. */
static void add(struct joined *j, const struct folio_oai_chat_parts *p, const char *c, size_t n)
{
    folio_jw_raw(&j->content, c, n);
    folio_jw_raw(&j->reasoning, p->reasoning, p->reasoning_len);
    for (size_t i = 0; i < p->num_calls; i++) {
        const struct folio_oai_tool_call *t = &p->calls[i];
        if (t->id) {
            if (t->index != j->calls++)
                fail("calls begin out of order");
            folio_jw_raw(&j->names, t->name, strlen(t->name) + 1);
            folio_jw_raw(&j->args, "", 1);
        } else if (t->index + 1 != j->calls) {
            fail("a call other than the last grows");
        }
        folio_jw_raw(&j->args, t->args, t->args_len);
    }
}

static void run(const struct folio_chat_output_cfg *cfg, const char *text, size_t len,
                const size_t *cuts, size_t ncuts, struct joined *j, bool whole)
{
    struct folio_chat_output o;
    if (folio_chat_output_init(&o, cfg) != 0)
        fail("out of memory");
    struct folio_oai_chat_parts p;
    const char *c;
    size_t n;
    struct folio_jw b;
    folio_jw_init(&b);
    static const struct folio_oai_response_ctx rctx = {FOLIO_OAI_CHAT, "x", 1, "m", false, 0};
    size_t at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        folio_chat_output_push(&o, text + at, end - at);
        at = end;
        if (whole)
            continue;
        folio_chat_output_take(&o, true, &p, &c, &n);
        add(j, &p, c, n);
    }
    folio_chat_output_finish(&o);
    if (whole) {
        folio_chat_output_message(&o, true, &p, &c, &n);
        struct folio_oai_choice ch = {.text = c, .len = n, .finish_reason = "stop", .parts = &p};
        struct folio_oai_usage u = {1, 1, 0};
        folio_oai_write_response(&b, &rctx, &ch, 1, &u);
        check_json(&b, 0);
    } else {
        folio_chat_output_take(&o, true, &p, &c, &n);
        folio_oai_write_chat_chunk(&b, &rctx, false, c, n, &p, "stop", NULL, 0, NULL);
        check_json(&b, 6);
    }
    add(j, &p, c, n);
    if (o.sink.failed)
        fail("out of memory");
    folio_jw_free(&b);
    folio_chat_output_free(&o);
}

static bool same(const struct folio_jw *a, const struct folio_jw *b)
{
    return a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len));
}

/* The length of the valid UTF-8 character at s (n bytes left: shortest
 * form, no surrogates, at most U+10FFFF), 0 when it does not start one. */
static size_t char_len(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t k;
    uint32_t cp, min;
    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xe0) == 0xc0)
        k = 2, cp = s[0] & 0x1f, min = 0x80;
    else if ((s[0] & 0xf0) == 0xe0)
        k = 3, cp = s[0] & 0x0f, min = 0x800;
    else if ((s[0] & 0xf8) == 0xf0)
        k = 4, cp = s[0] & 0x07, min = 0x10000;
    else
        return 0;
    if (k > n)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    return cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? 0 : k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3 || size > (64 << 10))
        return 0;
    static const struct folio_tool_parser_ops *const parsers[] = {
        NULL,
        &folio_tool_parser_hermes,
        &folio_tool_parser_llama3_json,
        &folio_tool_parser_mistral,
        &folio_tool_parser_required,
        &folio_tool_parser_named,
    };
    struct folio_chat_output_cfg cfg = {
        .parser = parsers[data[0] % 6],
        .reasoning = (enum folio_reasoning_kind)((data[0] / 6) % 3),
        .max_calls = (data[0] / 18) % 3,
        .function = "f",
        .id_seed = 7,
    };
    const char *text = (const char *)data + 3;
    size_t len = size - 3, want = ((size_t)data[1] << 8 | data[2]) % (len + 1), split = 0;
    size_t *cuts = malloc((len + 1) * sizeof *cuts), ncuts = 0;
    for (size_t i = 0; i < len;) {
        size_t k = char_len(text + i, len - i);
        if (!k) {
            free(cuts);
            return 0;
        }
        i += k;
        if (i <= want)
            split = i;
        if (i < len)
            cuts[ncuts++] = i;
    }
    struct joined whole = {0}, two = {0}, bytes = {0};
    run(&cfg, text, len, NULL, 0, &whole, true);
    run(&cfg, text, len, &split, 1, &two, false);
    run(&cfg, text, len, cuts, ncuts, &bytes, false);
    free(cuts);
    const struct joined *streams[] = {&two, &bytes};
    for (int k = 0; k < 2; k++) {
        const struct joined *s = streams[k];
        if (!same(&s->content, &whole.content) || !same(&s->reasoning, &whole.reasoning) ||
            !same(&s->names, &whole.names) || !same(&s->args, &whole.args) ||
            s->calls != whole.calls)
            fail(k ? "the byte-by-byte stream differs from the whole parse"
                   : "the stream split in two differs from the whole parse");
    }
    bool text_parser = cfg.parser && cfg.parser != &folio_tool_parser_named;
    for (size_t i = 0; text_parser && i < whole.names.len; i++)
        if (whole.names.data[i] == 0 && (i == 0 || whole.names.data[i - 1] == 0))
            fail("a call without a name");
    if (cfg.max_calls && whole.calls > cfg.max_calls)
        fail("more calls than parallel_tool_calls allows");
    joined_free(&whole);
    joined_free(&two);
    joined_free(&bytes);
    return 0;
}
