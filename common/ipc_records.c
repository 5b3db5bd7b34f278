#include "ipc_records.h"

#include <stdio.h>
#include <string.h>

/* Arrays follow their header back to back; every element is 4 or 8 bytes and
 * every header a multiple of 8, so no array is misaligned. */

size_t folio_plan_size(int32_t num_seqs, int32_t num_tokens, int32_t num_block_ids,
                       int32_t num_bias)
{
    return sizeof(struct folio_plan_header) + (size_t)num_seqs * sizeof(struct folio_plan_seq) +
           (size_t)num_tokens * 4 + (size_t)num_block_ids * 4 +
           (size_t)num_bias * sizeof(struct folio_logit_bias);
}

int folio_plan_decode(const void *rec, size_t len, struct folio_plan_view *v, char *err,
                      size_t errlen)
{
    const struct folio_plan_header *h = rec;
    if (len < sizeof *h || h->magic != FOLIO_PLAN_MAGIC) {
        snprintf(err, errlen, "step plan: bad magic or short record (%zu bytes)", len);
        return -1;
    }
    if (h->num_seqs < 0 || h->num_tokens < 0 || h->num_block_ids < 0 || h->num_bias < 0 ||
        h->num_seqs > (1 << 20) || h->num_tokens > (1 << 24) || h->num_block_ids > (1 << 24) ||
        h->num_bias > (1 << 24) ||
        folio_plan_size(h->num_seqs, h->num_tokens, h->num_block_ids, h->num_bias) != len) {
        snprintf(err, errlen, "step plan %llu: counts do not match its length",
                 (unsigned long long)h->step_id);
        return -1;
    }
    const char *p = (const char *)rec + sizeof *h;
    v->hdr = h;
    v->seqs = (const struct folio_plan_seq *)p;
    p += (size_t)h->num_seqs * sizeof(struct folio_plan_seq);
    v->token_ids = (const int32_t *)p;
    p += (size_t)h->num_tokens * 4;
    v->block_ids = (const int32_t *)p;
    p += (size_t)h->num_block_ids * 4;
    v->bias = (const struct folio_logit_bias *)p;
    int64_t tokens = 0, blocks = 0;
    for (int32_t i = 0; i < h->num_seqs; i++) {
        const struct folio_plan_seq *s = &v->seqs[i];
        if (s->num_new_tokens < 0 || s->num_blocks < 0 || s->num_bias < 0 || s->bias_offset < 0 ||
            (int64_t)s->bias_offset + s->num_bias > h->num_bias) {
            snprintf(err, errlen,
                     "step plan %llu: sequence %d has negative counts or its logit "
                     "bias lies outside the plan",
                     (unsigned long long)h->step_id, i);
            return -1;
        }
        tokens += s->num_new_tokens;
        blocks += s->num_blocks;
    }
    if (tokens != h->num_tokens || blocks != h->num_block_ids) {
        snprintf(err, errlen, "step plan %llu: per-sequence counts do not add up",
                 (unsigned long long)h->step_id);
        return -1;
    }
    return 0;
}

size_t folio_result_size(int32_t num_seqs, int32_t num_top, int32_t num_prompt_lp)
{
    return sizeof(struct folio_result_header) + (size_t)num_seqs * sizeof(struct folio_result_seq) +
           (size_t)num_top * 8 + (size_t)num_prompt_lp * 8;
}

