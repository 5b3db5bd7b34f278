#include "policy.h"
#include "policy_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block_manager.h"
#include "log.h"
#include "rng.h"
#include "seq_options.h"

/* ---- small helpers ------------------------------------------------------ */

static size_t map_index(const struct folio_policy *p, uint64_t id)
{
    return folio_splitmix64(id) & p->map_mask;
}

static struct seq *map_find(const struct folio_policy *p, uint64_t id)
{
    for (struct seq *s = p->map[map_index(p, id)]; s; s = s->hnext)
        if (s->request_id == id)
            return s;
    return NULL;
}

static void map_remove(struct folio_policy *p, struct seq *s)
{
    struct seq **pp = &p->map[map_index(p, s->request_id)];
    while (*pp != s)
        pp = &(*pp)->hnext;
    *pp = s->hnext;
}

static struct seq *waiting_at(const struct folio_policy *p, int i)
{
    return p->waiting[(p->waiting_head + i) % p->waiting_cap];
}

static void waiting_push_back(struct folio_policy *p, struct seq *s)
{
    p->waiting[(p->waiting_head + p->num_waiting) % p->waiting_cap] = s;
    p->num_waiting++;
}

void policy_waiting_push_front(struct folio_policy *p, struct seq *s)
{
    p->waiting_head = (p->waiting_head + p->waiting_cap - 1) % p->waiting_cap;
    p->waiting[p->waiting_head] = s;
    p->num_waiting++;
}

static void waiting_remove(struct folio_policy *p, struct seq *s)
{
    int i = 0;
    while (i < p->num_waiting && waiting_at(p, i) != s)
        i++;
    if (i == p->num_waiting)
        return;
    for (; i + 1 < p->num_waiting; i++)
        p->waiting[(p->waiting_head + i) % p->waiting_cap] = waiting_at(p, i + 1);
    p->num_waiting--;
}

static void running_remove(struct folio_policy *p, struct seq *s)
{
    for (int i = 0; i < p->num_running; i++) {
        if (p->running[i] == s) {
            memmove(&p->running[i], &p->running[i + 1],
                    (size_t)(p->num_running - i - 1) * sizeof *p->running);
            p->num_running--;
            return;
        }
    }
}

int policy_seq_pending_prompt(const struct seq *s)
{
    return s->num_tokens; /* what admission will have to prefill (recompute included) */
}

void policy_seq_release_blocks(struct folio_policy *p, struct seq *s)
{
    /* Last block first: a sequence's tail is the least likely prefix of
     * another request, so it should be evicted before its head. */
    for (int i = s->num_blocks - 1; i >= 0; i--)
        folio_bm_release(p->bm, s->blocks[i]);
    s->num_blocks = 0;
    s->num_hashed = 0;
    s->last_hash = 0;
}

static void seq_release_slot(struct folio_policy *p, struct seq *s)
{
    if (s->slot >= 0)
        p->free_slots[p->num_free_slots++] = s->slot;
    s->slot = -1;
    s->opt.grammar_sent = false; /* its next slot's matcher is made anew */
}

void policy_seq_free(struct folio_policy *p, struct seq *s)
{
    policy_seq_release_blocks(p, s);
    seq_release_slot(p, s);
    map_remove(p, s);
    if (s->all_prev)
        s->all_prev->all_next = s->all_next;
    else
        p->all_head = s->all_next;
    if (s->all_next)
        s->all_next->all_prev = s->all_prev;
    free(s->tokens);
    free(s->blocks);
    folio_seq_options_free(&s->opt);
    free(s);
}

static void observe_queue_time(struct folio_policy *p, double seconds)
{
    int i = 0;
    while (i < FOLIO_QUEUE_TIME_BUCKETS && seconds > folio_queue_time_bounds[i])
        i++;
    p->st.queue_time_counts[i]++;
    p->st.queue_time_sum += seconds;
}

/* Registers the sequence's full blocks whose tokens are all known and whose
 * KV is written or being written by a planned step. */
static void seq_cache_blocks_upto(struct folio_policy *p, struct seq *s, int computed)
{
    int limit = computed < s->num_tokens ? computed : s->num_tokens;
    int full = limit / FOLIO_KV_BLOCK_SIZE;
    if (full > s->num_blocks)
        full = s->num_blocks;
    for (; s->num_hashed < full; s->num_hashed++) {
        const int32_t *t = s->tokens + (size_t)s->num_hashed * FOLIO_KV_BLOCK_SIZE;
        uint64_t h = folio_bm_hash(s->last_hash, t);
        folio_bm_register(p->bm, s->blocks[s->num_hashed], h, s->last_hash, t);
        s->last_hash = h;
    }
}

