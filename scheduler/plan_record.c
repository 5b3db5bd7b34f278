/* The step plan as the record the worker reads (common/ipc_records.h): each
 * planned entry's tokens, blocks, sampling, logit bias, prompt logprobs and
 * grammar, laid out in the policy's plan buffer. */
#include "policy.h"
#include "policy_internal.h"

#include <string.h>

#include "seq_options.h"

static int seq_plan_bias(const struct folio_policy *p, const struct seq *s,
                         struct folio_logit_bias *out)
{
    return folio_seq_options_plan_bias(&s->opt, p->cfg.eos_ids, p->cfg.num_eos_ids, s->num_outputs,
                                       out);
}

void policy_encode_plan(struct folio_policy *p, uint64_t step_id, uint64_t plan_unix_ns,
                        size_t *len)
{
    int num_tokens = 0, num_block_ids = 0, num_bias = 0;
    for (int i = 0; i < p->num_scratch; i++) {
        const struct step_entry *e = &p->scratch[i];
        num_tokens += e->num_new;
        num_block_ids += policy_ceil_blocks(e->seq->num_computed + e->num_new);
        num_bias += e->sample ? seq_plan_bias(p, e->seq, NULL) : 0;
    }
    struct folio_plan_header *h = (struct folio_plan_header *)p->plan_buf;
    *h = (struct folio_plan_header){.magic = FOLIO_PLAN_MAGIC,
                                    .num_seqs = p->num_scratch,
                                    .num_tokens = num_tokens,
                                    .num_block_ids = num_block_ids,
                                    .num_bias = num_bias,
                                    .num_replay = p->plan_replay_ids,
                                    .num_grammar_bytes = p->plan_grammar_bytes,
                                    .step_id = step_id,
                                    .plan_unix_ns = plan_unix_ns};
    struct folio_plan_seq *out = (struct folio_plan_seq *)(h + 1);
    int32_t *tok = (int32_t *)(out + p->num_scratch);
    int32_t *blk = tok + num_tokens;
    struct folio_logit_bias *bias = (struct folio_logit_bias *)(blk + num_block_ids);
    int32_t *replay = (int32_t *)(bias + num_bias);
    char *text = (char *)(replay + p->plan_replay_ids);
    int bias_at = 0, replay_at = 0, text_at = 0;
    for (int i = 0; i < p->num_scratch; i++) {
        const struct step_entry *e = &p->scratch[i];
        struct seq *s = e->seq;
        int start = s->num_computed, context = start + e->num_new;
        struct folio_plan_seq *o = &out[i];
        *o = (struct folio_plan_seq){.request_id = s->request_id, .sampling = s->sampling};
        o->slot = s->slot;
        o->num_new_tokens = e->num_new;
        o->context_len = context;
        o->num_blocks = policy_ceil_blocks(context);
        o->output_index = s->num_outputs;
        o->sample = e->sample;
        o->num_draft = e->num_draft;
        o->bias_offset = bias_at;
        o->num_bias = e->sample ? seq_plan_bias(p, s, bias + bias_at) : 0;
        bias_at += o->num_bias;
        folio_seq_options_plan_prompt_lp(&s->opt, s->tokens, s->num_prompt, start, e->num_new, o);
        folio_seq_options_plan_grammar(&s->opt, e->sample, s->tokens + s->num_prompt,
                                       s->num_tokens - s->num_prompt, replay, &replay_at, text,
                                       &text_at, o);
        /* A token not known yet is a draft (they follow the entry's first token), or else the
         * one this slot's previous step samples. */
        for (int pos = start; pos < context; pos++)
            *tok++ = pos < s->num_tokens              ? s->tokens[pos]
                     : e->num_draft && pos > e->start ? e->draft[pos - e->start - 1]
                                                      : FOLIO_TOKEN_FROM_PREV;
        memcpy(blk, s->blocks, (size_t)o->num_blocks * sizeof *blk);
        blk += o->num_blocks;
    }
    *len = folio_plan_size(p->num_scratch, num_tokens, num_block_ids, num_bias, p->plan_replay_ids,
                           p->plan_grammar_bytes);
}
