/* The policy's step results (sampled tokens, prompt logprobs, finishes), the loss of the worker
 * that would have sent them, and its introspection (stats, invariant check). */
#include "policy.h"
#include "policy_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block_manager.h"
#include "log.h"
#include "seq_options.h"

/* ---- results ------------------------------------------------------------ */

static bool seq_push_token(struct seq *s, int32_t tok)
{
    if (s->num_tokens == s->cap_tokens) {
        int cap = s->cap_tokens * 2;
        int32_t *t = realloc(s->tokens, (size_t)cap * sizeof *t);
        if (!t)
            return false;
        s->tokens = t;
        s->cap_tokens = cap;
    }
    s->tokens[s->num_tokens++] = tok;
    return true;
}

/* A token the worker sampled for a live sequence (its row r of the result): keep it, check the
 * stop conditions, send it to the frontend. False when that ended the sequence (s may be freed). */
static bool seq_take_token(struct folio_policy *p, struct seq *s, const struct folio_result_view *v,
                           const struct folio_result_seq *r)
{
    if (r->grammar_failed) {
        const char *msg = "structured output: the grammar could not go on past this point (its "
                          "mask exceeded the engine's limits, or it refused a token)";
        folio_log_error(s->request_id, "%s, in step %llu", msg,
                        (unsigned long long)v->hdr->step_id);
        policy_emit_simple(p, s, s->request_id, s->frontend_id, FOLIO_FINISH_ERROR, 500, 0, msg);
        policy_seq_finish(p, s);
        return false;
    }
    if (r->token_id < 0 || r->token_id >= p->cfg.vocab_size || !seq_push_token(s, r->token_id)) {
        char msg[128];
        snprintf(msg, sizeof msg, "the worker returned token id %d (vocabulary %d) in step %llu",
                 r->token_id, p->cfg.vocab_size, (unsigned long long)v->hdr->step_id);
        folio_log_error(s->request_id, "%s", msg);
        policy_emit_simple(p, s, s->request_id, s->frontend_id, FOLIO_FINISH_ERROR, 500, 0, msg);
        policy_seq_finish(p, s);
        return false;
    }
    p->st.generation_tokens_total++;
    if (s->state == SEQ_WAITING)
        p->pending_prompt_tokens++; /* preempted: one more token to re-prefill */
    int generated = s->num_tokens - s->num_prompt;
    enum folio_finish_reason finish = FOLIO_FINISH_NONE;
    if (generated >= s->opt.min_tokens &&
        folio_seq_options_is_stop(&s->opt, p->cfg.eos_ids, p->cfg.num_eos_ids, r->token_id))
        finish = FOLIO_FINISH_STOP;
    else if (generated >= s->max_outputs)
        finish = FOLIO_FINISH_LENGTH;

    int num_top = s->sampling.num_logprobs;
    for (int k = 0; k < num_top; k++) {
        bool have = k < r->num_top;
        p->ev_top_ids[k] = have ? v->top_ids[r->top_offset + k] : -1;
        p->ev_top_lps[k] = have ? v->top_logprobs[r->top_offset + k] : -1e30f;
    }
    struct folio_token_event ev = {
        .request_id = s->request_id,
        .frontend_id = s->frontend_id,
        .num_tokens = 1,
        .token_ids = &r->token_id,
        .logprobs = &r->logprob,
        .num_top = num_top,
        .top_ids = p->ev_top_ids,
        .top_logprobs = p->ev_top_lps,
        .finish = finish,
        .prompt_tokens = (uint32_t)s->num_prompt,
        .completion_tokens = (uint32_t)generated,
        .cached_tokens = (uint32_t)s->cached_tokens,
    };
    p->emit(p->emit_ctx, &ev);
    if (finish != FOLIO_FINISH_NONE) {
        policy_seq_finish(p, s);
        return false;
    }
    policy_seq_cache_full_blocks(p, s);
    return true;
}

/* A verify step's samples (e: s's entry with its drafts): the drafts up to the first whose
 * sample differs, and that sample (or all and the one after them), taken one by one as plain
 * decode steps would have, so stop conditions cut them exactly there; the rest is undone
 * (outputs, computed positions, the blocks they needed). */