void policy_seq_cache_full_blocks(struct folio_policy *p, struct seq *s)
{
    seq_cache_blocks_upto(p, s, s->num_computed);
}

void policy_seq_trim_blocks(struct folio_policy *p, struct seq *s, int tokens)
{
    int keep = policy_ceil_blocks(tokens);
    while (s->num_blocks > keep && s->num_blocks > s->num_hashed)
        folio_bm_release(p->bm, s->blocks[--s->num_blocks]);
}

/* Grows the block table to cover `tokens` tokens; false when the pool is dry
 * (the blocks taken so far stay with the sequence). */
static bool seq_grow_blocks(struct folio_policy *p, struct seq *s, int tokens)
{
    int need = policy_ceil_blocks(tokens);
    while (s->num_blocks < need) {
        int b = folio_bm_alloc(p->bm);
        if (b < 0)
            return false;
        s->blocks[s->num_blocks++] = b;
    }
    return true;
}

/* ---- events ------------------------------------------------------------- */

void policy_emit_simple(struct folio_policy *p, const struct seq *s, uint64_t request_id,
                        uint32_t frontend_id, enum folio_finish_reason finish, uint32_t status,
                        uint32_t retry_after_s, const char *message)
{
    struct folio_token_event ev = {
        .request_id = request_id,
        .frontend_id = frontend_id,
        .finish = finish,
        .status = status,
        .retry_after_s = retry_after_s,
        .message = message,
    };
    if (s) {
        ev.prompt_tokens = (uint32_t)s->num_prompt;
        ev.completion_tokens = (uint32_t)(s->num_tokens - s->num_prompt);
        ev.cached_tokens = (uint32_t)s->cached_tokens;
    }
    p->emit(p->emit_ctx, &ev);
}

/* ---- creation ----------------------------------------------------------- */

int folio_policy_create(const struct folio_policy_config *cfg, folio_emit_fn emit, void *emit_ctx,
                        struct folio_policy **out, char *err, size_t errlen)
{
    if (cfg->max_num_seqs <= 0 || cfg->num_kv_blocks <= 0 || cfg->max_model_len <= 1 ||
        cfg->max_waiting_requests <= 0 || cfg->vocab_size <= 0) {
        snprintf(err, errlen,
                 "scheduler: max-num-seqs, num-kv-blocks, max-waiting-requests, vocab size must "
                 "be positive and the model length above 1");
        return -1;
    }
    if (cfg->max_num_batched_tokens < cfg->max_num_seqs) {
        /* Every running sequence gets its decode token each step. */
        snprintf(err, errlen,
                 "scheduler: --max-num-batched-tokens (%d) must be at least --max-num-seqs (%d)",
                 cfg->max_num_batched_tokens, cfg->max_num_seqs);
        return -1;
    }
    if (cfg->disable_chunked_prefill && cfg->max_num_batched_tokens < cfg->max_model_len) {
        snprintf(err, errlen,
                 "scheduler: without chunked prefill --max-num-batched-tokens (%d) must hold the "
                 "model length (%d)",
                 cfg->max_num_batched_tokens, cfg->max_model_len);
        return -1;
    }
    struct folio_policy *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "scheduler: out of memory");
        return -1;
    }
    p->cfg = *cfg;
    /* A sequence longer than the pool could never run, even alone. */
    if (p->cfg.max_model_len > cfg->num_kv_blocks * FOLIO_KV_BLOCK_SIZE)
        p->cfg.max_model_len = cfg->num_kv_blocks * FOLIO_KV_BLOCK_SIZE;
    p->emit = emit;
    p->emit_ctx = emit_ctx;
    p->bm = folio_bm_create(cfg->num_kv_blocks);
    size_t map_cap = 64;
    while (map_cap < (size_t)(cfg->max_waiting_requests + cfg->max_num_seqs) * 2)
        map_cap <<= 1;
    p->map = calloc(map_cap, sizeof *p->map);
    p->map_mask = map_cap - 1;
    /* Preempted sequences return to waiting beyond the admission limit. */
    p->waiting_cap = cfg->max_waiting_requests + cfg->max_num_seqs + 1;
    p->waiting = calloc((size_t)p->waiting_cap, sizeof *p->waiting);
    p->running = calloc((size_t)cfg->max_num_seqs, sizeof *p->running);
    p->free_slots = calloc((size_t)cfg->max_num_seqs, sizeof *p->free_slots);
    for (int i = 0; i < FOLIO_POLICY_MAX_INFLIGHT; i++)
        p->inflight[i].entries = calloc((size_t)cfg->max_num_seqs, sizeof(struct step_entry));
    p->scratch = calloc((size_t)cfg->max_num_seqs, sizeof *p->scratch);
    p->max_blocks_per_seq = policy_ceil_blocks(p->cfg.max_model_len);
    p->scratch_blocks = calloc((size_t)p->max_blocks_per_seq, sizeof *p->scratch_blocks);
    p->plan_cap = folio_policy_max_plan_bytes(p);
    p->plan_buf = malloc(p->plan_cap);
    p->ev_top_ids = calloc(FOLIO_MAX_LOGPROBS, sizeof(int32_t));
    p->ev_top_lps = calloc(FOLIO_MAX_LOGPROBS, sizeof(float));
    bool ok = p->bm && p->map && p->waiting && p->running && p->free_slots && p->scratch &&
              p->plan_buf && p->ev_top_ids && p->ev_top_lps;
    for (int i = 0; i < FOLIO_POLICY_MAX_INFLIGHT; i++)
        ok = ok && p->inflight[i].entries;
    if (!ok) {
        folio_policy_destroy(p);
        snprintf(err, errlen, "scheduler: out of memory");
        return -1;
    }
    /* Slot 0 is handed out first. */
    for (int i = cfg->max_num_seqs - 1; i >= 0; i--)
        p->free_slots[p->num_free_slots++] = i;
    p->seed_counter = cfg->seed;
    p->next_step_id = 1;
    *out = p;
    return 0;
}

