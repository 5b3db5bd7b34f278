#include "ipc_records.h"
#include "grammar_kind.h"

#include <stdio.h>
#include <stdbool.h>
#include <string.h>

/* Arrays follow their header back to back; every element is 4 or 8 bytes and
 * every header a multiple of 8, so no array is misaligned (a plan's grammar
 * text, bytes, comes last). */

size_t folio_plan_size(int32_t num_seqs, int32_t num_tokens, int32_t num_block_ids,
                       int32_t num_bias, int32_t num_replay, int32_t num_grammar_bytes)
{
    return sizeof(struct folio_plan_header) + (size_t)num_seqs * sizeof(struct folio_plan_seq) +
           (size_t)num_tokens * 4 + (size_t)num_block_ids * 4 +
           (size_t)num_bias * sizeof(struct folio_logit_bias) + (size_t)num_replay * 4 +
           (size_t)num_grammar_bytes;
}

/* A sequence's grammar fields: a known kind, its text and replay inside the plan. */
static bool plan_grammar_ok(const struct folio_plan_header *h, const struct folio_plan_seq *s)
{
    if (s->grammar_kind == -1)
        return !s->grammar_new && !s->grammar_len && !s->num_replay;
    if (s->grammar_kind < 0 || s->grammar_kind >= FOLIO_GRAMMAR_NUM_KINDS ||
        (s->grammar_new != 0 && s->grammar_new != 1))
        return false;
    if (!s->grammar_new)
        return !s->grammar_len && !s->num_replay;
    return s->grammar_len >= 0 && s->grammar_offset >= 0 && s->num_replay >= 0 &&
           s->replay_offset >= 0 &&
           (int64_t)s->grammar_offset + s->grammar_len <= h->num_grammar_bytes &&
           (int64_t)s->replay_offset + s->num_replay <= h->num_replay;
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
        h->num_replay < 0 || h->num_grammar_bytes < 0 || h->num_seqs > (1 << 20) ||
        h->num_tokens > (1 << 24) || h->num_block_ids > (1 << 24) || h->num_bias > (1 << 24) ||
        h->num_replay > (1 << 24) || h->num_grammar_bytes > (1 << 28) ||
        folio_plan_size(h->num_seqs, h->num_tokens, h->num_block_ids, h->num_bias, h->num_replay,
                        h->num_grammar_bytes) != len) {
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
    p += (size_t)h->num_bias * sizeof(struct folio_logit_bias);
    v->replay = (const int32_t *)p;
    v->grammar_text = p + (size_t)h->num_replay * 4;
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
        if (s->num_draft < 0 || s->num_draft > FOLIO_MAX_DRAFT_TOKENS ||
            (s->num_draft > 0 && (!s->sample || s->num_draft >= s->num_new_tokens))) {
            snprintf(err, errlen,
                     "step plan %llu: sequence %d has %d drafts (at most %d, fewer than its new "
                     "tokens, only where it samples)",
                     (unsigned long long)h->step_id, i, s->num_draft, FOLIO_MAX_DRAFT_TOKENS);
            return -1;
        }
        if (!plan_grammar_ok(h, s)) {
            snprintf(err, errlen,
                     "step plan %llu: sequence %d's grammar (kind %d) is unknown or lies outside "
                     "the plan",
                     (unsigned long long)h->step_id, i, s->grammar_kind);
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

size_t folio_result_size(int32_t num_rows, int32_t num_top, int32_t num_prompt_lp)
{
    return sizeof(struct folio_result_header) + (size_t)num_rows * sizeof(struct folio_result_seq) +
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
        h->num_top > (1 << 26) || h->num_prompt_lp > (1 << 24) || h->num_draft_rows < 0 ||
        h->num_draft_rows > (1 << 20) ||
        folio_result_size(h->num_seqs + h->num_draft_rows, h->num_top, h->num_prompt_lp) > len) {
        snprintf(err, errlen, "step result %llu: counts do not match its length",
                 (unsigned long long)h->step_id);
        return -1;
    }
    const char *p = (const char *)rec + sizeof *h;
    v->hdr = h;
    v->seqs = (const struct folio_result_seq *)p;
    p += (size_t)h->num_seqs * sizeof(struct folio_result_seq);
    v->draft_rows = (const struct folio_result_seq *)p;
    p += (size_t)h->num_draft_rows * sizeof(struct folio_result_seq);
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
        if (s->num_draft < 0 || s->num_draft > FOLIO_MAX_DRAFT_TOKENS || s->draft_offset < 0 ||
            (int64_t)s->draft_offset + s->num_draft > h->num_draft_rows) {
            snprintf(err, errlen, "step result %llu: sequence %d's draft rows out of range",
                     (unsigned long long)h->step_id, i);
            return -1;
        }
    }
    for (int32_t i = 0; i < h->num_draft_rows; i++) {
        const struct folio_result_seq *s = &v->draft_rows[i];
        if (s->num_top < 0 || s->top_offset < 0 ||
            (int64_t)s->top_offset + s->num_top > h->num_top) {
            snprintf(err, errlen, "step result %llu: draft row %d's top logprobs out of range",
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
