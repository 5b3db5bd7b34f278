#include "choice.h"

#include <stdlib.h>
#include <string.h>

int folio_choice_init(struct folio_choice *c, const struct folio_tokenizer *t,
                      const struct folio_oai_request *r, const struct folio_oai_response_ctx *rctx,
                      uint32_t index, uint32_t prompt)
{
    memset(c, 0, sizeof *c);
    c->index = index;
    c->prompt = prompt;
    c->rctx = *rctx;
    c->rctx.index = index;
    folio_jw_init(&c->text);
    if (folio_text_stream_init(&c->ts, t, r->skip_special_tokens, (const char *const *)r->stop,
                               r->stop_len, r->num_stop, r->min_tokens) != 0)
        return -1;
    folio_text_stream_set_output(&c->ts, t, r->skip_special_tokens,
                                 r->spaces_between_special_tokens, r->include_stop_str_in_output);
    return 0;
}

static void free_lps(struct folio_oai_token_logprob *lp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)lp[i].text);
        for (uint32_t k = 0; k < lp[i].num_top; k++)
            free((char *)lp[i].top[k].text);
    }
}

void folio_choice_free(struct folio_choice *c)
{
    folio_text_stream_free(&c->ts);
    folio_jw_free(&c->text);
    free_lps(c->lps, c->num_lps);
    free(c->lps);
    memset(c, 0, sizeof *c);
}

void folio_choice_echo(struct folio_choice *c, const struct folio_oai_request *r, const char *text,
                       size_t len, struct folio_jw *out)
{
    c->text_base = len;
    if (r->stream)
        folio_oai_write_chunk(out, &c->rctx, false, text, len, NULL, NULL, 0, 0, NULL);
    else
        folio_jw_raw(&c->text, text, len);
}

static void set_top(const struct folio_tokenizer *t, struct folio_oai_top *top, int32_t id,
                    float logprob)
{
    size_t len = 0;
    char *s = folio_tokenizer_decode(t, &id, 1, false, &len);
    top->text = s ? s : strdup("");
    top->len = s ? len : 0;
    top->logprob = logprob;
}

/* Token i of the event: its logprob and the top want_top alternatives. The
 * sampled token is always among them, as OpenAI and vLLM list it (completions
 * logprobs=0: the sampled token alone); chat's top_logprobs=0 lists none. */
static void fill_lp(const struct folio_tokenizer *t, struct folio_oai_token_logprob *lp,
                    const struct folio_event_view *v, uint32_t i, int32_t want_top, bool chat)
{
    size_t len = 0;
    memset(lp, 0, sizeof *lp);
    int32_t id = v->token_ids[i];
    lp->text = folio_tokenizer_decode(t, &id, 1, false, &len);
    lp->len = lp->text ? len : 0;
    if (!lp->text)
        lp->text = strdup("");
    lp->logprob = v->logprobs[i];
    uint32_t n = v->hdr->num_top;
    if (n > (uint32_t)want_top)
        n = (uint32_t)want_top;
    bool sampled_listed = false;
    for (uint32_t k = 0; k < n && k < FOLIO_MAX_LOGPROBS; k++) {
        size_t at = (size_t)i * v->hdr->num_top + k;
        if (v->top_ids[at] < 0)
            break;
        sampled_listed |= v->top_ids[at] == id;
        set_top(t, &lp->top[lp->num_top++], v->top_ids[at], v->top_logprobs[at]);
    }
    if (!sampled_listed && !(chat && want_top == 0))
        set_top(t, &lp->top[lp->num_top++], id, lp->logprob);
}

/* The logprobs of the first `used` tokens: a fresh array when streaming
 * (*fresh), else appended to the choice's. NULL on allocation failure. */
static struct folio_oai_token_logprob *take_lps(struct folio_choice *c,
                                                const struct folio_tokenizer *t,
                                                const struct folio_oai_request *r,
                                                const struct folio_event_view *v, uint32_t used)
{
    struct folio_oai_token_logprob *lp;
    if (r->stream) {
        lp = calloc(used, sizeof *lp);
    } else {
        if (c->num_lps + used > c->cap_lps) {
            size_t cap = (c->num_lps + used) * 2;
            void *p = realloc(c->lps, cap * sizeof *c->lps);
            if (!p)
                return NULL;
            c->lps = p;
            c->cap_lps = cap;
        }
        lp = c->lps + c->num_lps;
    }
    if (!lp)
        return NULL;
    for (uint32_t i = 0; i < used; i++)
        fill_lp(t, &lp[i], v, i, r->logprobs, r->endpoint == FOLIO_OAI_CHAT);
    if (!r->stream)
        c->num_lps += used;
    return lp;
}

static const char *finish_name(uint32_t reason)
{
    return reason == FOLIO_FINISH_STOP ? "stop" : reason == FOLIO_FINISH_LENGTH ? "length" : NULL;
}

enum folio_choice_step folio_choice_event(struct folio_choice *c, const struct folio_tokenizer *t,
                                          const struct folio_oai_request *r,
                                          const struct folio_event_view *v, struct folio_jw *out,
                                          const struct folio_oai_usage *usage, uint32_t *used)
{
    const struct folio_event_header *h = v->hdr;
    struct folio_jw text;
    folio_jw_init(&text);
    bool stop_hit = false;
    uint32_t n = 0;
    for (; n < h->num_tokens && !stop_hit; n++) {
        int rc = folio_text_stream_push(&c->ts, v->token_ids[n], &text);
        if (rc < 0) {
            folio_jw_free(&text);
            *used = n;
            return FOLIO_CHOICE_BAD_TOKEN;
        }
        stop_hit = rc == 1;
    }
    *used = n;
    enum folio_choice_step step = FOLIO_CHOICE_MORE;
    if (stop_hit) {
        c->finish = "stop";
        step = h->finish_reason == FOLIO_FINISH_NONE ? FOLIO_CHOICE_STOP_STRING
                                                     : FOLIO_CHOICE_FINISHED;
    } else if (h->finish_reason == FOLIO_FINISH_STOP || h->finish_reason == FOLIO_FINISH_LENGTH) {
        int rc = folio_text_stream_finish(&c->ts, &text);
        c->finish = rc == 1 ? "stop" : finish_name(h->finish_reason);
        step = FOLIO_CHOICE_FINISHED;
    }
    struct folio_oai_token_logprob *lp = r->logprobs >= 0 && n > 0 ? take_lps(c, t, r, v, n) : NULL;
    if (r->stream) {
        if (text.len || lp || c->finish)
            folio_oai_write_chunk(out, &c->rctx, false, text.data ? text.data : "", text.len,
                                  c->finish, lp, lp ? n : 0,
                                  c->text_base + c->ts.emitted - text.len, usage);
        if (lp) {
            free_lps(lp, n);
            free(lp);
        }
    } else {
        folio_jw_raw(&c->text, text.data ? text.data : "", text.len);
    }
    folio_jw_free(&text);
    return step;
}

struct folio_oai_choice folio_choice_result(const struct folio_choice *c, bool with_logprobs)
{
    return (struct folio_oai_choice){.text = c->text.data ? c->text.data : "",
                                     .len = c->text.len,
                                     .finish_reason = c->finish,
                                     .lp = with_logprobs ? c->lps : NULL,
                                     .num_lp = c->num_lps};
}
