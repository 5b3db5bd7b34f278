/* The policy's internal types and the helpers shared by policy.c and policy_results.c. */
#ifndef FOLIO_SCHEDULER_POLICY_INTERNAL_H
#define FOLIO_SCHEDULER_POLICY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "block_manager.h"
#include "policy.h"
#include "seq_options.h"

enum seq_state { SEQ_WAITING, SEQ_RUNNING, SEQ_FINISHED };

struct seq {
    uint64_t request_id;
    uint32_t frontend_id;
    enum seq_state state;
    int32_t *tokens; /* prompt, then the generated tokens known so far */
    int num_tokens, cap_tokens;
    int num_prompt;
    int num_outputs;  /* sampled or being sampled by a step in flight */
    int num_computed; /* tokens whose KV is written or being written */
    int max_outputs;  /* max_tokens, capped by the context length */
    int *blocks;
    int num_blocks, cap_blocks;
    int num_hashed; /* leading full blocks registered in the prefix cache */
    uint64_t last_hash;
    int slot;          /* -1 when none */
    int entry;         /* its entry in the step being planned (p->scratch), -1 when none */
    int inflight;      /* steps in flight that include this sequence */
    int cached_tokens; /* prompt tokens the first admission found cached */
    bool admitted_once;
    bool requeued;       /* sent back to the queue once when its worker died */
    double submitted_at; /* cfg.clock() at submit, for the queue-time histogram */
    struct folio_sampling_params sampling;
    struct folio_seq_options opt; /* stop ids, min_tokens, logit bias, prompt logprobs */
    /* Speculative decoding (policy_spec.c): whether it may draft, its acceptance's moving
     * average and its verify steps so far. */
    bool spec_ok;
    double spec_accept;
    int spec_steps;
    struct seq *hnext;               /* request-id map chain */
    struct seq *all_prev, *all_next; /* every live sequence */
};

struct step_entry {
    struct seq *seq;
    int start; /* the first new token's position */
    int num_new;
    bool sample;
    int num_draft; /* the last num_draft new tokens are drafts, every one of the last 1 +
                      num_draft positions samples */
    int32_t draft[FOLIO_MAX_DRAFT_TOKENS];
};

/* Prompt logprobs go to the frontend in events of at most this many (the
 * event ring's records stay far below its size). */
#define PROMPT_LP_PER_EVENT 1024

struct inflight_step {
    uint64_t step_id;
    int num_entries;
    int num_tokens;
    bool verifies; /* an entry has drafts */
    struct step_entry *entries;
};

struct folio_policy {
    struct folio_policy_config cfg;
    folio_emit_fn emit;
    void *emit_ctx;
    struct folio_block_manager *bm;

    struct seq **map; /* request id -> sequence, chained */
    size_t map_mask;
    struct seq *all_head;

    /* waiting: a deque, oldest at head; preempted sequences go back in front */
    struct seq **waiting;
    int waiting_cap, waiting_head, num_waiting;
    int64_t pending_prompt_tokens;

    struct seq **running; /* in admission order: the last one is the newest */
    int num_running;
    int *free_slots;
    int num_free_slots;

    struct inflight_step inflight[FOLIO_POLICY_MAX_INFLIGHT];
    int inflight_head, num_inflight;
    int num_verifying; /* steps in flight with drafts: the next is planned once they are back */
    uint64_t next_step_id;
    uint64_t seed_counter;

    struct step_entry *scratch; /* the step being planned */
    int num_scratch;
    int *scratch_blocks; /* a prefix match, before it is taken */
    bool preempted_this_step;
    bool spec_batch_off; /* the step being planned drafts for none: its batch is too large */
    int plan_grammar_bytes, plan_replay_ids; /* the grammars this plan brings (policy.c) */
    /* The worker's speed: tokens and backend seconds of the steps that came back, each sum
     * halved at every step so that it follows a worker that slows down or speeds up. */
    double speed_tokens, speed_seconds;
    char *plan_buf;
    size_t plan_cap;
    int max_blocks_per_seq;

    /* event scratch for logprobs */
    int32_t *ev_top_ids;
    float *ev_top_lps;

    struct folio_policy_stats st;
};

static inline int policy_ceil_blocks(int tokens)
{
    return (tokens + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE;
}
/* The plan of the entries in p->scratch into p->plan_buf (plan_record.c). */
void policy_encode_plan(struct folio_policy *p, uint64_t step_id, uint64_t plan_unix_ns,
                        size_t *len);
int policy_seq_pending_prompt(const struct seq *s);
void policy_seq_free(struct folio_policy *p, struct seq *s);
void policy_seq_cache_full_blocks(struct folio_policy *p, struct seq *s);
void policy_emit_simple(struct folio_policy *p, const struct seq *s, uint64_t request_id,
                        uint32_t frontend_id, enum folio_finish_reason finish, uint32_t status,
                        uint32_t retry_after_s, const char *message);
void policy_seq_finish(struct folio_policy *p, struct seq *s);
void policy_seq_release_blocks(struct folio_policy *p, struct seq *s);
void policy_waiting_push_front(struct folio_policy *p, struct seq *s);
/* Gives back the blocks past those `tokens` tokens need (a verify step's rejected drafts). */
void policy_seq_trim_blocks(struct folio_policy *p, struct seq *s, int tokens);

/* Speculative decoding (policy_spec.c). */
void policy_spec_init_seq(const struct folio_policy *p, struct seq *s);
/* This step may draft: speculation is configured and the decoding batch is small enough. */
bool policy_spec_step_on(const struct folio_policy *p);
/* s drafts in a step where step_on: its options allow it and its acceptance held up. */
bool policy_spec_wants(const struct folio_policy *p, const struct seq *s, bool step_on);
/* s's n-gram drafts, at most max_k, into draft; their number (0: none). They follow its last
 * token, known or still in flight. */
int policy_spec_draft(const struct folio_policy *p, const struct seq *s, int max_k, int32_t *draft);
/* The drafts of a verify step's entry e that its samples (sampled[0..e->num_draft]) keep. */
int policy_spec_matched(const struct step_entry *e, const int32_t *sampled);
/* Counts a verify step in /metrics and s's acceptance, turning s's drafts off when low. */
void policy_spec_observe(struct folio_policy *p, struct seq *s, int num_draft, int matched);

#endif
