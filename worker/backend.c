#include "backend.h"

#include <stdio.h>
#include <stdlib.h>

/* A grammar mask only on a sampling sequence, where the backend applies masks. */
static int mask_check(const struct folio_backend *b, const struct folio_step_seq *q, int i,
                      char *err, size_t errlen)
{
    if (q->allowed && (!q->sample || !b->caps.grammar)) {
        snprintf(err, errlen, "step: seq %d brings a grammar mask %s", i,
                 q->sample ? "to a backend that does not apply them (its LoadReply says so, and "
                             "the scheduler refuses them)"
                           : "but does not sample");
        return -1;
    }
    return 0;
}

static int check_seq(const struct folio_backend *b, const struct folio_step_seq *q, int i,
                     char *err, size_t errlen)
{
    if (q->num_new_tokens < 1 || q->context_len < q->num_new_tokens) {
        snprintf(err, errlen, "step: seq %d (slot %d): %d new tokens, context_len %d", i, q->slot,
                 q->num_new_tokens, q->context_len);
        return -1;
    }
    int need = (q->context_len + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE;
    if (!q->block_table || q->num_blocks < need ||
        (b->max_blocks_per_seq > 0 && need > b->max_blocks_per_seq)) {
        snprintf(err, errlen,
                 "step: seq %d (slot %d): context_len %d needs %d KV blocks (has %d, at most %d)",
                 i, q->slot, q->context_len, need, q->num_blocks, b->max_blocks_per_seq);
        return -1;
    }
    for (int j = 0; j < need; j++)
        if (q->block_table[j] < 0 || q->block_table[j] >= b->num_kv_blocks) {
            snprintf(err, errlen, "step: seq %d (slot %d): block_table[%d] = %d outside 0..%d", i,
                     q->slot, j, q->block_table[j], b->num_kv_blocks - 1);
            return -1;
        }
    if (q->num_prompt_logprobs < 0 || q->num_prompt_logprobs > q->num_new_tokens) {
        snprintf(err, errlen, "step: seq %d: %d prompt logprobs of %d new tokens", i,
                 q->num_prompt_logprobs, q->num_new_tokens);
        return -1;
    }
    if (q->num_prompt_logprobs > 0 && !b->caps.prompt_logprobs) {
        snprintf(err, errlen,
                 "step: seq %d asks for prompt logprobs, which this backend does not compute (its "
                 "LoadReply says so, and the scheduler refuses them)",
                 i);
        return -1;
    }
    if (mask_check(b, q, i, err, errlen) != 0)
        return -1;
    if (q->num_draft != 0 &&
        (!b->caps.verify_drafts || q->num_draft < 0 || q->num_draft > FOLIO_MAX_DRAFT_TOKENS ||
         q->num_draft >= q->num_new_tokens || !q->sample || q->num_bias > 0 || q->allowed ||
         q->num_prompt_logprobs > 0 || folio_sampling_params_penalized(&q->sampling))) {
        snprintf(err, errlen,
                 "step: seq %d brings %d drafts (the backend %s them; at most %d, fewer than its "
                 "new tokens, on a sampling sequence without bias, mask, penalties or prompt "
                 "logprobs)",
                 i, q->num_draft, b->caps.verify_drafts ? "verifies" : "does not verify",
                 FOLIO_MAX_DRAFT_TOKENS);
        return -1;
    }
    if ((q->sample || q->num_prompt_logprobs > 0) &&
        folio_sampling_params_check(&q->sampling, err, errlen) != 0)
        return -1;
    if (q->sample && folio_logit_bias_check(q->bias, q->num_bias, b->vocab_size, err, errlen) != 0)
        return -1;
    return 0;
}

int folio_step_batch_check(struct folio_backend *b, const struct folio_step_batch *batch, char *err,
                           size_t errlen)
{
    if (!batch || !batch->seqs || batch->num_seqs < 1 || batch->num_seqs > b->max_seqs) {
        snprintf(err, errlen, "step: num_seqs %d outside 1..%d", batch ? batch->num_seqs : 0,
                 b->max_seqs);
        return -1;
    }
    if (!batch->token_ids || batch->num_tokens < 1 || batch->num_tokens > b->max_num_tokens) {
        snprintf(err, errlen, "step: num_tokens %d outside 1..%d", batch->num_tokens,
                 b->max_num_tokens);
        return -1;
    }
    if (batch->masks_later && !b->ops->sample_masked) {
        snprintf(err, errlen, "step: masks_later, but this backend takes masks only at launch");
        return -1;
    }
    if (!b->slot_seen && !(b->slot_seen = calloc((size_t)b->max_seqs, sizeof *b->slot_seen))) {
        snprintf(err, errlen, "step: out of memory");
        return -1;
    }
    if (++b->check_stamp == 0) { /* wrapped: stamps of old checks could match again */
        for (int i = 0; i < b->max_seqs; i++)
            b->slot_seen[i] = 0;
        b->check_stamp = 1;
    }
    int64_t sum = 0, drafts = 0;
    for (int i = 0; i < batch->num_seqs; i++) {
        const struct folio_step_seq *q = &batch->seqs[i];
        drafts += q->num_draft > 0 ? q->num_draft : 0;
        if (q->slot < 0 || q->slot >= b->max_seqs) {
            snprintf(err, errlen, "step: seq %d: slot %d outside 0..%d", i, q->slot,
                     b->max_seqs - 1);
            return -1;
        }
        if (b->slot_seen[q->slot] == b->check_stamp) {
            snprintf(err, errlen, "step: seq %d: slot %d appears twice", i, q->slot);
            return -1;
        }
        b->slot_seen[q->slot] = b->check_stamp;
        if (check_seq(b, q, i, err, errlen) != 0)
            return -1;
        if (batch->masks_later && q->allowed) {
            snprintf(err, errlen, "step: seq %d brings its grammar mask at launch, not later", i);
            return -1;
        }
        sum += q->num_new_tokens;
    }
    if (drafts > FOLIO_MAX_DRAFT_ROWS) {
        snprintf(err, errlen, "step: %lld draft positions, at most %d a step", (long long)drafts,
                 FOLIO_MAX_DRAFT_ROWS);
        return -1;
    }
    if (sum != batch->num_tokens) {
        snprintf(err, errlen, "step: num_tokens %d but the sequences bring %lld", batch->num_tokens,
                 (long long)sum);
        return -1;
    }
    for (int t = 0; t < batch->num_tokens; t++) {
        int id = batch->token_ids[t];
        if (id != FOLIO_TOKEN_FROM_PREV && (id < 0 || id >= b->vocab_size)) {
            snprintf(err, errlen, "step: token_ids[%d] = %d outside 0..%d", t, id,
                     b->vocab_size - 1);
            return -1;
        }
    }
    return 0;
}

void folio_backend_base_free(struct folio_backend *b)
{
    free(b->slot_seen);
    b->slot_seen = NULL;
}

int folio_backend_masks_check(const struct folio_backend *b, const struct folio_step_batch *batch,
                              char *err, size_t errlen)
{
    for (int i = 0; i < batch->num_seqs; i++)
        if (mask_check(b, &batch->seqs[i], i, err, errlen) != 0)
            return -1;
    return 0;
}

int folio_backend_step(struct folio_backend *b, const struct folio_step_batch *batch,
                       struct folio_step_result *res, char *err, size_t errlen)
{
    if (b->ops->launch(b, batch, err, errlen) != 0)
        return -1;
    return b->ops->collect(b, res, err, errlen);
}