void folio_policy_destroy(struct folio_policy *p)
{
    if (!p)
        return;
    while (p->all_head)
        policy_seq_free(p, p->all_head);
    folio_bm_destroy(p->bm);
    free(p->map);
    free(p->waiting);
    free(p->running);
    free(p->free_slots);
    for (int i = 0; i < FOLIO_POLICY_MAX_INFLIGHT; i++)
        free(p->inflight[i].entries);
    free(p->scratch);
    free(p->scratch_blocks);
    free(p->plan_buf);
    free(p->ev_top_ids);
    free(p->ev_top_lps);
    free(p);
}

size_t folio_policy_max_plan_bytes(const struct folio_policy *p)
{
    int per_seq = p->max_blocks_per_seq;
    if (per_seq > p->cfg.num_kv_blocks)
        per_seq = p->cfg.num_kv_blocks;
    /* A plan brings grammars while they fit one request's largest (grammar_room). */
    return folio_plan_size(p->cfg.max_num_seqs, p->cfg.max_num_batched_tokens,
                           p->cfg.max_num_seqs * per_seq,
                           p->cfg.max_num_seqs * folio_seq_options_max_bias(p->cfg.num_eos_ids),
                           p->cfg.max_model_len, FOLIO_MAX_GRAMMAR_BYTES);
}

/* ---- submit / abort ----------------------------------------------------- */

/* 0, or -1 with what makes the request invalid on its own (a 400). */
static int request_invalid(const struct folio_policy *p, const struct folio_request *r, char *msg,
                           size_t len)
{
    int room = p->cfg.max_model_len - 1;
    if (r->num_prompt <= 0 || r->num_prompt > room) {
        snprintf(msg, len,
                 r->num_prompt <= 0
                     ? "the prompt is empty"
                     : "the prompt has %d tokens; this model takes at most %d (with room for "
                       "one generated token)",
                 r->num_prompt, room);
        return -1;
    }
    if (r->params.max_tokens > 0 &&
        (int64_t)r->num_prompt + r->params.max_tokens > p->cfg.max_model_len) {
        /* It could never finish: its KV would outgrow the pool (or the model). */
        snprintf(msg, len,
                 "This model's maximum context length is %d tokens. However, you requested %lld "
                 "tokens (%d in the prompt, %d for the completion). Please reduce the length of "
                 "the prompt or completion.",
                 p->cfg.max_model_len, (long long)r->num_prompt + r->params.max_tokens,
                 r->num_prompt, r->params.max_tokens);
        return -1;
    }
    for (int i = 0; i < r->num_prompt; i++) {
        if (r->prompt[i] < 0 || r->prompt[i] >= p->cfg.vocab_size) {
            snprintf(msg, len, "prompt token %d is id %d, outside the vocabulary [0, %d)", i,
                     r->prompt[i], p->cfg.vocab_size);
            return -1;
        }
    }
    return folio_seq_options_check(r, p->cfg.vocab_size, msg, len);
}

