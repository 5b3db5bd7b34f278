#include "step_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_slots.h"

int folio_step_io_init(struct folio_step_io *io, int max_seqs, int max_num_tokens, char *err,
                       size_t errlen)
{
    memset(io, 0, sizeof *io);
    io->max_seqs = max_seqs;
    io->max_num_tokens = max_num_tokens;
    size_t n = (size_t)max_seqs, t = (size_t)max_num_tokens;
    size_t rows = n + FOLIO_MAX_DRAFT_ROWS; /* backend.h's result rows */
    io->res.prompt_ids = calloc(t, sizeof(int32_t));
    io->res.prompt_logprobs = calloc(t, sizeof(float));
    io->res.prompt_top_ids = calloc(t * FOLIO_MAX_LOGPROBS, sizeof(int32_t));
    io->res.prompt_top_logprobs = calloc(t * FOLIO_MAX_LOGPROBS, sizeof(float));
    io->seqs = calloc(n, sizeof *io->seqs);
    io->res.token_ids = calloc(rows, sizeof(int32_t));
    io->res.logprobs = calloc(rows, sizeof(float));
    io->res.top_ids = calloc(rows * FOLIO_MAX_LOGPROBS, sizeof(int32_t));
    io->res.top_logprobs = calloc(rows * FOLIO_MAX_LOGPROBS, sizeof(float));
    io->num_logprobs = calloc(n, sizeof(int32_t));
    io->num_draft = calloc(n, sizeof(int32_t));
    io->sampled = calloc(n, sizeof(int32_t));
    io->result_cap =
        folio_result_size(max_seqs + FOLIO_MAX_DRAFT_ROWS,
                          (max_seqs + FOLIO_MAX_DRAFT_ROWS + max_num_tokens) * FOLIO_MAX_LOGPROBS,
                          max_num_tokens) +
        1024;
    io->result_buf = calloc(1, io->result_cap);
    if (!io->seqs || !io->res.token_ids || !io->res.logprobs || !io->res.top_ids ||
        !io->res.top_logprobs || !io->num_logprobs || !io->num_draft || !io->sampled ||
        !io->result_buf || !io->res.prompt_ids || !io->res.prompt_logprobs ||
        !io->res.prompt_top_ids || !io->res.prompt_top_logprobs) {
        folio_step_io_free(io);
        snprintf(err, errlen, "worker: out of memory for steps of %d sequences", max_seqs);
        return -1;
    }
    return 0;
}

void folio_step_io_free(struct folio_step_io *io)
{
    free(io->seqs);
    free(io->res.token_ids);
    free(io->res.logprobs);
    free(io->res.top_ids);
    free(io->res.top_logprobs);
    free(io->res.prompt_ids);
    free(io->res.prompt_logprobs);
    free(io->res.prompt_top_ids);
    free(io->res.prompt_top_logprobs);
    free(io->num_logprobs);
    free(io->num_draft);
    free(io->sampled);
    free(io->result_buf);
    memset(io, 0, sizeof *io);
}

int folio_step_io_batch(struct folio_step_io *io, const struct folio_plan_view *v,
                        struct folio_grammar_step *gs, bool masks_later,
                        struct folio_step_batch *batch, char *err, size_t errlen)
{
    const struct folio_plan_header *h = v->hdr;
    if (h->num_seqs > io->max_seqs) {
        snprintf(err, errlen, "step plan %llu: %d sequences, the worker has %d slots",
                 (unsigned long long)h->step_id, h->num_seqs, io->max_seqs);
        return -1;
    }
    const int32_t *blocks = v->block_ids;
    for (int32_t i = 0; i < h->num_seqs; i++) {
        const struct folio_plan_seq *p = &v->seqs[i];
        io->seqs[i] = (struct folio_step_seq){
            .slot = p->slot,
            .num_new_tokens = p->num_new_tokens,
            .context_len = p->context_len,
            .num_blocks = p->num_blocks,
            .block_table = blocks,
            .sample = p->sample != 0,
            .output_index = p->output_index,
            .sampling = p->sampling,
            .num_bias = p->num_bias,
            .bias = p->num_bias ? v->bias + p->bias_offset : NULL, /* the decoder checked it */
            .num_prompt_logprobs = p->num_prompt_lp,
            .next_prompt_token = p->next_prompt_token,
            .num_draft = p->num_draft,
        };
        io->num_draft[i] = p->num_draft;
        io->num_logprobs[i] = p->sample ? p->sampling.num_logprobs : 0;
        blocks += p->num_blocks; /* the decoder checked the sum */
        if (p->grammar_kind >= 0 && !io->grammar) {
            snprintf(err, errlen,
                     "step plan %llu: sequence %d has a grammar, which this worker's backend "
                     "does not apply",
                     (unsigned long long)h->step_id, i);
            return -1;
        }
    }
    if (io->grammar) {
        folio_grammar_slots_bind(io->grammar, v, gs, io->seqs);
        if (!masks_later)
            folio_grammar_slots_fill(io->grammar, gs, io->seqs);
    }
    *batch = (struct folio_step_batch){.num_seqs = h->num_seqs,
                                       .num_tokens = h->num_tokens,
                                       .token_ids = v->token_ids,
                                       .seqs = io->seqs,
                                       .masks_later = io->grammar && masks_later};
    return 0;
}

void folio_step_io_fill_masks(struct folio_step_io *io, struct folio_grammar_step *gs)
{
    if (io->grammar)
        folio_grammar_slots_fill(io->grammar, gs, io->seqs);
}