static void seq_take_verified(struct folio_policy *p, struct seq *s,
                              const struct folio_result_view *v, int i, const struct step_entry *e)
{
    const struct folio_result_seq *r = &v->seqs[i];
    int d = e->num_draft;
    if (r->num_draft != d) {
        char msg[128];
        snprintf(msg, sizeof msg, "the worker returned %d draft samples for %d drafts in step %llu",
                 r->num_draft, d, (unsigned long long)v->hdr->step_id);
        folio_log_error(s->request_id, "%s", msg);
        policy_emit_simple(p, s, s->request_id, s->frontend_id, FOLIO_FINISH_ERROR, 500, 0, msg);
        policy_seq_finish(p, s);
        return;
    }
    const struct folio_result_seq *rows[FOLIO_MAX_DRAFT_TOKENS + 1];
    int32_t sampled[FOLIO_MAX_DRAFT_TOKENS + 1];
    rows[0] = r;
    for (int j = 1; j <= d; j++)
        rows[j] = &v->draft_rows[r->draft_offset + j - 1];
    for (int j = 0; j <= d; j++)
        sampled[j] = rows[j]->token_id;
    int matched = policy_spec_matched(e, sampled);
    policy_spec_observe(p, s, d, matched);
    bool running = s->state == SEQ_RUNNING;
    s->num_outputs -= 1 + d;
    if (running)
        s->num_computed -= 1 + d;
    for (int j = 0; j <= matched; j++) {
        s->num_outputs++;
        if (running)
            s->num_computed++;
        if (!seq_take_token(p, s, v, rows[j])) {
            p->st.tokens_discarded += (uint64_t)(matched - j);
            return;
        }
    }
    if (running)
        policy_seq_trim_blocks(p, s, s->num_computed + 1);
}

/* The prompt logprobs a chunk starting at `start` brought: those not sent
 * yet (a recompute after preemption brings them again) go to the frontend. */
static void seq_take_prompt_lps(struct folio_policy *p, struct seq *s,
                                const struct folio_result_view *v, int i, int start)
{
    const struct folio_result_seq *r = &v->seqs[i];
    /* entry e is the logprob of the token at position start + e + 1 */
    int from = s->opt.prompt_lp_sent - start, n = r->num_prompt_lp;
    if (from < 0)
        from = 0;
    while (from < n) {
        int k = n - from < PROMPT_LP_PER_EVENT ? n - from : PROMPT_LP_PER_EVENT;
        size_t e = (size_t)r->prompt_lp_offset + (size_t)from;
        size_t top = (size_t)r->prompt_top_offset + (size_t)from * (size_t)r->prompt_num_top;
        struct folio_token_event ev = {
            .request_id = s->request_id,
            .frontend_id = s->frontend_id,
            .num_top = r->prompt_num_top,
            .prompt_tokens = (uint32_t)s->num_prompt,
            .completion_tokens = (uint32_t)(s->num_tokens - s->num_prompt),
            .cached_tokens = (uint32_t)s->cached_tokens,
            .num_prompt_lp = k,
            .prompt_ids = v->prompt_ids + e,
            .prompt_logprobs = v->prompt_logprobs + e,
            .prompt_top_ids = v->top_ids + top,
            .prompt_top_logprobs = v->top_logprobs + top,
        };
        p->emit(p->emit_ctx, &ev);
        from += k;
        s->opt.prompt_lp_sent = start + from;
    }
}