void folio_policy_submit(struct folio_policy *p, const struct folio_request *r)
{
    char msg[256];
    if (request_invalid(p, r, msg, sizeof msg) != 0) {
        p->st.requests_rejected++;
        policy_emit_simple(p, NULL, r->request_id, r->frontend_id, FOLIO_FINISH_REJECTED, 400, 0,
                           msg);
        return;
    }
    if (map_find(p, r->request_id)) {
        snprintf(msg, sizeof msg, "request id %016llx is already in use",
                 (unsigned long long)r->request_id);
        p->st.requests_rejected++;
        policy_emit_simple(p, NULL, r->request_id, r->frontend_id, FOLIO_FINISH_REJECTED, 409, 0,
                           msg);
        return;
    }
    if (p->num_waiting >= p->cfg.max_waiting_requests ||
        p->pending_prompt_tokens + r->num_prompt > p->cfg.max_pending_prompt_tokens) {
        snprintf(msg, sizeof msg,
                 "the server is busy: %d requests and %lld prompt tokens are waiting",
                 p->num_waiting, (long long)p->pending_prompt_tokens);
        p->st.requests_rejected++;
        /* A rough wait: one second per budget's worth of queued prompt tokens. */
        uint32_t retry = 1 + (uint32_t)(p->pending_prompt_tokens /
                                        ((int64_t)p->cfg.max_num_batched_tokens * 50));
        policy_emit_simple(p, NULL, r->request_id, r->frontend_id, FOLIO_FINISH_REJECTED, 429,
                           retry, msg);
        return;
    }
    struct seq *s = calloc(1, sizeof *s);
    int cap = r->num_prompt + 16;
    if (s) {
        s->submitted_at = p->cfg.clock ? p->cfg.clock() : 0;
        s->tokens = malloc((size_t)cap * sizeof *s->tokens);
        s->cap_blocks = p->max_blocks_per_seq;
        s->blocks = malloc((size_t)s->cap_blocks * sizeof *s->blocks);
    }
    if (!s || !s->tokens || !s->blocks || !folio_seq_options_init(&s->opt, r)) {
        if (s) {
            free(s->tokens);
            free(s->blocks);
            folio_seq_options_free(&s->opt);
        }
        free(s);
        p->st.requests_rejected++;
        policy_emit_simple(p, NULL, r->request_id, r->frontend_id, FOLIO_FINISH_REJECTED, 503, 1,
                           "the scheduler is out of memory");
        return;
    }
    s->request_id = r->request_id;
    s->frontend_id = r->frontend_id;
    s->state = SEQ_WAITING;
    memcpy(s->tokens, r->prompt, (size_t)r->num_prompt * sizeof *s->tokens);
    s->num_tokens = s->num_prompt = r->num_prompt;
    s->cap_tokens = cap;
    s->max_outputs = p->cfg.max_model_len - r->num_prompt;
    if (r->params.max_tokens > 0 && r->params.max_tokens < s->max_outputs)
        s->max_outputs = r->params.max_tokens;
    s->slot = -1;
    s->entry = -1;
    s->sampling = r->params.sampling;
    if (!r->params.has_seed)
        s->sampling.seed = folio_splitmix64(p->seed_counter++);
    if (s->sampling.num_logprobs > FOLIO_MAX_LOGPROBS)
        s->sampling.num_logprobs = FOLIO_MAX_LOGPROBS;
    if (s->sampling.num_logprobs < 0)
        s->sampling.num_logprobs = 0;
    if (!(s->sampling.repetition_penalty > 0))
        s->sampling.repetition_penalty = 1; /* unset (0) means off, as in Submit */
    policy_spec_init_seq(p, s);
    size_t h = map_index(p, s->request_id);
    s->hnext = p->map[h];
    p->map[h] = s;
    s->all_next = p->all_head;
    if (p->all_head)
        p->all_head->all_prev = s;
    p->all_head = s;
    waiting_push_back(p, s);
    p->pending_prompt_tokens += policy_seq_pending_prompt(s);
    p->st.prompt_tokens_total += (uint64_t)r->num_prompt;
}

/* Ends a live sequence: out of the queues now; its blocks and slot go back
 * now when no step in flight uses it, else when the last such step returns. */
void policy_seq_finish(struct folio_policy *p, struct seq *s)
{
    if (s->state == SEQ_WAITING) {
        waiting_remove(p, s);
        p->pending_prompt_tokens -= policy_seq_pending_prompt(s);
    } else if (s->state == SEQ_RUNNING) {
        running_remove(p, s);
    }
    s->state = SEQ_FINISHED;
    p->st.requests_finished++;
    if (s->inflight == 0)
        policy_seq_free(p, s);
}

