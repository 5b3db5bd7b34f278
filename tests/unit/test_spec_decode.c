/* The scheduler's side of speculative decoding (scheduler/policy_spec.c and the policy): which
 * steps carry n-gram drafts, what a verify step's samples keep (the drafts up to the first
 * sample that differs, and that sample), stop conditions token by token inside a kept run, the
 * positions and blocks of rejected drafts given back, and the self-disablings. */
#include <string.h>

#include "check.h"
#include "policy.h"

#define MAX_EVENTS 256

struct ev {
    uint64_t id;
    int32_t token;
    int finish;
};
static struct ev events[MAX_EVENTS];
static int num_events;

static void on_event(void *ctx, const struct folio_token_event *e)
{
    (void)ctx;
    for (int i = 0; i < (e->num_tokens ? e->num_tokens : 1) && num_events < MAX_EVENTS; i++)
        events[num_events++] =
            (struct ev){e->request_id, e->num_tokens ? e->token_ids[i] : -1, (int)e->finish};
}

static char plan_buf[1 << 16];
static size_t plan_len;
static struct folio_plan_view pv;

static struct folio_policy *make(int k, int min_n, int max_n)
{
    struct folio_policy_config cfg = {
        .max_num_seqs = 16,
        .max_num_batched_tokens = 256,
        .num_kv_blocks = 64,
        .max_model_len = 256,
        .vocab_size = 1000,
        .max_waiting_requests = 16,
        .max_pending_prompt_tokens = 4096,
        .eos_ids = {2},
        .num_eos_ids = 1,
        .seed = 7,
        .spec = {.on = true, .num_tokens = k, .lookup_min = min_n, .lookup_max = max_n}};
    struct folio_policy *p;
    char err[256];
    CHECK(folio_policy_create(&cfg, on_event, NULL, &p, err, sizeof err) == 0);
    num_events = 0;
    return p;
}

static void submit(struct folio_policy *p, uint64_t id, const int32_t *prompt, int n,
                   int max_tokens, float repetition_penalty)
{
    struct folio_request r = {.request_id = id,
                              .frontend_id = 1,
                              .prompt = prompt,
                              .num_prompt = n,
                              .params = {.max_tokens = max_tokens}};
    r.params.sampling.repetition_penalty = repetition_penalty;
    folio_policy_submit(p, &r);
}

/* Plans one step into plan_buf (one in flight at a time in these tests); false when none. */
static bool plan(struct folio_policy *p)
{
    const void *rec;
    if (folio_policy_plan(p, 0, &rec, &plan_len) == 0)
        return false;
    memcpy(plan_buf, rec, plan_len);
    char err[256];
    CHECK(folio_plan_decode(plan_buf, plan_len, &pv, err, sizeof err) == 0);
    return true;
}

/* Answers the planned step: sequence i's samples are rows[i][0..num_draft] (its row, then its
 * draft rows). */
static void answer(struct folio_policy *p, const int32_t rows[][FOLIO_MAX_DRAFT_TOKENS + 1])
{
    static char buf[1 << 14];
    const struct folio_plan_header *h = pv.hdr;
    int num_rows = 0;
    for (int i = 0; i < h->num_seqs; i++)
        num_rows += pv.seqs[i].num_draft;
    struct folio_result_header *rh = (void *)buf;
    *rh = (struct folio_result_header){.magic = FOLIO_RESULT_MAGIC,
                                       .num_seqs = h->num_seqs,
                                       .num_draft_rows = num_rows,
                                       .step_id = h->step_id};
    struct folio_result_seq *rs = (void *)(rh + 1), *dr = rs + h->num_seqs;
    int at = 0;
    for (int i = 0; i < h->num_seqs; i++) {
        int d = pv.seqs[i].num_draft;
        rs[i] = (struct folio_result_seq){
            .token_id = pv.seqs[i].sample ? rows[i][0] : -1, .num_draft = d, .draft_offset = at};
        for (int j = 1; j <= d; j++)
            dr[at++] = (struct folio_result_seq){.token_id = rows[i][j]};
    }
    struct folio_result_view rv;
    char err[256];
    CHECK(folio_result_decode(buf, folio_result_size(h->num_seqs + num_rows, 0, 0), &rv, err,
                              sizeof err) == 0);
    int rc = folio_policy_apply_result(p, &rv, err, sizeof err);
    if (rc == 0)
        rc = folio_policy_check(p, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "  %s\n", err);
    CHECK(rc == 0);
}