int folio_policy_apply_result(struct folio_policy *p, const struct folio_result_view *v, char *err,
                              size_t errlen)
{
    struct inflight_step *st = &p->inflight[p->inflight_head];
    if (p->num_inflight == 0 || v->hdr->step_id != st->step_id ||
        v->hdr->num_seqs != st->num_entries) {
        snprintf(err, errlen,
                 "step result %llu with %d sequences does not match the oldest step in flight "
                 "(%llu with %d)",
                 (unsigned long long)v->hdr->step_id, v->hdr->num_seqs,
                 (unsigned long long)(p->num_inflight ? st->step_id : 0),
                 p->num_inflight ? st->num_entries : 0);
        return -1;
    }
    p->inflight_head = (p->inflight_head + 1) % FOLIO_POLICY_MAX_INFLIGHT;
    p->num_inflight--;
    p->num_verifying -= st->verifies;
    if (v->hdr->backend_ns > 0) {
        p->speed_tokens = p->speed_tokens / 2 + st->num_tokens;
        p->speed_seconds = p->speed_seconds / 2 + (double)v->hdr->backend_ns * 1e-9;
    }
    for (int i = 0; i < st->num_entries; i++) {
        struct seq *s = st->entries[i].seq;
        s->inflight--;
        if (s->state == SEQ_FINISHED) {
            /* Sampled one step past its stop, or aborted: never sent. */
            if (st->entries[i].sample)
                p->st.tokens_discarded += 1 + (uint64_t)st->entries[i].num_draft;
            if (s->inflight == 0)
                policy_seq_free(p, s);
            continue;
        }
        seq_take_prompt_lps(p, s, v, i, st->entries[i].start);
        if (st->entries[i].sample && s->state != SEQ_FINISHED) {
            if (st->entries[i].num_draft > 0)
                seq_take_verified(p, s, v, i, &st->entries[i]);
            else
                seq_take_token(p, s, v, &v->seqs[i]);
        }
    }
    return 0;
}

void folio_policy_fail_all(struct folio_policy *p, uint32_t status, const char *message)
{
    while (p->all_head) {
        struct seq *s = p->all_head;
        if (s->state != SEQ_FINISHED) {
            policy_emit_simple(p, s, s->request_id, s->frontend_id, FOLIO_FINISH_ERROR, status, 0,
                               message);
            p->st.requests_finished++;
        }
        policy_seq_free(p, s);
    }
    p->num_waiting = p->waiting_head = 0;
    p->pending_prompt_tokens = 0;
    p->num_running = 0;
    p->num_inflight = p->inflight_head = p->num_verifying = 0;
    p->num_free_slots = 0;
    for (int i = p->cfg.max_num_seqs - 1; i >= 0; i--)
        p->free_slots[p->num_free_slots++] = i;
    folio_bm_reset(p->bm);
}

/* ---- introspection ------------------------------------------------------ */

bool folio_policy_idle(const struct folio_policy *p)
{
    return p->all_head == NULL && p->num_inflight == 0;
}

int folio_policy_inflight(const struct folio_policy *p)
{
    return p->num_inflight;
}

void folio_policy_stats(const struct folio_policy *p, struct folio_policy_stats *s)
{
    *s = p->st;
    struct folio_block_stats b;
    folio_bm_stats(p->bm, &b);
    s->num_waiting = p->num_waiting;
    s->num_running = p->num_running;
    s->kv_blocks_total = b.num_blocks;
    s->kv_blocks_used = b.num_blocks - b.num_free;
    s->inflight_steps = p->num_inflight;
    s->pending_prompt_tokens = p->pending_prompt_tokens;
}

void folio_policy_continue_stats(struct folio_policy *p, const struct folio_policy_stats *st)
{
    p->st = *st; /* folio_policy_stats fills the gauges from the live state */
}