void folio_policy_abort(struct folio_policy *p, uint64_t request_id)
{
    struct seq *s = map_find(p, request_id);
    if (!s || s->state == SEQ_FINISHED)
        return;
    p->st.requests_aborted++;
    policy_emit_simple(p, s, s->request_id, s->frontend_id, FOLIO_FINISH_ABORT, 0, 0, NULL);
    policy_seq_finish(p, s);
}

void folio_policy_drop_frontend(struct folio_policy *p, uint32_t frontend_id)
{
    struct seq *s = p->all_head;
    while (s) {
        struct seq *next = s->all_next;
        if (s->frontend_id == frontend_id && s->state != SEQ_FINISHED) {
            p->st.requests_aborted++;
            policy_seq_finish(p, s);
        }
        s = next;
    }
}

/* ---- planning ----------------------------------------------------------- */

static void preempt(struct folio_policy *p, struct seq *s)
{
    running_remove(p, s);
    policy_seq_release_blocks(p, s);
    seq_release_slot(p, s);
    s->num_computed = 0;
    s->state = SEQ_WAITING;
    policy_waiting_push_front(p, s);
    p->pending_prompt_tokens += policy_seq_pending_prompt(s);
    p->st.num_preemptions++;
    p->preempted_this_step = true;
    folio_log_debug(s->request_id, "preempted by recompute (%d tokens to re-prefill)",
                    s->num_tokens);
}

/* Whether this plan has room for the grammar s's sampling entry must bring
 * (its first on a slot): the text and replay of one request always fit, more
 * while the plan's share lasts; an entry that finds none waits a step. */
static bool grammar_room(const struct folio_policy *p, const struct seq *s)
{
    int text, replay;
    folio_seq_options_grammar_need(&s->opt, s->num_tokens - s->num_prompt, &text, &replay);
    return p->plan_grammar_bytes + text <= FOLIO_MAX_GRAMMAR_BYTES &&
           p->plan_replay_ids + replay <= p->cfg.max_model_len;
}

/* Adds n tokens to s's entry in the step being planned (a new entry if it has none). */
static void schedule(struct folio_policy *p, struct seq *s, int n)
{
    if (s->entry < 0) {
        s->entry = p->num_scratch++;
        p->scratch[s->entry] = (struct step_entry){.seq = s, .start = s->num_computed};
    }
    struct step_entry *e = &p->scratch[s->entry];
    bool was_sample = e->sample;
    e->num_new += n;
    e->sample = s->num_computed + e->num_new == s->num_prompt + s->num_outputs;
    if (e->sample && !was_sample) { /* the grammar its first sample on a slot brings */
        int text, replay;
        folio_seq_options_grammar_need(&s->opt, s->num_tokens - s->num_prompt, &text, &replay);
        p->plan_grammar_bytes += text;
        p->plan_replay_ids += replay;
    }
    /* Offered to the prefix cache at once: a request with the same prompt
     * admitted later in this very step (the n samples of one request are
     * submitted side by side) shares these blocks, since a step writes every
     * sequence's KV of a layer before any attention of that layer reads it. */
    seq_cache_blocks_upto(p, s, s->num_computed + e->num_new);
}

/* The logical length of a sequence: its prompt and every output sampled or
 * being sampled. A step computes [num_computed, num_computed + n) and samples
 * when it reaches the end. */
static int seq_length(const struct seq *s)
{
    return s->num_prompt + s->num_outputs;
}

static bool seq_is_decoding(const struct seq *s)
{
    return s->num_outputs > 0 && s->num_computed == seq_length(s) - 1;
}

/* s's entry for its last token and d drafts, sampling at each of those 1 + d positions. */
static void schedule_draft(struct folio_policy *p, struct seq *s, const int32_t *draft, int d)
{
    s->entry = p->num_scratch++;
    struct step_entry *e = &p->scratch[s->entry];
    *e = (struct step_entry){
        .seq = s, .start = s->num_computed, .num_new = 1 + d, .sample = true, .num_draft = d};
    memcpy(e->draft, draft, sizeof(int32_t) * (size_t)d);
    seq_cache_blocks_upto(p, s, s->num_computed + 1 + d);
}

/* s's drafts for this step (0: none), within its outputs, the budget and the step's rows; the
 * blocks for them taken, or none drafted where the pool has none to spare. */