static void answer1(struct folio_policy *p, int32_t token)
{
    int32_t rows[1][FOLIO_MAX_DRAFT_TOKENS + 1] = {{token}};
    answer(p, rows);
}

static struct folio_policy_stats stats(struct folio_policy *p)
{
    struct folio_policy_stats st;
    folio_policy_stats(p, &st);
    return st;
}

static void test_accept_reject_and_blocks(void)
{
    struct folio_policy *p = make(4, 1, 3);
    const int32_t prompt[] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 1, 3, 10, 11};
    submit(p, 1, prompt, 14, 30, 0);
    CHECK(plan(p) && pv.seqs[0].num_new_tokens == 14 && pv.seqs[0].num_draft == 0);
    answer1(p, 12);
    /* "10 11 12" recurs at 0: 13 14 15 16 follow it. */
    CHECK(plan(p) && pv.seqs[0].num_draft == 4 && pv.seqs[0].num_new_tokens == 5);
    CHECK(pv.seqs[0].sample && pv.seqs[0].output_index == 1 && pv.seqs[0].context_len == 19);
    CHECK(pv.token_ids[0] == 12 && pv.token_ids[1] == 13 && pv.token_ids[4] == 16);
    CHECK(pv.seqs[0].num_blocks == 2 && stats(p).kv_blocks_used == 2);
    CHECK(!folio_policy_has_work(p) && !plan(p)); /* a verify step in flight: nothing after it */
    /* The first sample differs from the first draft: only it is kept. */
    int32_t reject[1][FOLIO_MAX_DRAFT_TOKENS + 1] = {{50, 13, 14, 15, 16}};
    answer(p, reject);
    CHECK(num_events == 2 && events[1].token == 50 && events[1].finish == FOLIO_FINISH_NONE);
    CHECK(stats(p).kv_blocks_used == 1); /* the drafts' second block went back */
    CHECK(stats(p).spec_num_drafts == 1 && stats(p).spec_num_draft_tokens == 4 &&
          stats(p).spec_num_accepted_tokens == 0);
    /* "50" occurs nowhere before: a plain decode of the known token, at position 15. */
    CHECK(plan(p) && pv.seqs[0].num_draft == 0 && pv.seqs[0].num_new_tokens == 1);
    CHECK(pv.token_ids[0] == 50 && pv.seqs[0].context_len == 16 && pv.seqs[0].output_index == 2);
    answer1(p, 11);
    /* "11" last occurred at 13: 12 50 11, then the copy goes on (12). */
    CHECK(plan(p) && pv.seqs[0].num_draft == 4 && pv.seqs[0].output_index == 3);
    CHECK(pv.token_ids[0] == 11 && pv.token_ids[1] == 12 && pv.token_ids[2] == 50 &&
          pv.token_ids[3] == 11 && pv.token_ids[4] == 12);
    /* Every draft matches: all four and the sample after them. */
    int32_t accept[1][FOLIO_MAX_DRAFT_TOKENS + 1] = {{12, 50, 11, 12, 77}};
    answer(p, accept);
    CHECK(num_events == 8 && events[3].token == 12 && events[6].token == 12 &&
          events[7].token == 77);
    struct folio_policy_stats st = stats(p);
    CHECK(st.spec_num_drafts == 2 && st.spec_num_accepted_tokens == 4 &&
          st.spec_accepted_per_pos[0] == 1 && st.spec_accepted_per_pos[3] == 1);
    CHECK(st.generation_tokens_total == 8);
    /* 14 prompt + 8 outputs: the last output's position is the next to compute. */
    CHECK(plan(p) && pv.token_ids[0] == 77 && pv.seqs[0].context_len == 22 &&
          pv.seqs[0].output_index == 8);
    folio_policy_destroy(p);
}

/* A sequence whose last token is still in flight drafts behind it: the continuation's first
 * token stands for the one in flight, the step's first token is FROM_PREV, and the verify step
 * keeps what its samples confirm whether that guess was right or not. */
