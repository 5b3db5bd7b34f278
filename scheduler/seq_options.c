#include "seq_options.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

int folio_seq_options_check(const struct folio_request *r, int vocab_size, char *msg, size_t len)
{
    if (r->params.num_stop_ids > FOLIO_MAX_STOP_TOKEN_IDS || r->params.num_stop_ids < 0) {
        snprintf(msg, len, "'stop_token_ids' has %d entries; at most %d are allowed",
                 r->params.num_stop_ids, FOLIO_MAX_STOP_TOKEN_IDS);
        return -1;
    }
    if (r->params.num_logit_bias > FOLIO_MAX_LOGIT_BIAS || r->params.num_logit_bias < 0) {
        snprintf(msg, len, "'logit_bias' has %d entries; at most %d are allowed",
                 r->params.num_logit_bias, FOLIO_MAX_LOGIT_BIAS);
        return -1;
    }
    const struct folio_seq_grammar *g = &r->params.grammar;
    if (g->on && (g->len < 0 || g->len > FOLIO_MAX_GRAMMAR_BYTES || (g->len > 0 && !g->text) ||
                  (unsigned)g->kind >= FOLIO_GRAMMAR_NUM_KINDS)) {
        snprintf(msg, len,
                 "the structured-output grammar (kind %d) has %d bytes; at most %d are "
                 "allowed",
                 (int)g->kind, g->len, FOLIO_MAX_GRAMMAR_BYTES);
        return -1;
    }
    return folio_logit_bias_check(r->params.logit_bias, r->params.num_logit_bias, vocab_size, msg,
                                  len);
}

bool folio_seq_options_init(struct folio_seq_options *o, const struct folio_request *r)
{
    memset(o, 0, sizeof *o);
    o->min_tokens = r->params.min_tokens;
    o->ignore_eos = r->params.ignore_eos;
    o->prompt_logprobs = r->params.prompt_logprobs;
    if (r->params.num_stop_ids > 0) {
        o->stop_ids = malloc((size_t)r->params.num_stop_ids * sizeof *o->stop_ids);
        if (!o->stop_ids)
            return false;
        memcpy(o->stop_ids, r->params.stop_ids,
               (size_t)r->params.num_stop_ids * sizeof *o->stop_ids);
        o->num_stop_ids = r->params.num_stop_ids;
    }
    if (r->params.num_logit_bias > 0) {
        o->bias = malloc((size_t)r->params.num_logit_bias * sizeof *o->bias);
        if (!o->bias)
            return false;
        memcpy(o->bias, r->params.logit_bias, (size_t)r->params.num_logit_bias * sizeof *o->bias);
        o->num_bias = r->params.num_logit_bias;
    }
    if (r->params.grammar.on) {
        char *text = malloc((size_t)r->params.grammar.len + 1);
        if (!text)
            return false;
        memcpy(text, r->params.grammar.text, (size_t)r->params.grammar.len);
        text[r->params.grammar.len] = 0;
        o->grammar = r->params.grammar;
        o->grammar.text = text;
    }
    return true;
}

void folio_seq_options_free(struct folio_seq_options *o)
{
    free(o->stop_ids);
    free(o->bias);
    free((char *)o->grammar.text);
    memset(o, 0, sizeof *o);
}

int folio_seq_options_max_bias(int num_eos_ids)
{
    return FOLIO_MAX_LOGIT_BIAS + FOLIO_MAX_STOP_TOKEN_IDS + num_eos_ids;
}

int folio_seq_options_plan_bias(const struct folio_seq_options *o, const int *eos_ids,
                                int num_eos_ids, int num_outputs, struct folio_logit_bias *out)
{
    int n = 0;
    for (int i = 0; i < o->num_bias; i++, n++)
        if (out)
            out[n] = o->bias[i];
    if (num_outputs >= o->min_tokens)
        return n;
    for (int i = 0; !o->ignore_eos && !o->grammar.on && i < num_eos_ids; i++, n++)
        if (out)
            out[n] = (struct folio_logit_bias){eos_ids[i], -INFINITY};
    for (int i = 0; i < o->num_stop_ids; i++, n++)
        if (out)
            out[n] = (struct folio_logit_bias){o->stop_ids[i], -INFINITY};
    return n;
}

bool folio_seq_options_is_stop(const struct folio_seq_options *o, const int *eos_ids,
                               int num_eos_ids, int32_t tok)
{
    for (int i = 0; (!o->ignore_eos || o->grammar.on) && i < num_eos_ids; i++)
        if (eos_ids[i] == tok)
            return true;
    for (int i = 0; i < o->num_stop_ids; i++)
        if (o->stop_ids[i] == tok)
            return true;
    return false;
}

void folio_seq_options_plan_prompt_lp(const struct folio_seq_options *o, const int32_t *tokens,
                                      int num_prompt, int start, int n, struct folio_plan_seq *out)
{
    out->num_prompt_lp = 0;
    out->next_prompt_token = -1;
    if (!o->prompt_logprobs)
        return;
    int end = start + n < num_prompt - 1 ? start + n : num_prompt - 1;
    out->num_prompt_lp = end > start ? end - start : 0;
    if (start + n < num_prompt)
        out->next_prompt_token = tokens[start + n];
}

void folio_seq_options_grammar_need(const struct folio_seq_options *o, int num_outputs,
                                    int *text_bytes, int *replay_ids)
{
    bool need = o->grammar.on && !o->grammar_sent;
    *text_bytes = need ? o->grammar.len : 0;
    *replay_ids = need ? num_outputs : 0;
}

void folio_seq_options_plan_grammar(struct folio_seq_options *o, bool sample,
                                    const int32_t *outputs, int num_outputs, int32_t *replay,
                                    int *replay_at, char *text, int *text_at,
                                    struct folio_plan_seq *out)
{
    out->grammar_kind = o->grammar.on ? (int32_t)o->grammar.kind : -1;
    if (!o->grammar.on || !sample || o->grammar_sent)
        return;
    out->grammar_new = 1;
    out->grammar_offset = *text_at;
    out->grammar_len = o->grammar.len;
    memcpy(text + *text_at, o->grammar.text, (size_t)o->grammar.len);
    *text_at += o->grammar.len;
    out->replay_offset = *replay_at;
    out->num_replay = num_outputs;
    memcpy(replay + *replay_at, outputs, (size_t)num_outputs * sizeof *replay);
    *replay_at += num_outputs;
    o->grammar_sent = true;
}
