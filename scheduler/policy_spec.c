/* Speculative decoding's side of the policy: which sequences get n-gram drafts in a step, and
 * what a verify step's samples keep (DESIGN.md, "Speculative decoding"). */
#include <string.h>

#include "policy.h"
#include "policy_internal.h"

#include "ngram_draft.h"
#include "seq_options.h"

/* Above this many decoding sequences a step drafts for none: each verify row costs a full
 * token's compute once the batch no longer reads weights for free, while the saving is one
 * weight read a step shared by the whole batch. */
#define SPEC_MAX_BATCH 8
/* A sequence drafts while its acceptance (the accepted share of its drafts, a moving average
 * that weighs each verify step 1/4) stays above this after SPEC_MIN_STEPS steps: below it, its
 * verify steps cost their extra rows and its lost pipelining for almost no tokens. */
#define SPEC_MIN_ACCEPT 0.1
#define SPEC_MIN_STEPS 4

void policy_spec_init_seq(const struct folio_policy *p, struct seq *s)
{
    /* Positions after a draft would need the draft's own penalties, grammar state or prompt
     * logprobs: such a sequence never drafts. */
    s->spec_ok = p->cfg.spec.on && !folio_sampling_params_penalized(&s->sampling) &&
                 !s->opt.grammar.on && !s->opt.prompt_logprobs;
    s->spec_accept = 1.0;
}

static bool seq_decoding(const struct seq *s)
{
    return s->num_outputs > 0 && s->num_computed == s->num_prompt + s->num_outputs - 1;
}

bool policy_spec_step_on(const struct folio_policy *p)
{
    if (!p->cfg.spec.on)
        return false;
    int n = 0;
    for (int i = 0; i < p->num_running; i++)
        n += seq_decoding(p->running[i]);
    return n <= SPEC_MAX_BATCH;
}

bool policy_spec_wants(const struct folio_policy *p, const struct seq *s, bool step_on)
{
    /* A logit bias (min_tokens' EOS ban too) would differ from one draft position to the next. */
    return step_on && s->spec_ok &&
           folio_seq_options_plan_bias(&s->opt, p->cfg.eos_ids, p->cfg.num_eos_ids, s->num_outputs,
                                       NULL) == 0;
}

int policy_spec_draft(const struct folio_policy *p, const struct seq *s, int max_k, int32_t *draft)
{
    int k = p->cfg.spec.num_tokens < max_k ? p->cfg.spec.num_tokens : max_k;
    if (k < 1)
        return 0;
    /* With its last token still in flight (its step pipelined), the continuation's first token
     * stands for that one and the drafts are the tokens after it, so the sequence keeps its
     * place in the pipeline instead of waiting for the step. */
    int ahead = s->num_computed == s->num_tokens;
    int32_t next[FOLIO_MAX_DRAFT_TOKENS + 1];
    int n = folio_ngram_draft(s->tokens, s->num_tokens, p->cfg.spec.lookup_min,
                              p->cfg.spec.lookup_max, k + ahead, next);
    if (n <= ahead)
        return 0;
    memcpy(draft, next + ahead, sizeof(int32_t) * (size_t)(n - ahead));
    return n - ahead;
}

int policy_spec_matched(const struct step_entry *e, const int32_t *sampled)
{
    /* Sample j was drawn at the position of draft j - 1: it stands only where every draft
     * before it equals the sample drawn in its place. */
    int m = 0;
    while (m < e->num_draft && sampled[m] == e->draft[m])
        m++;
    return m;
}

void policy_spec_observe(struct folio_policy *p, struct seq *s, int num_draft, int matched)
{
    p->st.spec_num_drafts++;
    p->st.spec_num_draft_tokens += (uint64_t)num_draft;
    p->st.spec_num_accepted_tokens += (uint64_t)matched;
    for (int j = 0; j < matched; j++)
        p->st.spec_accepted_per_pos[j]++;
    s->spec_steps++;
    s->spec_accept = 0.75 * s->spec_accept + 0.25 * (double)matched / num_draft;
    if (s->spec_steps >= SPEC_MIN_STEPS && s->spec_accept < SPEC_MIN_ACCEPT) {
        s->spec_ok = false;
        p->st.spec_seqs_disabled++;
    }
}
