/* Fuzzes common/ipc_records.h: arbitrary bytes as a step plan, a step result
 * and a token event. A record that decodes must keep every array the view
 * points at inside the record; the checks below read every element (through
 * an exact-size heap copy, so ASan sees any overread) the way the scheduler,
 * worker and frontend walk them. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_records.h"

#define MAX_INPUT (1 << 20)

static volatile uint64_t sink; /* keeps the reads */

static void walk_plan(const struct folio_plan_view *v)
{
    uint64_t acc = v->hdr->step_id;
    int64_t tok = 0, blk = 0;
    for (int32_t i = 0; i < v->hdr->num_seqs; i++) {
        const struct folio_plan_seq *s = &v->seqs[i];
        if (s->num_new_tokens < 0 || s->num_blocks < 0)
            abort();
        for (int32_t j = 0; j < s->num_new_tokens; j++)
            acc += (uint32_t)v->token_ids[tok + j];
        for (int32_t j = 0; j < s->num_blocks; j++)
            acc += (uint32_t)v->block_ids[blk + j];
        tok += s->num_new_tokens;
        blk += s->num_blocks;
        for (int32_t j = 0; s->grammar_new && j < s->grammar_len; j++)
            acc += (unsigned char)v->grammar_text[s->grammar_offset + j];
        for (int32_t j = 0; s->grammar_new && j < s->num_replay; j++)
            acc += (uint32_t)v->replay[s->replay_offset + j];
        for (int32_t j = 0; j < s->num_bias; j++)
            acc += (uint32_t)v->bias[s->bias_offset + j].token;
    }
    if (tok != v->hdr->num_tokens || blk != v->hdr->num_block_ids)
        abort();
    sink = acc;
}

static void walk_result(const struct folio_result_view *v)
{
    uint64_t acc = v->hdr->step_id;
    for (int32_t i = 0; i < v->hdr->num_seqs; i++) {
        const struct folio_result_seq *s = &v->seqs[i];
        acc += (uint32_t)s->token_id;
        for (int32_t j = 0; j < s->num_top; j++) {
            acc += (uint32_t)v->top_ids[s->top_offset + j];
            float lp = v->top_logprobs[s->top_offset + j];
            uint32_t bits;
            memcpy(&bits, &lp, 4);
            acc += bits;
        }
        for (int32_t j = 0; j < s->num_prompt_lp; j++)
            acc += (uint32_t)v->prompt_ids[s->prompt_lp_offset + j];
        for (int64_t j = 0; j < (int64_t)s->num_prompt_lp * s->prompt_num_top; j++)
            acc += (uint32_t)v->top_ids[s->prompt_top_offset + j];
        for (int32_t j = 0; j < s->num_draft; j++) {
            const struct folio_result_seq *d = &v->draft_rows[s->draft_offset + j];
            acc += (uint32_t)d->token_id;
            for (int32_t k = 0; k < d->num_top; k++)
                acc += (uint32_t)v->top_ids[d->top_offset + k];
        }
    }
    sink = acc;
}

static void walk_event(const struct folio_event_view *v)
{
    uint64_t acc = v->hdr->request_id;
    uint64_t n = v->hdr->num_tokens, k = v->hdr->num_top;
    for (uint64_t i = 0; i < n; i++) {
        acc += (uint32_t)v->token_ids[i];
        float lp = v->logprobs[i];
        uint32_t bits;
        memcpy(&bits, &lp, 4);
        acc += bits;
        for (uint64_t j = 0; j < k; j++) {
            acc += (uint32_t)v->top_ids[i * k + j];
            memcpy(&bits, &v->top_logprobs[i * k + j], 4);
            acc += bits;
        }
    }
    for (uint64_t i = 0; i < v->hdr->num_prompt_lp; i++) {
        acc += (uint32_t)v->prompt_ids[i];
        for (uint64_t j = 0; j < k; j++)
            acc += (uint32_t)v->prompt_top_ids[i * k + j];
    }
    for (uint32_t i = 0; i < v->hdr->message_len; i++)
        acc += (unsigned char)v->message[i];
    if (v->hdr->finish_reason > FOLIO_FINISH_REJECTED)
        abort();
    sink = acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    /* Ring records start 8-byte aligned; malloc's alignment covers that, and an
     * exact-size copy puts ASan's redzone right after the last byte. */
    void *rec = malloc(size ? size : 1);
    if (!rec)
        return 0;
    memcpy(rec, data, size);
    char err[256];

    struct folio_plan_view pv;
    err[0] = '\0';
    if (folio_plan_decode(rec, size, &pv, err, sizeof err) == 0)
        walk_plan(&pv);
    else if (!err[0])
        abort();

    struct folio_result_view rv;
    err[0] = '\0';
    if (folio_result_decode(rec, size, &rv, err, sizeof err) == 0)
        walk_result(&rv);
    else if (!err[0])
        abort();

    struct folio_event_view ev;
    err[0] = '\0';
    if (folio_event_decode(rec, size, &ev, err, sizeof err) == 0)
        walk_event(&ev);
    else if (!err[0])
        abort();

    free(rec);
    return 0;
}
