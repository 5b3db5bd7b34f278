#include "choice.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int folio_choice_init(struct folio_choice *c, const struct folio_tokenizer *t,
                      const struct folio_oai_request *r, const struct folio_oai_response_ctx *rctx,
                      uint32_t index, uint32_t prompt, uint32_t prompt_tokens)
{
    memset(c, 0, sizeof *c);
    c->index = index;
    c->prompt = prompt;
    c->prompt_tokens = prompt_tokens;
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

int folio_choice_set_output(struct folio_choice *c, const struct folio_chat_output_cfg *cfg,
                            bool reasoning_field, bool named_call, bool hide_special_stop)
{
    if (!(c->out = malloc(sizeof *c->out)) || folio_chat_output_init(c->out, cfg) != 0)
        return -1;
    c->reasoning_field = reasoning_field;
    c->named_call = named_call;
    c->hide_special_stop = hide_special_stop;
    return 0;
}

void folio_choice_free(struct folio_choice *c)
{
    if (c->out) {
        folio_chat_output_free(c->out);
        free(c->out);
    }
    folio_text_stream_free(&c->ts);
    folio_jw_free(&c->text);
    free_lps(c->lps, c->num_lps);
    free(c->lps);
    free_lps(c->echo_lps, c->num_echo_lps);
    free(c->echo_lps);
    memset(c, 0, sizeof *c);
}

/* Continuous usage stats as vLLM writes them in each chunk: this choice's
 * prompt and the tokens it has generated so far, this chunk's included (the
 * engine's count: a token that completed a stop string counts, text held
 * back does not matter). NULL when not asked for. */
static const struct folio_oai_usage *chunk_usage(const struct folio_choice *c,
                                                 const struct folio_oai_request *r,
                                                 struct folio_oai_usage *u)
{
    *u = (struct folio_oai_usage){.prompt_tokens = c->prompt_tokens,
                                  .completion_tokens = c->ts.num_tokens};
    return r->continuous_usage ? u : NULL;
}

void folio_choice_role_chunk(const struct folio_choice *c, const struct folio_oai_request *r,
                             struct folio_jw *out)
{
    struct folio_oai_usage u;
    folio_oai_write_chunk(out, &c->rctx, true, "", 0, NULL, NULL, 0, 0, chunk_usage(c, r, &u));
}

/* A token's text, owned by the caller ("" for an id the tokenizer lacks). */
static const char *token_text(const struct folio_tokenizer *t, int32_t id, size_t *len)
{
    char *s = folio_tokenizer_decode(t, &id, 1, false, len);
    if (!s)
        *len = 0;
    return s ? s : strdup("");
}

static void set_top(const struct folio_tokenizer *t, struct folio_oai_top *top, int32_t id,
                    float logprob)
{
    top->text = token_text(t, id, &top->len);
    top->logprob = logprob;
}

static void set_lp(const struct folio_tokenizer *t, struct folio_oai_token_logprob *lp, int32_t id,
                   float logprob)
{
    memset(lp, 0, sizeof *lp);
    lp->text = token_text(t, id, &lp->len);
    lp->logprob = logprob;
}

/* A token's logprob and the top want_top alternatives (of avail given).
 * Completions add the token itself when it is not among them, as OpenAI's
 * legacy endpoint and vLLM list it (up to want_top + 1; logprobs=0: the token
 * alone). Chat lists exactly the want_top most likely, as OpenAI does: the
 * token's own logprob is in the entry already. */
static void fill_lp(const struct folio_tokenizer *t, struct folio_oai_token_logprob *lp, int32_t id,
                    float logprob, const int32_t *top_ids, const float *top_lps, uint32_t avail,
                    int32_t want_top, bool chat)
{
    set_lp(t, lp, id, logprob);
    uint32_t n = avail < (uint32_t)want_top ? avail : (uint32_t)want_top;
    bool listed = false;
    for (uint32_t k = 0; k < n && k < FOLIO_MAX_LOGPROBS && top_ids[k] >= 0; k++) {
        listed |= top_ids[k] == id;
        set_top(t, &lp->top[lp->num_top++], top_ids[k], top_lps[k]);
    }
    if (!listed && !chat)
        set_top(t, &lp->top[lp->num_top++], id, logprob);
}

/* Token i of a token event. */
static void fill_event_lp(const struct folio_tokenizer *t, struct folio_oai_token_logprob *lp,
                          const struct folio_event_view *v, uint32_t i, int32_t want_top, bool chat)
{
    size_t at = (size_t)i * v->hdr->num_top;
    fill_lp(t, lp, v->token_ids[i], v->logprobs[i], v->top_ids + at, v->top_logprobs + at,
            v->hdr->num_top, want_top, chat);
}

/* Room for n more logprobs in *a (of *num, capacity *cap); NULL when out of memory. */
static struct folio_oai_token_logprob *grow_lps(struct folio_oai_token_logprob **a, size_t num,
                                                size_t *cap, size_t n)
{
    if (num + n > *cap) {
        size_t c = (num + n) * 2;
        void *p = realloc(*a, c * sizeof **a);
        if (!p)
            return NULL;
        *a = p;
        *cap = c;
    }
    return *a + num;
}

static void write_echo_chunk(struct folio_choice *c, const struct folio_oai_request *r,
                             struct folio_jw *out)
{
    struct folio_oai_usage u;
    folio_oai_write_chunk(out, &c->rctx, false, c->echo_text, c->echo_len, NULL, c->echo_lps,
                          c->num_echo_lps, 0, chunk_usage(c, r, &u));
    free_lps(c->echo_lps, c->num_echo_lps);
    free(c->echo_lps);
    c->echo_lps = NULL;
    c->num_echo_lps = 0;
    c->echo_text = NULL;
}

int folio_choice_echo(struct folio_choice *c, const struct folio_tokenizer *t,
                      const struct folio_oai_request *r, const char *text, size_t len,
                      const int32_t *prompt_ids, size_t num_prompt_ids, struct folio_jw *out)
{
    c->text_base = len;
    if (!r->stream)
        folio_jw_raw(&c->text, text, len);
    if (r->logprobs < 0) {
        struct folio_oai_usage u;
        if (r->stream)
            folio_oai_write_chunk(out, &c->rctx, false, text, len, NULL, NULL, 0, 0,
                                  chunk_usage(c, r, &u));
        return 0;
    }
    size_t cap = 0;
    struct folio_oai_token_logprob **a = r->stream ? &c->echo_lps : &c->lps;
    size_t *num = r->stream ? &c->num_echo_lps : &c->num_lps;
    struct folio_oai_token_logprob *lp =
        grow_lps(a, *num, r->stream ? &cap : &c->cap_lps, num_prompt_ids);
    if (!lp || num_prompt_ids == 0)
        return lp ? 0 : -1;
    set_lp(t, lp, prompt_ids[0], NAN); /* nothing precedes it */
    (*num)++;
    c->want_echo_lps = num_prompt_ids;
    c->echo_text = text;
    c->echo_len = len;
    if (r->stream && c->num_echo_lps == c->want_echo_lps)
        write_echo_chunk(c, r, out);
    return 0;
}

void folio_choice_prompt_lps(struct folio_choice *c, const struct folio_tokenizer *t,
                             const struct folio_oai_request *r, const struct folio_event_view *v,
                             struct folio_jw *out)
{
    uint32_t n = v->hdr->num_prompt_lp, k = v->hdr->num_top;
    struct folio_oai_token_logprob **a = r->stream ? &c->echo_lps : &c->lps;
    size_t *num = r->stream ? &c->num_echo_lps : &c->num_lps;
    size_t cap = r->stream ? *num : c->cap_lps;
    if (r->logprobs < 0 || !r->echo || n == 0 || (r->stream && !c->echo_text))
        return;
    struct folio_oai_token_logprob *lp = grow_lps(a, *num, &cap, n);
    if (!lp)
        return;
    if (!r->stream)
        c->cap_lps = cap;
    for (uint32_t i = 0; i < n; i++)
        fill_lp(t, &lp[i], v->prompt_ids[i], v->prompt_logprobs[i], v->prompt_top_ids + i * k,
                v->prompt_top_logprobs + i * k, k, r->logprobs, false);
    *num += n;
    if (r->stream && c->num_echo_lps >= c->want_echo_lps)
        write_echo_chunk(c, r, out);
}

/* The logprobs of the first `used` tokens: a new array when streaming (the
 * caller frees it), else appended to the choice's. NULL when out of memory. */
static struct folio_oai_token_logprob *take_lps(struct folio_choice *c,
                                                const struct folio_tokenizer *t,
                                                const struct folio_oai_request *r,
                                                const struct folio_event_view *v, uint32_t used)
{
    struct folio_oai_token_logprob *lp =
        r->stream ? calloc(used, sizeof *lp) : grow_lps(&c->lps, c->num_lps, &c->cap_lps, used);
    if (!lp)
        return NULL;
    for (uint32_t i = 0; i < used; i++)
        fill_event_lp(t, &lp[i], v, i, r->logprobs, r->endpoint == FOLIO_OAI_CHAT);
    if (!r->stream)
        c->num_lps += used;
    return lp;
}

static const char *finish_name(uint32_t reason)
{
    return reason == FOLIO_FINISH_STOP ? "stop" : reason == FOLIO_FINISH_LENGTH ? "length" : NULL;
}

/* A parsed chat choice's new text: into its message; streaming, the chunk of
 * what the message gained. */
static void parsed_text(struct folio_choice *c, const struct folio_oai_request *r,
                        const struct folio_jw *text, const struct folio_oai_token_logprob *lp,
                        uint32_t n, struct folio_jw *out)
{
    folio_chat_output_push(c->out, text->data, text->len);
    if (c->finish) {
        folio_chat_output_finish(c->out);
        if (c->out->sink.num_calls && !strcmp(c->finish, "stop") && !c->named_call)
            c->finish = "tool_calls";
    }
    if (!r->stream)
        return;
    struct folio_oai_chat_parts parts;
    const char *content;
    size_t len;
    folio_chat_output_take(c->out, c->reasoning_field, &parts, &content, &len);
    struct folio_oai_usage u;
    if (len || parts.reasoning_len || parts.num_calls || lp || c->finish)
        folio_oai_write_chat_chunk(out, &c->rctx, false, content, len, &parts, c->finish, lp,
                                   lp ? n : 0, chunk_usage(c, r, &u));
}

enum folio_choice_step folio_choice_event(struct folio_choice *c, const struct folio_tokenizer *t,
                                          const struct folio_oai_request *r,
                                          const struct folio_event_view *v, struct folio_jw *out,
                                          uint32_t *used)
{
    const struct folio_event_header *h = v->hdr;
    if (r->stream && c->echo_text && (h->num_tokens || h->finish_reason != FOLIO_FINISH_NONE))
        write_echo_chunk(c, r, out); /* the prompt's logprobs did not all come */
    struct folio_jw text;
    folio_jw_init(&text);
    bool stop_hit = false;
    uint32_t n = 0;
    for (; n < h->num_tokens && !stop_hit; n++) {
        if (c->hide_special_stop && n + 1 == h->num_tokens &&
            h->finish_reason == FOLIO_FINISH_STOP &&
            folio_tokenizer_is_special(t, v->token_ids[n])) {
            c->ts.num_tokens++; /* EOS ends the text without being part of it */
            continue;
        }
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
    if (c->out) {
        parsed_text(c, r, &text, lp, n, out);
        if (r->stream && lp) {
            free_lps(lp, n);
            free(lp);
        }
    } else if (r->stream) {
        struct folio_oai_usage u;
        if (text.len || lp || c->finish)
            folio_oai_write_chunk(out, &c->rctx, false, text.data ? text.data : "", text.len,
                                  c->finish, lp, lp ? n : 0,
                                  c->text_base + c->ts.emitted - text.len, chunk_usage(c, r, &u));
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

struct folio_oai_choice folio_choice_result(struct folio_choice *c, bool with_logprobs)
{
    struct folio_oai_choice res = {.text = c->text.data ? c->text.data : "",
                                   .len = c->text.len,
                                   .finish_reason = c->finish,
                                   .lp = with_logprobs ? c->lps : NULL,
                                   .num_lp = c->num_lps};
    if (c->out) {
        folio_chat_output_message(c->out, c->reasoning_field, &c->parts, &res.text, &res.len);
        res.parts = &c->parts;
    }
    return res;
}
