#include "reasoning_parser.h"

#include <string.h>

static const char OPEN[] = "<think>";
static const char CLOSE[] = "</think>";

enum {
    START,  /* the text so far is a prefix of <think> */
    THINK,  /* reasoning; held may be the start of </think> */
    ANSWER, /* the rest is answer */
};

int folio_reasoning_kind_parse(const char *name, enum folio_reasoning_kind *out)
{
    if (!name)
        *out = FOLIO_REASONING_NONE;
    else if (!strcmp(name, "deepseek_r1"))
        *out = FOLIO_REASONING_DEEPSEEK_R1;
    else if (!strcmp(name, "qwen3"))
        *out = FOLIO_REASONING_QWEN3;
    else
        return -1;
    return 0;
}

void folio_reasoning_init(struct folio_reasoning_parser *p, enum folio_reasoning_kind kind)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->state = kind == FOLIO_REASONING_NONE ? ANSWER : START;
    folio_jw_init(&p->held);
}

void folio_reasoning_free(struct folio_reasoning_parser *p)
{
    folio_jw_free(&p->held);
}

static void byte(struct folio_reasoning_parser *p, unsigned char c, struct folio_jw *reasoning,
                 struct folio_jw *answer);

/* The text did not start with <think>: what was held is reasoning for
 * deepseek_r1 (and may hold the start of </think>), answer for qwen3. */
static void no_open_tag(struct folio_reasoning_parser *p, struct folio_jw *reasoning,
                        struct folio_jw *answer)
{
    char held[sizeof OPEN];
    size_t n = p->held.len;
    if (n)
        memcpy(held, p->held.data, n);
    folio_jw_reset(&p->held);
    p->state = p->kind == FOLIO_REASONING_DEEPSEEK_R1 ? THINK : ANSWER;
    for (size_t i = 0; i < n; i++)
        byte(p, (unsigned char)held[i], reasoning, answer);
}

static void byte(struct folio_reasoning_parser *p, unsigned char c, struct folio_jw *reasoning,
                 struct folio_jw *answer)
{
    struct folio_jw *h = &p->held;
    switch (p->state) {
    case START:
        folio_jw_raw(h, (const char *)&c, 1);
        if (memcmp(h->data, OPEN, h->len) != 0) {
            no_open_tag(p, reasoning, answer);
        } else if (h->len == sizeof OPEN - 1) {
            folio_jw_reset(h);
            p->state = THINK;
        }
        return;
    case THINK: {
        folio_jw_raw(h, (const char *)&c, 1);
        if (h->len >= sizeof CLOSE - 1 &&
            !memcmp(h->data + h->len - (sizeof CLOSE - 1), CLOSE, sizeof CLOSE - 1)) {
            folio_jw_raw(reasoning, h->data, h->len - (sizeof CLOSE - 1));
            folio_jw_reset(h);
            p->state = ANSWER;
            return;
        }
        /* keep the longest tail that may begin </think> */
        size_t k = sizeof CLOSE - 2 < h->len ? sizeof CLOSE - 2 : h->len;
        while (k > 0 && memcmp(h->data + h->len - k, CLOSE, k) != 0)
            k--;
        folio_jw_raw(reasoning, h->data, h->len - k);
        memmove(h->data, h->data + h->len - k, k);
        h->len = k;
        return;
    }
    default:
        folio_jw_raw(answer, (const char *)&c, 1);
    }
}

void folio_reasoning_push(struct folio_reasoning_parser *p, const char *text, size_t len,
                          struct folio_jw *reasoning, struct folio_jw *answer)
{
    if (p->state == ANSWER) {
        folio_jw_raw(answer, text, len);
        return;
    }
    for (size_t i = 0; i < len; i++)
        byte(p, (unsigned char)text[i], reasoning, answer);
}

void folio_reasoning_finish(struct folio_reasoning_parser *p, struct folio_jw *reasoning,
                            struct folio_jw *answer)
{
    if (p->state == START)
        no_open_tag(p, reasoning, answer);
    else if (p->state == THINK)
        folio_jw_raw(reasoning, p->held.data, p->held.len); /* never closed: all reasoning */
    folio_jw_reset(&p->held);
    p->state = ANSWER;
}