static int plan_drafts(struct folio_policy *p, struct seq *s, int budget, int rows, int32_t *draft)
{
    int k = s->max_outputs - s->num_outputs - 1;
    k = k < budget - 1 ? k : budget - 1;
    k = k < FOLIO_MAX_DRAFT_ROWS - rows ? k : FOLIO_MAX_DRAFT_ROWS - rows;
    int d = policy_spec_draft(p, s, k, draft);
    if (d > 0 && !seq_grow_blocks(p, s, s->num_computed + 1 + d)) {
        policy_seq_trim_blocks(p, s, s->num_computed + 1);
        d = 0;
    }
    return d;
}

/* Pass 1: one token for every generating sequence (with its drafts where it has some),
 * preempting the newest running sequence while the pool has no block for it. */
static int plan_decodes(struct folio_policy *p, int budget)
{
    bool spec_on = policy_spec_step_on(p);
    p->spec_batch_off = p->cfg.spec.on && !spec_on;
    int rows = 0;
    for (int i = 0; i < p->num_running && budget > 0; i++) {
        struct seq *s = p->running[i];
        if (!seq_is_decoding(s) || s->num_outputs >= s->max_outputs)
            continue;
        int32_t draft[FOLIO_MAX_DRAFT_TOKENS];
        int d = policy_spec_wants(p, s, spec_on) ? plan_drafts(p, s, budget, rows, draft) : 0;
        if (d > 0) {
            schedule_draft(p, s, draft, d);
            budget -= 1 + d;
            rows += d;
            continue;
        }
        bool preempted_self = false;
        while (!seq_grow_blocks(p, s, s->num_computed + 1)) {
            struct seq *victim = p->running[p->num_running - 1];
            preempt(p, victim);
            if (victim == s) {
                preempted_self = true;
                break;
            }
        }
        if (preempted_self)
            break; /* s was the newest: everything older is planned */
        schedule(p, s, 1);
        budget--;
    }
    return budget;
}

/* The prompt tokens s has still to compute beyond what this step plans for it. */
static int prefill_left(const struct folio_policy *p, const struct seq *s)
{
    if (seq_is_decoding(s))
        return 0;
    return seq_length(s) - s->num_computed - (s->entry >= 0 ? p->scratch[s->entry].num_new : 0);
}

/* Gives s up to n more prompt tokens in this step; returns how many it got.
 * Blocks short: preempt newer sequences not in this step; if none is left,
 * the chunk shrinks to the blocks there are. */
static int grow_prefill(struct folio_policy *p, struct seq *s, int n)
{
    int from = s->num_computed + (s->entry >= 0 ? p->scratch[s->entry].num_new : 0);
    while (!seq_grow_blocks(p, s, from + n)) {
        struct seq *victim = p->running[p->num_running - 1];
        if (victim == s || victim->entry >= 0)
            break;
        preempt(p, victim);
    }
    int fits = s->num_blocks * FOLIO_KV_BLOCK_SIZE - from;
    if (n > fits)
        n = fits;
    if (n > 0)
        schedule(p, s, n);
    return n > 0 ? n : 0;
}

/* Pass 2: prefill chunks for running sequences still in their prompt (or in
 * a recompute), in equal shares, oldest first, until the budget or their
 * prompts are spent; a sequence planned already in this step gets its chunk
 * extended. Equal shares, because a request admitted with part of its prompt
 * (the budget ran out) must not wait behind every chunk of an older, longer
 * prompt. */
static int plan_running_prefills(struct folio_policy *p, int budget)
{
    for (;;) {
        int k = 0;
        for (int i = 0; i < p->num_running; i++)
            k += prefill_left(p, p->running[i]) > 0;
        if (k == 0 || budget <= 0)
            return budget;
        /* Each round spends the budget or finishes a prompt, unless the pool is dry. */
        int quota = (budget + k - 1) / k;
        bool short_of_blocks = false, progressed = false;
        for (int i = 0; i < p->num_running && budget > 0; i++) {
            struct seq *s = p->running[i];
            int left = prefill_left(p, s);
            if (left <= 0)
                continue;
            int n = left < quota ? left : quota;
            if (n > budget)
                n = budget;
            if (n == left && !grammar_room(p, s))
                continue; /* its sampling chunk waits for a plan with room for its grammar */
            int got = grow_prefill(p, s, n);
            short_of_blocks |= got < n;
            progressed |= got > 0;
            budget -= got;
        }
        if (short_of_blocks || !progressed)
            return budget;
    }
}

/* The cached full blocks that start s's tokens (never all of them: the last
 * token is computed so that there are logits to sample from). */
