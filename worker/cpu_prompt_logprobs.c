#include "cpu_prompt_logprobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"

int folio_prompt_lps_alloc(struct folio_prompt_lps *p, int max_num_tokens)
{
    size_t t = (size_t)max_num_tokens;
    memset(p, 0, sizeof *p);
    p->ids = malloc(t * sizeof *p->ids);
    p->logprobs = malloc(t * sizeof *p->logprobs);
    p->top_ids = malloc(t * FOLIO_MAX_LOGPROBS * sizeof *p->top_ids);
    p->top_logprobs = malloc(t * FOLIO_MAX_LOGPROBS * sizeof *p->top_logprobs);
    return p->ids && p->logprobs && p->top_ids && p->top_logprobs ? 0 : -1;
}

void folio_prompt_lps_free(struct folio_prompt_lps *p)
{
    free(p->ids);
    free(p->logprobs);
    free(p->top_ids);
    free(p->top_logprobs);
    memset(p, 0, sizeof *p);
}

int folio_cpu_prompt_logprobs(const struct folio_step_batch *batch, int32_t vocab,
                              folio_row_logits_fn row_logits, void *ctx, float *scratch,
                              struct folio_prompt_lps *out, char *err, size_t errlen)
{
    out->count = 0;
    int32_t t0 = 0;
    for (int32_t i = 0; i < batch->num_seqs; t0 += batch->seqs[i].num_new_tokens, i++) {
        const struct folio_step_seq *q = &batch->seqs[i];
        for (int32_t k = 0; k < q->num_prompt_logprobs; k++) {
            /* entry k: the token after new token k */
            int32_t next =
                k + 1 < q->num_new_tokens ? batch->token_ids[t0 + k + 1] : q->next_prompt_token;
            if (next < 0 || next >= vocab) {
                snprintf(err, errlen,
                         "step: seq %d: prompt logprob %d is for token %d, not a prompt token", i,
                         k, next);
                return -1;
            }
            row_logits(ctx, t0 + k, scratch);
            struct folio_sample_result r;
            if (folio_token_logprobs(scratch, vocab, next, q->sampling.num_logprobs, &r, err,
                                     errlen) != 0)
                return -1;
            int32_t e = out->count++;
            out->ids[e] = next;
            out->logprobs[e] = r.logprob;
            memcpy(out->top_ids + (size_t)e * FOLIO_MAX_LOGPROBS, r.top_ids, sizeof r.top_ids);
            memcpy(out->top_logprobs + (size_t)e * FOLIO_MAX_LOGPROBS, r.top_logprobs,
                   sizeof r.top_logprobs);
        }
    }
    return 0;
}

void folio_prompt_lps_copy(const struct folio_prompt_lps *p, struct folio_step_result *res)
{
    size_t n = (size_t)p->count;
    if (!res->prompt_ids || n == 0)
        return;
    memcpy(res->prompt_ids, p->ids, n * sizeof *p->ids);
    memcpy(res->prompt_logprobs, p->logprobs, n * sizeof *p->logprobs);
    memcpy(res->prompt_top_ids, p->top_ids, n * FOLIO_MAX_LOGPROBS * sizeof *p->top_ids);
    memcpy(res->prompt_top_logprobs, p->top_logprobs,
           n * FOLIO_MAX_LOGPROBS * sizeof *p->top_logprobs);
}