static void test_drafts_behind_a_step_in_flight(void)
{
    const int32_t prompt[] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 1, 3, 10, 11};
    static char buf_a[1 << 16];
    for (int guess_right = 1; guess_right >= 0; guess_right--) {
        struct folio_policy *p = make(4, 1, 3);
        submit(p, 1, prompt, 14, 30, 0);
        CHECK(plan(p) && pv.seqs[0].num_new_tokens == 14);
        memcpy(buf_a, plan_buf, plan_len);
        struct folio_plan_view a;
        char err[256];
        CHECK(folio_plan_decode(buf_a, plan_len, &a, err, sizeof err) == 0);
        /* "10 11" recurs at 0: 12 (for the token in flight), then 13 14 15 16 drafted. */
        CHECK(plan(p) && pv.seqs[0].num_draft == 4 && pv.seqs[0].num_new_tokens == 5);
        CHECK(pv.token_ids[0] == FOLIO_TOKEN_FROM_PREV && pv.token_ids[1] == 13 &&
              pv.token_ids[4] == 16);
        CHECK(pv.seqs[0].output_index == 1 && pv.seqs[0].context_len == 19);
        CHECK(!folio_policy_has_work(p)); /* a verify step in flight: nothing after it */
        struct folio_plan_view b = pv;
        pv = a;
        answer1(p, guess_right ? 12 : 50);
        pv = b;
        int32_t rows[1][FOLIO_MAX_DRAFT_TOKENS + 1] = {{13, 14, 15, 16, 77}};
        if (!guess_right)
            rows[0][0] = 60; /* after 50 the model goes its own way: no draft is kept */
        answer(p, rows);
        struct folio_policy_stats st = stats(p);
        if (guess_right) {
            CHECK(num_events == 6 && events[1].token == 13 && events[5].token == 77);
            CHECK(st.spec_num_accepted_tokens == 4 && st.kv_blocks_used == 2);
        } else {
            CHECK(num_events == 2 && events[0].token == 50 && events[1].token == 60);
            CHECK(st.spec_num_accepted_tokens == 0 && st.kv_blocks_used == 1);
        }
        /* Nothing in flight: the next step starts from the last kept token, known. */
        CHECK(plan(p) && pv.token_ids[0] == (guess_right ? 77 : 60) &&
              pv.seqs[0].context_len == (guess_right ? 20 : 16));
        folio_policy_destroy(p);
    }
}

/* A verify step in flight holds the next step for every sequence, not only its own: the next
 * plan waits for its samples, and then takes them all. */
static void test_a_verify_step_holds_the_next_step(void)
{
    const int32_t prompt[] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 1, 3, 10, 11};
    struct folio_policy *p = make(4, 1, 3);
    submit(p, 1, prompt, 14, 30, 0);
    submit(p, 2, prompt, 14, 30, 1.2f); /* a repetition penalty: never drafts */
    CHECK(plan(p) && pv.hdr->num_seqs == 2);
    int32_t first[2][FOLIO_MAX_DRAFT_TOKENS + 1] = {{12}, {40}};
    answer(p, first);
    CHECK(plan(p) && pv.hdr->num_seqs == 2 && pv.seqs[0].num_draft == 4 &&
          pv.seqs[1].num_draft == 0);
    CHECK(!folio_policy_has_work(p) && !plan(p)); /* sequence 2 waits for the verify step too */
    int32_t rows[2][FOLIO_MAX_DRAFT_TOKENS + 1] = {{13, 14, 50, 16, 17}, {41}};
    answer(p, rows);
    CHECK(num_events == 6 && events[4].token == 50 && events[5].token == 41);
    CHECK(plan(p) && pv.hdr->num_seqs == 2 && pv.token_ids[0] == 50 && pv.token_ids[1] == 41);
    /* No drafts in it (50 and 41 occur nowhere before): the next step is planned behind it. */
    CHECK(pv.seqs[0].num_draft == 0 && folio_policy_has_work(p));
    folio_policy_destroy(p);
}