int folio_result_decode(const void *rec, size_t len, struct folio_result_view *v, char *err,
                        size_t errlen)
{
    const struct folio_result_header *h = rec;
    if (len < sizeof *h || h->magic != FOLIO_RESULT_MAGIC) {
        snprintf(err, errlen, "step result: bad magic or short record (%zu bytes)", len);
        return -1;
    }
    if (h->num_seqs < 0 || h->num_top < 0 || h->num_prompt_lp < 0 || h->num_seqs > (1 << 20) ||
        h->num_top > (1 << 26) || h->num_prompt_lp > (1 << 24) ||
        folio_result_size(h->num_seqs, h->num_top, h->num_prompt_lp) > len) {
        snprintf(err, errlen, "step result %llu: counts do not match its length",
                 (unsigned long long)h->step_id);
        return -1;
    }
    const char *p = (const char *)rec + sizeof *h;
    v->hdr = h;
    v->seqs = (const struct folio_result_seq *)p;
    p += (size_t)h->num_seqs * sizeof(struct folio_result_seq);
    v->top_ids = (const int32_t *)p;
    v->top_logprobs = (const float *)(p + (size_t)h->num_top * 4);
    p += (size_t)h->num_top * 8;
    v->prompt_ids = (const int32_t *)p;
    v->prompt_logprobs = (const float *)(p + (size_t)h->num_prompt_lp * 4);
    for (int32_t i = 0; i < h->num_seqs; i++) {
        const struct folio_result_seq *s = &v->seqs[i];
        int64_t prompt_tops = (int64_t)s->num_prompt_lp * s->prompt_num_top;
        if (s->num_top < 0 || s->top_offset < 0 ||
            (int64_t)s->top_offset + s->num_top > h->num_top || s->num_prompt_lp < 0 ||
            s->prompt_lp_offset < 0 ||
            (int64_t)s->prompt_lp_offset + s->num_prompt_lp > h->num_prompt_lp ||
            (s->num_prompt_lp > 0 &&
             (s->prompt_num_top < 0 || s->prompt_num_top > 64 || s->prompt_top_offset < 0 ||
              s->prompt_top_offset + prompt_tops > h->num_top))) {
            snprintf(err, errlen, "step result %llu: sequence %d's top logprobs out of range",
                     (unsigned long long)h->step_id, i);
            return -1;
        }
    }
    return 0;
}

size_t folio_event_size(uint32_t num_tokens, uint32_t num_top, uint32_t num_prompt_lp,
                        uint32_t message_len)
{
    size_t entries = (size_t)num_tokens + num_prompt_lp;
    return sizeof(struct folio_event_header) + entries * 8 + entries * num_top * 8 + message_len;
}

int folio_event_decode(const void *rec, size_t len, struct folio_event_view *v, char *err,
                       size_t errlen)
{
    const struct folio_event_header *h = rec;
    if (len < sizeof *h || h->magic != FOLIO_EVENT_MAGIC) {
        snprintf(err, errlen, "token event: bad magic or short record (%zu bytes)", len);
        return -1;
    }
    if (h->num_tokens > (1u << 20) || h->num_top > 64 || h->message_len > (1u << 20) ||
        h->num_prompt_lp > (1u << 20) || h->finish_reason > FOLIO_FINISH_REJECTED ||
        folio_event_size(h->num_tokens, h->num_top, h->num_prompt_lp, h->message_len) != len) {
        snprintf(err, errlen, "token event for request %llx: counts do not match its length",
                 (unsigned long long)h->request_id);
        return -1;
    }
    const char *p = (const char *)rec + sizeof *h;
    v->hdr = h;
    v->token_ids = (const int32_t *)p;
    p += (size_t)h->num_tokens * 4;
    v->logprobs = (const float *)p;
    p += (size_t)h->num_tokens * 4;
    v->top_ids = (const int32_t *)p;
    p += (size_t)h->num_tokens * h->num_top * 4;
    v->top_logprobs = (const float *)p;
    p += (size_t)h->num_tokens * h->num_top * 4;
    v->prompt_ids = (const int32_t *)p;
    p += (size_t)h->num_prompt_lp * 4;
    v->prompt_logprobs = (const float *)p;
    p += (size_t)h->num_prompt_lp * 4;
    v->prompt_top_ids = (const int32_t *)p;
    p += (size_t)h->num_prompt_lp * h->num_top * 4;
    v->prompt_top_logprobs = (const float *)p;
    p += (size_t)h->num_prompt_lp * h->num_top * 4;
    v->message = p;
    return 0;
}