static int match_prefix(struct folio_policy *p, const struct seq *s, int *num_free_matched)
{
    /* Penalties are computed by the worker over every token of the sequence,
     * so it must see them all: such a sequence takes no cached blocks (it
     * still offers its own to others). */
    bool penalized = folio_sampling_params_penalized(&s->sampling);
    /* Prompt logprobs come from computing every prompt position, too. */
    int max_blocks = penalized || s->opt.prompt_logprobs || p->cfg.disable_prefix_caching
                         ? 0
                         : (s->num_tokens - 1) / FOLIO_KV_BLOCK_SIZE;
    uint64_t parent = 0;
    int m = 0;
    *num_free_matched = 0;
    for (; m < max_blocks; m++) {
        const int32_t *t = s->tokens + (size_t)m * FOLIO_KV_BLOCK_SIZE;
        uint64_t h = folio_bm_hash(parent, t);
        int b = folio_bm_lookup(p->bm, h, parent, t);
        if (b < 0)
            break;
        if (folio_bm_refcount(p->bm, b) == 0)
            (*num_free_matched)++;
        p->scratch_blocks[m] = b;
        parent = h;
    }
    return m;
}

/* Pass 3: admit waiting sequences, oldest first, while slots, budget and
 * blocks last. A small watermark of free blocks is kept for the decodes of
 * the sequences already running, so that admission does not cause an
 * immediate preemption. */
static int plan_admissions(struct folio_policy *p, int budget)
{
    int watermark = p->cfg.num_kv_blocks / 100;
    while (!p->preempted_this_step && budget > 0 && p->num_waiting > 0 && p->num_free_slots > 0) {
        struct seq *s = waiting_at(p, 0);
        /* Preempted with a step still in flight: it waits for its tokens; its grammar finds no
         * room in this plan: it waits a step. */
        if (s->inflight > 0 || !grammar_room(p, s))
            break;
        int free_matched;
        int m = match_prefix(p, s, &free_matched);
        int length = seq_length(s);
        int n = length - m * FOLIO_KV_BLOCK_SIZE;
        int available = folio_bm_num_free(p->bm) - free_matched - watermark;
        int new_blocks = policy_ceil_blocks(length) - m;
        if (p->cfg.disable_chunked_prefill && (n > budget || new_blocks > available))
            break; /* whole or not at all: it waits for a step with room */
        if (n > budget) {
            n = budget;
            new_blocks = policy_ceil_blocks(m * FOLIO_KV_BLOCK_SIZE + n) - m;
        }
        if (new_blocks > available) {
            n = available * FOLIO_KV_BLOCK_SIZE;
            new_blocks = available;
        }
        if (n <= 0)
            break;
        /* Admit: take the cached blocks by reference, then fresh ones. */
        p->waiting_head = (p->waiting_head + 1) % p->waiting_cap;
        p->num_waiting--;
        p->pending_prompt_tokens -= policy_seq_pending_prompt(s);
        for (int i = 0; i < m; i++) {
            folio_bm_ref(p->bm, p->scratch_blocks[i]);
            s->blocks[i] = p->scratch_blocks[i];
        }
        s->num_blocks = m;
        s->num_computed = m * FOLIO_KV_BLOCK_SIZE;
        s->num_hashed = 0;
        s->last_hash = 0;
        policy_seq_cache_full_blocks(p, s); /* recomputes the chain hash of the matched blocks */
        if (!seq_grow_blocks(p, s, s->num_computed + n))
            abort(); /* counted above */
        p->st.prefix_cache_queries += (uint64_t)length;
        p->st.prefix_cache_hits += (uint64_t)s->num_computed;
        if (!s->admitted_once) {
            s->cached_tokens = s->num_computed;
            s->admitted_once = true;
            if (p->cfg.clock)
                observe_queue_time(p, p->cfg.clock() - s->submitted_at);
        }
        s->slot = p->free_slots[--p->num_free_slots];
        s->state = SEQ_RUNNING;
        p->running[p->num_running++] = s;
        schedule(p, s, n);
        budget -= n;
        folio_log_debug(s->request_id, "admitted to slot %d: %d tokens, %d cached", s->slot, length,
                        s->num_computed);
    }
    return budget;
}

/* The prompt tokens of a step: what the decodes left of the token budget, and
 * with a step target no more than the worker ran in that time lately (less
 * the decodes), so that a slow worker (the CPU backend) takes a long prompt
 * in chunks of about that time instead of steps that stall every other
 * request. At least one block's worth, so that prompts progress however many
 * decodes there are; one block's worth too before any step has come back. */
