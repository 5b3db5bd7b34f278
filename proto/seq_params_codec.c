#include "seq_params_codec.h"

#include <stdio.h>
#include <stdlib.h>

void folio_seq_params_to_submit(const struct folio_seq_params *p, Folio__Submit *s,
                                Folio__SamplingParams *sp, Folio__Grammar *g, int32_t *ids,
                                float *values)
{
    const struct folio_sampling_params *q = &p->sampling;
    sp->temperature = q->temperature;
    sp->top_k = q->top_k;
    sp->top_p = q->top_p;
    sp->min_p = q->min_p;
    sp->repetition_penalty = q->repetition_penalty;
    sp->frequency_penalty = q->frequency_penalty;
    sp->presence_penalty = q->presence_penalty;
    sp->has_seed = p->has_seed;
    sp->seed = q->seed;
    sp->logprobs = q->num_logprobs;
    s->sampling = sp;
    s->max_tokens = p->max_tokens;
    s->min_tokens = p->min_tokens;
    s->n_stop_token_ids = (size_t)p->num_stop_ids;
    s->stop_token_ids = (int32_t *)p->stop_ids;
    s->ignore_eos = p->ignore_eos;
    for (int32_t i = 0; i < p->num_logit_bias; i++) {
        ids[i] = p->logit_bias[i].token;
        values[i] = p->logit_bias[i].value;
    }
    s->n_logit_bias_ids = s->n_logit_bias_values = (size_t)p->num_logit_bias;
    s->logit_bias_ids = ids;
    s->logit_bias_values = values;
    s->prompt_logprobs = p->prompt_logprobs;
    s->grammar = NULL;
    if (p->grammar.on) {
        g->kind = (int32_t)p->grammar.kind;
        g->text.data = (uint8_t *)p->grammar.text;
        g->text.len = (size_t)p->grammar.len;
        s->grammar = g;
    }
}

int folio_seq_params_from_submit(const Folio__Submit *s, struct folio_seq_params *p,
                                 struct folio_logit_bias **bias, char *why, size_t whylen)
{
    *bias = NULL;
    /* Unset (0) top_p and repetition_penalty mean off, as a client that
     * builds a Submit by hand may leave them. */
    *p = (struct folio_seq_params){
        .sampling = {.top_p = 1, .repetition_penalty = 1},
        .max_tokens = s->max_tokens,
        .min_tokens = s->min_tokens,
        .stop_ids = s->stop_token_ids,
        .num_stop_ids = (int32_t)s->n_stop_token_ids,
        .ignore_eos = s->ignore_eos,
        .prompt_logprobs = s->prompt_logprobs,
    };
    const Folio__SamplingParams *sp = s->sampling;
    if (sp) {
        struct folio_sampling_params *q = &p->sampling;
        q->temperature = sp->temperature;
        q->top_k = sp->top_k;
        q->top_p = sp->top_p > 0 ? sp->top_p : 1;
        q->min_p = sp->min_p;
        q->repetition_penalty = sp->repetition_penalty > 0 ? sp->repetition_penalty : 1;
        q->frequency_penalty = sp->frequency_penalty;
        q->presence_penalty = sp->presence_penalty;
        q->seed = sp->seed;
        q->num_logprobs = sp->logprobs;
        p->has_seed = sp->has_seed;
    }
    if (s->grammar) {
        if (s->grammar->kind < 0 || s->grammar->kind >= FOLIO_GRAMMAR_NUM_KINDS) {
            snprintf(why, whylen, "grammar: unknown kind %d", s->grammar->kind);
            return -1;
        }
        if (s->grammar->text.len > FOLIO_MAX_GRAMMAR_BYTES) {
            snprintf(why, whylen, "the grammar has %zu bytes; at most %d are allowed",
                     s->grammar->text.len, FOLIO_MAX_GRAMMAR_BYTES);
            return -1;
        }
        p->grammar = (struct folio_seq_grammar){
            .on = true,
            .kind = (enum folio_grammar_kind)s->grammar->kind,
            .text = s->grammar->text.len ? (const char *)s->grammar->text.data : "",
            .len = (int32_t)s->grammar->text.len,
        };
    }
    if (s->n_logit_bias_ids != s->n_logit_bias_values) {
        snprintf(why, whylen, "logit_bias: as many ids as values are needed");
        return -1;
    }
    if (s->n_logit_bias_ids > 0) {
        *bias = malloc(s->n_logit_bias_ids * sizeof **bias);
        if (!*bias) {
            snprintf(why, whylen, "the scheduler is out of memory");
            return -2;
        }
        for (size_t i = 0; i < s->n_logit_bias_ids; i++)
            (*bias)[i] = (struct folio_logit_bias){s->logit_bias_ids[i], s->logit_bias_values[i]};
        p->logit_bias = *bias;
        p->num_logit_bias = (int32_t)s->n_logit_bias_ids;
    }
    return 0;
}