static void test_stops_inside_a_kept_run(void)
{
    /* EOS (2) as a kept draft: the tokens after it are dropped, the sequence ends there. */
    struct folio_policy *p = make(4, 2, 2);
    const int32_t prompt[] = {5, 6, 2, 9, 8, 5};
    submit(p, 1, prompt, 6, 30, 0);
    CHECK(plan(p));
    answer1(p, 6);
    CHECK(plan(p) && pv.seqs[0].num_draft == 4 && pv.token_ids[1] == 2);
    int32_t rows[1][FOLIO_MAX_DRAFT_TOKENS + 1] = {{2, 9, 8, 5, 6}};
    answer(p, rows);
    CHECK(num_events == 2 && events[1].token == 2 && events[1].finish == FOLIO_FINISH_STOP);
    struct folio_policy_stats st = stats(p);
    CHECK(folio_policy_idle(p) && st.kv_blocks_used == 0 && st.tokens_discarded == 4);
    folio_policy_destroy(p);

    /* max_tokens: the drafts never run past it, and the last kept token ends it. */
    p = make(4, 2, 2);
    submit(p, 1, prompt, 6, 3, 0);
    CHECK(plan(p));
    answer1(p, 6);
    CHECK(plan(p) && pv.seqs[0].num_draft == 1 && pv.seqs[0].num_new_tokens == 2);
    int32_t two[1][FOLIO_MAX_DRAFT_TOKENS + 1] = {{2 + 1, 4}};
    answer(p, two); /* 3 differs from the draft (2): 3 kept, the draft's sample dropped */
    CHECK(num_events == 2 && events[1].token == 3 && events[1].finish == FOLIO_FINISH_NONE);
    CHECK(plan(p) && pv.seqs[0].num_draft == 0);
    answer1(p, 7);
    CHECK(num_events == 3 && events[2].finish == FOLIO_FINISH_LENGTH && folio_policy_idle(p));
    folio_policy_destroy(p);
}

static void test_low_acceptance_turns_it_off(void)
{
    struct folio_policy *p = make(2, 1, 2);
    const int32_t prompt[] = {3, 4, 5, 6, 3, 4, 5, 6}; /* EOS (2) never among them */
    submit(p, 1, prompt, 8, 200, 0);
    CHECK(plan(p));
    answer1(p, 3);
    int verify = 0;
    while (stats(p).spec_seqs_disabled == 0 && verify < 20) {
        CHECK(plan(p));
        if (pv.seqs[0].num_draft > 0)
            verify++;
        /* always a token of the prompt's alphabet (so a draft is found), never the draft */
        int32_t t = pv.seqs[0].num_draft ? 3 + (pv.token_ids[1] - 2) % 4 : 3;
        int32_t rows[1][FOLIO_MAX_DRAFT_TOKENS + 1] = {{t, t, t}};
        answer(p, rows);
    }
    CHECK(verify == 9); /* 0.75^n < 0.1 */
    CHECK(stats(p).spec_num_accepted_tokens == 0);
    /* Off: plain pipelined decodes, the next planned before this one's token is back. */
    CHECK(plan(p) && pv.seqs[0].num_draft == 0);
    CHECK(plan(p) && pv.token_ids[0] == FOLIO_TOKEN_FROM_PREV);
    folio_policy_destroy(p);
}

static void test_sequences_and_steps_that_do_not_draft(void)
{
    const int32_t prompt[] = {1, 2, 3, 4, 1, 2, 3, 4};
    /* A repetition penalty would need each draft's own history: never drafts. */
    struct folio_policy *p = make(4, 1, 2);
    submit(p, 1, prompt, 8, 20, 1.2f);
    CHECK(plan(p));
    CHECK(plan(p) && pv.seqs[0].num_draft == 0 && pv.token_ids[0] == FOLIO_TOKEN_FROM_PREV);
    CHECK(stats(p).spec_steps_batch_off == 0);
    folio_policy_destroy(p);

    /* Nine decoding sequences: above the batch that drafts, the step is a plain one. */
    p = make(4, 1, 2);
    for (int i = 0; i < 9; i++)
        submit(p, (uint64_t)i + 1, prompt, 8, 20, 0);
    CHECK(plan(p) && pv.hdr->num_seqs == 9);
    CHECK(plan(p) && pv.hdr->num_seqs == 9);
    for (int i = 0; i < 9; i++)
        CHECK(pv.seqs[i].num_draft == 0 && pv.token_ids[i] == FOLIO_TOKEN_FROM_PREV);
    CHECK(stats(p).spec_steps_batch_off >= 1 && stats(p).spec_num_drafts == 0);
    folio_policy_destroy(p);
}

int main(void)
{
    test_accept_reject_and_blocks();
    test_drafts_behind_a_step_in_flight();
    test_a_verify_step_holds_the_next_step();
    test_stops_inside_a_kept_run();
    test_low_acceptance_turns_it_off();
    test_sequences_and_steps_that_do_not_draft();
    return check_report();
}