static int prefill_budget(const struct folio_policy *p, int decodes, int left)
{
    if (p->cfg.step_target_seconds <= 0 || p->cfg.disable_chunked_prefill)
        return left;
    double n = FOLIO_KV_BLOCK_SIZE;
    if (p->speed_seconds > 0)
        n = p->cfg.step_target_seconds * p->speed_tokens / p->speed_seconds - decodes;
    if (n < FOLIO_KV_BLOCK_SIZE)
        n = FOLIO_KV_BLOCK_SIZE;
    return n < left ? (int)n : left;
}

/* Passes 2 and 3 sharing the prompt tokens. While a request waits that could
 * be admitted, the running prefills take at most half (in equal shares), the
 * admissions the rest, and the running prefills then take what admissions
 * left: a short request that arrives behind a long prompt starts at once
 * instead of queueing behind all its chunks, and the long prompt still runs
 * at half speed or better, so neither can starve the other. (vLLM's V1
 * scheduler gives running requests the whole budget first; its
 * long_prefill_token_threshold caps a long prefill's chunk for the same
 * reason.) */
static void plan_prefills(struct folio_policy *p, int budget)
{
    bool can_admit = p->num_waiting > 0 && p->num_free_slots > 0 && waiting_at(p, 0)->inflight == 0;
    int running = can_admit ? (budget + 1) / 2 : budget;
    int left = budget - running + plan_running_prefills(p, running);
    left = plan_admissions(p, left);
    plan_running_prefills(p, left);
}

/* Two steps in flight keep the worker busy while the next is planned; --no-async-scheduling
 * keeps one, so the worker waits for every plan, and so does a verify step in flight (DESIGN.md,
 * "Speculative decoding": a round trip costs less than its sequences sitting a step out). */
static int policy_max_inflight(const struct folio_policy *p)
{
    return p->cfg.serial_steps || p->num_verifying > 0 ? 1 : FOLIO_POLICY_MAX_INFLIGHT;
}

int folio_policy_plan(struct folio_policy *p, uint64_t plan_unix_ns, const void **rec, size_t *len)
{
    if (p->num_inflight >= policy_max_inflight(p))
        return 0;
    p->num_scratch = 0;
    p->preempted_this_step = false;
    p->plan_grammar_bytes = p->plan_replay_ids = 0;
    int cap = p->cfg.max_num_batched_tokens;
    int left = plan_decodes(p, cap);
    plan_prefills(p, prefill_budget(p, cap - left, left));
    if (p->num_scratch == 0)
        return 0;
    p->st.spec_steps_batch_off += p->spec_batch_off;

    uint64_t step_id = p->next_step_id++;
    policy_encode_plan(p, step_id, plan_unix_ns, len);
    *rec = p->plan_buf;

    /* The step is in flight: advance every sequence past it. */
    struct inflight_step *st =
        &p->inflight[(p->inflight_head + p->num_inflight) % FOLIO_POLICY_MAX_INFLIGHT];
    st->step_id = step_id;
    st->num_entries = p->num_scratch;
    memcpy(st->entries, p->scratch, (size_t)p->num_scratch * sizeof *st->entries);
    st->num_tokens = ((const struct folio_plan_header *)p->plan_buf)->num_tokens;
    st->verifies = false;
    for (int i = 0; i < p->num_scratch; i++)
        st->verifies |= p->scratch[i].num_draft > 0;
    p->num_verifying += st->verifies;
    p->num_inflight++;
    for (int i = 0; i < p->num_scratch; i++) {
        struct seq *s = p->scratch[i].seq;
        s->entry = -1;
        if (s->num_computed < s->num_prompt) {
            int left = s->num_prompt - s->num_computed;
            p->st.prompt_tokens_computed +=
                (uint64_t)(p->scratch[i].num_new < left ? p->scratch[i].num_new : left);
        }
        s->num_computed += p->scratch[i].num_new;
        if (p->scratch[i].sample)
            s->num_outputs += 1 + p->scratch[i].num_draft;
        s->inflight++;
        policy_seq_cache_full_blocks(p, s);
    }
    p->st.steps++;
    return p->num_scratch;
}

bool folio_policy_has_work(const struct folio_policy *p)
{
    if (p->num_inflight >= policy_max_inflight(p))
        return false;
    for (int i = 0; i < p->num_running; i++) {
        const struct seq *s = p->running[i];
        if (seq_is_decoding(s) ? s->num_outputs < s->max_outputs : s->num_computed < seq_length(s))
            return true;
    }
    return p->num_waiting > 0 && p->num_free_slots > 0 && waiting_at(p, 0)->inflight == 0;
}