int folio_policy_check(const struct folio_policy *p, char *err, size_t errlen)
{
    struct folio_block_stats b;
    folio_bm_stats(p->bm, &b);
    int *refs = calloc((size_t)b.num_blocks, sizeof *refs);
    bool *slot_used = calloc((size_t)p->cfg.max_num_seqs, sizeof *slot_used);
    int rc = -1;
    if (!refs || !slot_used) {
        snprintf(err, errlen, "check: out of memory");
        goto out;
    }
    int64_t pending = 0;
    int live_running = 0, live_waiting = 0;
    for (const struct seq *s = p->all_head; s; s = s->all_next) {
        for (int i = 0; i < s->num_blocks; i++)
            refs[s->blocks[i]]++;
        if (s->slot >= 0) {
            if (slot_used[s->slot]) {
                snprintf(err, errlen, "check: slot %d held twice", s->slot);
                goto out;
            }
            slot_used[s->slot] = true;
        }
        if (s->state == SEQ_WAITING) {
            live_waiting++;
            pending += policy_seq_pending_prompt(s);
            if (s->num_blocks || s->slot >= 0) {
                snprintf(err, errlen, "check: waiting request %llx holds blocks or a slot",
                         (unsigned long long)s->request_id);
                goto out;
            }
        } else if (s->state == SEQ_RUNNING) {
            live_running++;
            if (s->slot < 0 || s->num_blocks < policy_ceil_blocks(s->num_computed)) {
                snprintf(err, errlen, "check: running request %llx lacks a slot or blocks",
                         (unsigned long long)s->request_id);
                goto out;
            }
        } else if (s->inflight == 0) {
            snprintf(err, errlen, "check: finished request %llx was not freed",
                     (unsigned long long)s->request_id);
            goto out;
        }
    }
    int num_free = 0;
    for (int i = 0; i < b.num_blocks; i++) {
        if (refs[i] != folio_bm_refcount(p->bm, i)) {
            snprintf(err, errlen, "check: block %d has %d references, sequences hold %d", i,
                     folio_bm_refcount(p->bm, i), refs[i]);
            goto out;
        }
        num_free += refs[i] == 0;
    }
    int slots_held = 0;
    for (int i = 0; i < p->cfg.max_num_seqs; i++)
        slots_held += slot_used[i];
    if (num_free != b.num_free || live_running != p->num_running ||
        live_waiting != p->num_waiting || pending != p->pending_prompt_tokens ||
        slots_held + p->num_free_slots != p->cfg.max_num_seqs) {
        snprintf(err, errlen,
                 "check: counts disagree (free blocks %d/%d, running %d/%d, waiting %d/%d, "
                 "pending %lld/%lld, slots %d+%d)",
                 num_free, b.num_free, live_running, p->num_running, live_waiting, p->num_waiting,
                 (long long)pending, (long long)p->pending_prompt_tokens, slots_held,
                 p->num_free_slots);
        goto out;
    }
    rc = 0;
out:
    free(refs);
    free(slot_used);
    return rc;
}

int folio_policy_max_model_len(const struct folio_policy *p)
{
    return p->cfg.max_model_len;
}

void folio_policy_worker_lost(struct folio_policy *p, uint32_t status, const char *message)
{
    p->num_inflight = p->inflight_head = p->num_verifying = 0; /* their results never come */
    struct seq *next;
    for (struct seq *s = p->all_head; s; s = next) {
        next = s->all_next;
        bool ran = s->state == SEQ_RUNNING || s->inflight > 0;
        s->inflight = 0;
        s->num_outputs = s->num_tokens - s->num_prompt; /* those the frontend has */
        bool sent = s->num_outputs > 0 || s->opt.prompt_lp_sent > 0;
        if (s->state == SEQ_FINISHED) {
            policy_seq_free(p, s);
        } else if (sent || (ran && s->requeued)) {
            policy_emit_simple(p, s, s->request_id, s->frontend_id, FOLIO_FINISH_ERROR, status, 0,
                               message);
            policy_seq_finish(p, s);
        } else if (ran) {
            s->requeued = true;
        }
    }
    /* Newest first to the front: they keep their order, ahead of those that
     * were waiting. */
    while (p->num_running > 0) {
        struct seq *s = p->running[--p->num_running];
        policy_seq_release_blocks(p, s);
        s->slot = -1;
        s->opt.grammar_sent = false;
        s->num_computed = 0;
        s->state = SEQ_WAITING;
        policy_waiting_push_front(p, s);
        p->pending_prompt_tokens += policy_seq_pending_prompt(s);
    }
    folio_bm_reset(p->bm);
    p->num_free_slots = 0;
    for (int i = p->cfg.max_num_seqs - 1; i >= 0; i--)
        p->free_slots[p->num_free_slots++] = i;
}