void folio_step_io_commit(struct folio_step_io *io, struct folio_grammar_step *gs)
{
    if (io->grammar)
        folio_grammar_slots_commit(io->grammar, gs, io->res.token_ids);
}

/* Sequence i's prompt logprobs (entries from *entry in io->res) into the
 * record's arrays at *at and *top_at. */
static void encode_prompt_lps(const struct folio_step_io *io, int32_t i,
                              struct folio_result_seq *rs, int32_t *entry, int32_t *prompt_ids,
                              float *prompt_lps, int32_t *top_ids, float *top_lps, int32_t *top_at)
{
    const struct folio_step_seq *q = &io->seqs[i];
    int32_t n = q->num_prompt_logprobs, k = q->sampling.num_logprobs;
    rs->num_prompt_lp = n;
    rs->prompt_lp_offset = *entry;
    rs->prompt_top_offset = *top_at;
    rs->prompt_num_top = k;
    for (int32_t e = 0; e < n; e++, (*entry)++) {
        prompt_ids[*entry] = io->res.prompt_ids[*entry];
        prompt_lps[*entry] = io->res.prompt_logprobs[*entry];
        for (int32_t j = 0; j < k; j++, (*top_at)++) {
            top_ids[*top_at] = io->res.prompt_top_ids[(size_t)*entry * FOLIO_MAX_LOGPROBS + j];
            top_lps[*top_at] = io->res.prompt_top_logprobs[(size_t)*entry * FOLIO_MAX_LOGPROBS + j];
        }
    }
}

size_t folio_step_io_encode_result(struct folio_step_io *io, const struct folio_grammar_step *gs,
                                   const struct folio_plan_header *plan, int32_t num_seqs,
                                   const int32_t *num_logprobs, const int32_t *num_draft,
                                   uint64_t backend_ns)
{
    int32_t num_top = 0, num_prompt = 0, num_rows = 0;
    for (int32_t i = 0; i < num_seqs; i++) {
        int32_t d = num_draft ? num_draft[i] : 0;
        num_top += num_logprobs[i] * (1 + d) +
                   io->seqs[i].num_prompt_logprobs * io->seqs[i].sampling.num_logprobs;
        num_prompt += io->seqs[i].num_prompt_logprobs;
        num_rows += d;
    }
    struct folio_result_header *h = io->result_buf;
    *h = (struct folio_result_header){.magic = FOLIO_RESULT_MAGIC,
                                      .num_seqs = num_seqs,
                                      .num_top = num_top,
                                      .status = 0,
                                      .num_prompt_lp = num_prompt,
                                      .num_draft_rows = num_rows,
                                      .step_id = plan->step_id,
                                      .backend_ns = backend_ns,
                                      .plan_unix_ns = plan->plan_unix_ns};
    struct folio_result_seq *seqs = (struct folio_result_seq *)(h + 1);
    struct folio_result_seq *rows = seqs + num_seqs;
    int32_t *top_ids = (int32_t *)(rows + num_rows);
    float *top_lps = (float *)(top_ids + num_top);
    int32_t *prompt_ids = (int32_t *)(top_lps + num_top);
    float *prompt_lps = (float *)(prompt_ids + num_prompt);
    int32_t off = 0, entry = 0, row = 0;
    for (int32_t i = 0; i < num_seqs; i++) {
        seqs[i] =
            (struct folio_result_seq){.token_id = io->res.token_ids[i],
                                      .logprob = io->res.logprobs[i],
                                      .num_top = num_logprobs[i],
                                      .top_offset = off,
                                      .grammar_failed = gs && folio_grammar_step_failed(gs, i)};
        for (int32_t k = 0; k < num_logprobs[i]; k++, off++) {
            top_ids[off] = io->res.top_ids[(size_t)i * FOLIO_MAX_LOGPROBS + k];
            top_lps[off] = io->res.top_logprobs[(size_t)i * FOLIO_MAX_LOGPROBS + k];
        }
        encode_prompt_lps(io, i, &seqs[i], &entry, prompt_ids, prompt_lps, top_ids, top_lps, &off);
        seqs[i].num_draft = num_draft ? num_draft[i] : 0;
        seqs[i].draft_offset = row;
        for (int32_t j = 0; j < seqs[i].num_draft; j++, row++) {
            size_t r = (size_t)num_seqs + (size_t)row; /* its row in io->res (backend.h) */
            rows[row] = (struct folio_result_seq){.token_id = io->res.token_ids[r],
                                                  .logprob = io->res.logprobs[r],
                                                  .num_top = num_logprobs[i],
                                                  .top_offset = off};
            for (int32_t k = 0; k < num_logprobs[i]; k++, off++) {
                top_ids[off] = io->res.top_ids[r * FOLIO_MAX_LOGPROBS + k];
                top_lps[off] = io->res.top_logprobs[r * FOLIO_MAX_LOGPROBS + k];
            }
        }
    }
    return folio_result_size(num_seqs + num_rows, num_top, num_prompt);
}

size_t folio_step_io_encode_failure(struct folio_step_io *io, uint64_t step_id,
                                    uint64_t plan_unix_ns, const char *message)
{
    struct folio_result_header *h = io->result_buf;
    *h = (struct folio_result_header){.magic = FOLIO_RESULT_MAGIC,
                                      .status = -1,
                                      .step_id = step_id,
                                      .plan_unix_ns = plan_unix_ns};
    size_t room = io->result_cap - sizeof *h - 1;
    size_t n = strlen(message);
    if (n > room)
        n = room;
    memcpy(h + 1, message, n);
    return sizeof *h + n;
}
