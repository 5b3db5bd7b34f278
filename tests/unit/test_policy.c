/* The scheduler policy, step by step: pipelining with FROM_PREV tokens,
 * stops seen one step late, chunked prefill (and whole prompts without it),
 * prompt chunks sized by the worker's measured speed, short requests beside
 * a long prompt, one step in flight, decodes first, prefix caching,
 * preemption by recompute, admission limits, aborts and worker failure
 * (what is failed, what runs again on the next worker). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "policy.h"

#define MAX_EVENTS 256

struct ev {
    uint64_t id;
    int num_tokens;
    int32_t token;
    int finish;
    uint32_t status, completion, cached, retry;
};
static struct ev events[MAX_EVENTS];
static int num_events;

static void on_event(void *ctx, const struct folio_token_event *e)
{
    (void)ctx;
    if (num_events < MAX_EVENTS)
        events[num_events++] =
            (struct ev){e->request_id,    e->num_tokens,   e->num_tokens ? e->token_ids[0] : -1,
                        e->finish,        e->status,       e->completion_tokens,
                        e->cached_tokens, e->retry_after_s};
}

/* Plans kept by the test, oldest first (the policy reuses its buffer). */
static char plans[2][1 << 16];
static int plans_head, plans_count;

/* Ablations of the default policy (--no-enable-chunked-prefill, --no-async-scheduling). */
static bool no_chunks, serial;

static struct folio_policy *make(int seqs, int budget, int blocks, int max_len)
{
    struct folio_policy_config cfg = {.disable_chunked_prefill = no_chunks,
                                      .serial_steps = serial,
                                      .max_num_seqs = seqs,
                                      .max_num_batched_tokens = budget,
                                      .num_kv_blocks = blocks,
                                      .max_model_len = max_len,
                                      .vocab_size = 1000,
                                      .max_waiting_requests = 4,
                                      .max_pending_prompt_tokens = 1000,
                                      .eos_ids = {2},
                                      .num_eos_ids = 1,
                                      .seed = 7};
    struct folio_policy *p;
    char err[256];
    CHECK(folio_policy_create(&cfg, on_event, NULL, &p, err, sizeof err) == 0);
    num_events = 0;
    plans_head = plans_count = 0;
    return p;
}

static void submit(struct folio_policy *p, uint64_t id, int n, int first, int max_tokens)
{
    int32_t prompt[16384];
    for (int i = 0; i < n; i++)
        prompt[i] = (first + i) % 1000;
    struct folio_request r = {.request_id = id,
                              .frontend_id = 1,
                              .prompt = prompt,
                              .num_prompt = n,
                              .params = {.max_tokens = max_tokens}};
    folio_policy_submit(p, &r);
}

/* Plans one step; returns its view (into the test's copy) or NULL. */
static const struct folio_plan_view *plan(struct folio_policy *p)
{
    static struct folio_plan_view v[2];
    const void *rec;
    size_t len;
    if (folio_policy_plan(p, 0, &rec, &len) == 0)
        return NULL;
    int k = (plans_head + plans_count++) % 2;
    memcpy(plans[k], rec, len);
    char err[256];
    CHECK(folio_plan_decode(plans[k], len, &v[k], err, sizeof err) == 0);
    return &v[k];
}

/* The worker time the next answers report (0: none measured). */
static double answer_seconds;

/* Answers the oldest planned step: every sampling sequence gets `token`. */
static void answer(struct folio_policy *p, int32_t token)
{
    struct folio_plan_view pv;
    char err[256];
    const struct folio_plan_header *h = (const void *)plans[plans_head];
    CHECK(folio_plan_decode(plans[plans_head],
                            folio_plan_size(h->num_seqs, h->num_tokens, h->num_block_ids,
                                            h->num_bias, h->num_replay, h->num_grammar_bytes),
                            &pv, err, sizeof err) == 0);
    static char buf[1 << 14];
    struct folio_result_header *rh = (void *)buf;
    *rh = (struct folio_result_header){.magic = FOLIO_RESULT_MAGIC,
                                       .num_seqs = h->num_seqs,
                                       .step_id = h->step_id,
                                       .backend_ns = (uint64_t)(answer_seconds * 1e9)};
    struct folio_result_seq *rs = (void *)(rh + 1);
    for (int i = 0; i < h->num_seqs; i++)
        rs[i] = (struct folio_result_seq){.token_id = pv.seqs[i].sample ? token : -1};
    struct folio_result_view rv;
    CHECK(folio_result_decode(buf, folio_result_size(h->num_seqs, 0, 0), &rv, err, sizeof err) ==
          0);
    CHECK(folio_policy_apply_result(p, &rv, err, sizeof err) == 0);
    plans_head = (plans_head + 1) % 2;
    plans_count--;
}

static void checked(struct folio_policy *p)
{
    char err[256];
    int rc = folio_policy_check(p, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    CHECK(rc == 0);
}

static void test_pipeline_and_length(void)
{
    struct folio_policy *p = make(4, 64, 16, 256);
    submit(p, 1, 20, 10, 3);
    const struct folio_plan_view *v = plan(p);
    CHECK(v && v->hdr->num_seqs == 1 && v->hdr->num_tokens == 20);
    CHECK(v->seqs[0].sample == 1 && v->seqs[0].output_index == 0 && v->seqs[0].num_blocks == 2);
    CHECK(v->seqs[0].sampling.seed != 0); /* drawn by the scheduler */
    v = plan(p);                          /* planned before step 1's token is known */
    CHECK(v && v->hdr->num_tokens == 1 && v->token_ids[0] == FOLIO_TOKEN_FROM_PREV);
    CHECK(v->seqs[0].context_len == 21 && v->seqs[0].output_index == 1);
    CHECK(plan(p) == NULL); /* two in flight */
    answer(p, 5);
    CHECK(num_events == 1 && events[0].token == 5 && events[0].finish == FOLIO_FINISH_NONE);
    v = plan(p);
    CHECK(v && v->seqs[0].output_index == 2 && v->token_ids[0] == FOLIO_TOKEN_FROM_PREV);
    answer(p, 6);
    /* Three outputs planned = max_tokens: nothing more to plan. */
    CHECK(plan(p) == NULL);
    CHECK(!folio_policy_has_work(p));
    answer(p, 7);
    CHECK(num_events == 3 && events[2].finish == FOLIO_FINISH_LENGTH && events[2].completion == 3);
    CHECK(folio_policy_idle(p));
    struct folio_policy_stats st;
    folio_policy_stats(p, &st);
    CHECK(st.kv_blocks_used == 0 && st.requests_finished == 1);
    checked(p);
    folio_policy_destroy(p);
}

static void test_stop_one_step_late(void)
{
    struct folio_policy *p = make(4, 64, 16, 256);
    submit(p, 1, 5, 10, 100);
    plan(p);
    plan(p);
    answer(p, 2); /* EOS */
    CHECK(num_events == 1 && events[0].finish == FOLIO_FINISH_STOP);
    CHECK(!folio_policy_idle(p)); /* step 2 still uses its blocks */
    checked(p);
    CHECK(plan(p) == NULL);
    answer(p, 9); /* the extra token: discarded */
    CHECK(num_events == 1);
    CHECK(folio_policy_idle(p));
    struct folio_policy_stats st;
    folio_policy_stats(p, &st);
    CHECK(st.tokens_discarded == 1 && st.kv_blocks_used == 0);
    folio_policy_destroy(p);
}

static void test_min_tokens_and_stop_ids(void)
{
    struct folio_policy *p = make(4, 64, 16, 256);
    int32_t prompt[4] = {10, 11, 12, 13}, stops[1] = {77};
    struct folio_request r = {
        .request_id = 3,
        .prompt = prompt,
        .num_prompt = 4,
        .params = {.max_tokens = 10, .min_tokens = 2, .stop_ids = stops, .num_stop_ids = 1}};
    folio_policy_submit(p, &r);
    const struct folio_plan_view *v = plan(p);
    /* Below min_tokens EOS and the stop ids are banned in the sampler. */
    CHECK(v->hdr->num_bias == 2 && v->seqs[0].num_bias == 2);
    CHECK(v->bias[0].token == 2 && v->bias[1].token == 77 && isinf(v->bias[0].value) &&
          v->bias[1].value < 0);
    v = plan(p);
    CHECK(v->seqs[0].output_index == 1 && v->seqs[0].num_bias == 2);
    answer(p, 2); /* EOS before min_tokens (as if sampled anyway): goes on */
    CHECK(events[0].finish == FOLIO_FINISH_NONE);
    plan(p);
    CHECK(plans_count == 2);
    answer(p, 77); /* stop id, min reached */
    CHECK(num_events == 2 && events[1].finish == FOLIO_FINISH_STOP && events[1].token == 77);
    answer(p, 1);
    CHECK(folio_policy_idle(p));
    folio_policy_destroy(p);
}

static void test_chunked_prefill_decodes_first(void)
{
    struct folio_policy *p = make(4, 16, 32, 256);
    submit(p, 1, 4, 10, 50);
    plan(p);
    answer(p, 5);
    submit(p, 2, 40, 100, 5);
    const struct folio_plan_view *v = plan(p);
    /* The decode first, then a 15-token chunk of the new prompt. */
    CHECK(v && v->hdr->num_seqs == 2 && v->seqs[0].request_id == 1 &&
          v->seqs[0].num_new_tokens == 1);
    CHECK(v->seqs[1].request_id == 2 && v->seqs[1].num_new_tokens == 15 && !v->seqs[1].sample);
    CHECK(v->hdr->num_tokens <= 16);
    answer(p, 5);
    v = plan(p);
    CHECK(v && v->seqs[1].num_new_tokens == 15 && v->seqs[1].context_len == 30);
    answer(p, 5);
    v = plan(p);
    CHECK(v && v->seqs[1].num_new_tokens == 10 && v->seqs[1].sample);
    folio_policy_destroy(p);
}

static void test_whole_prompts_without_chunks(void)
{
    struct folio_policy_config bad = {.disable_chunked_prefill = true,
                                      .max_num_seqs = 4,
                                      .max_num_batched_tokens = 32,
                                      .num_kv_blocks = 32,
                                      .max_model_len = 64,
                                      .vocab_size = 1000,
                                      .max_waiting_requests = 4};
    struct folio_policy *p;
    char err[256] = "";
    CHECK(folio_policy_create(&bad, on_event, NULL, &p, err, sizeof err) != 0 &&
          strstr(err, "--max-num-batched-tokens"));

    no_chunks = true;
    p = make(4, 64, 32, 64);
    submit(p, 1, 4, 10, 20);
    submit(p, 2, 4, 20, 20);
    plan(p);
    answer(p, 5);
    submit(p, 3, 63, 100, 1);
    submit(p, 4, 3, 300, 1);
    /* Two decodes leave 62 tokens: the 63-token prompt waits whole, and the one behind it too. */
    const struct folio_plan_view *v = plan(p);
    CHECK(v && v->hdr->num_seqs == 2 && v->hdr->num_tokens == 2);
    answer(p, 5);
    folio_policy_abort(p, 2);
    v = plan(p);
    CHECK(v && v->hdr->num_seqs == 2 && v->seqs[1].request_id == 3 &&
          v->seqs[1].num_new_tokens == 63 && v->seqs[1].sample);
    CHECK(v->hdr->num_tokens == 64);
    checked(p);
    folio_policy_destroy(p);
    no_chunks = false;
}

static void test_serial_steps(void)
{
    serial = true;
    struct folio_policy *p = make(4, 64, 16, 256);
    submit(p, 1, 20, 10, 3);
    CHECK(plan(p) != NULL);
    CHECK(!folio_policy_has_work(p) && plan(p) == NULL); /* one step in flight */
    answer(p, 5);
    const struct folio_plan_view *v = plan(p);
    /* Planned after the token came back: the token itself, never FROM_PREV. */
    CHECK(v && v->hdr->num_tokens == 1 && v->token_ids[0] == 5 && v->seqs[0].output_index == 1);
    answer(p, 6);
    plan(p);
    answer(p, 7);
    CHECK(num_events == 3 && events[2].finish == FOLIO_FINISH_LENGTH);
    CHECK(folio_policy_idle(p));
    folio_policy_destroy(p);
    serial = false;
}

static void test_prefix_cache(void)
{
    struct folio_policy *p = make(4, 256, 32, 256);
    submit(p, 1, 40, 10, 1);
    plan(p);
    answer(p, 5);
    CHECK(folio_policy_idle(p));
    submit(p, 2, 45, 10, 1); /* same first 40 tokens: two full blocks cached */
    const struct folio_plan_view *v = plan(p);
    CHECK(v && v->seqs[0].num_new_tokens == 13 && v->seqs[0].context_len == 45);
    answer(p, 5);
    CHECK(num_events == 2 && events[1].cached == 32);
    struct folio_policy_stats st;
    folio_policy_stats(p, &st);
    CHECK(st.prefix_cache_hits == 32 && st.prefix_cache_queries == 85);
    /* A whole-prompt hit still computes the last token. */
    submit(p, 3, 32, 10, 1);
    v = plan(p);
    CHECK(v && v->seqs[0].num_new_tokens == 16);
    answer(p, 5);
    checked(p);
    folio_policy_destroy(p);
}

static void test_preemption(void)
{
    /* 5 blocks: two 30-token prompts take 2 each; growing past 32 tokens
     * needs a third each, so the newest is preempted and recomputed later. */
    struct folio_policy *p = make(4, 64, 5, 80);
    submit(p, 1, 30, 10, 6);
    submit(p, 2, 30, 500, 6);
    int steps = 0;
    while (!folio_policy_idle(p) && steps < 100) {
        while (plan(p))
            ;
        if (plans_count)
            answer(p, 9);
        checked(p);
        steps++;
    }
    struct folio_policy_stats st;
    folio_policy_stats(p, &st);
    CHECK(folio_policy_idle(p));
    CHECK(st.num_preemptions >= 1);
    CHECK(st.requests_finished == 2 && st.kv_blocks_used == 0);
    int finished = 0, tokens = 0;
    for (int i = 0; i < num_events; i++) {
        finished += events[i].finish == FOLIO_FINISH_LENGTH;
        tokens += events[i].num_tokens;
    }
    CHECK(finished == 2 && tokens == 12); /* nothing lost or repeated */
    folio_policy_destroy(p);
}

static void submit_constrained(struct folio_policy *p, uint64_t id, int n, int first,
                               int max_tokens, const char *regex)
{
    int32_t prompt[64];
    for (int i = 0; i < n; i++)
        prompt[i] = first + i;
    struct folio_request r = {
        .request_id = id,
        .frontend_id = 1,
        .prompt = prompt,
        .num_prompt = n,
        .params = {.max_tokens = max_tokens,
                   .min_tokens = 2,
                   .ignore_eos = true,
                   .grammar = {true, FOLIO_GRAMMAR_REGEX, regex, (int32_t)strlen(regex)}}};
    folio_policy_submit(p, &r);
}

/* A constrained sequence's plan entries name its grammar; the first sampling entry on each slot
 * brings the text and the tokens generated so far (none at first, all of them when a preempted
 * sequence is recomputed), every other entry neither. min_tokens bans no EOS of a constrained
 * sequence and ignore_eos does not keep an EOS from ending it: the grammar decides. */
static void test_grammar_travels_with_the_plan(void)
{
    struct folio_policy *p = make(4, 64, 5, 80);
    submit_constrained(p, 1, 30, 10, 6, "[a-z]+");
    submit_constrained(p, 2, 30, 500, 6, "x{1,9}");
    int outputs[3] = {0}, news[3] = {0}, replays[3] = {0}, steps = 0;
    while (!folio_policy_idle(p) && steps++ < 100) {
        const struct folio_plan_view *v;
        while ((v = plan(p))) {
            CHECK(v->hdr->num_grammar_bytes <= FOLIO_MAX_GRAMMAR_BYTES);
            for (int i = 0; i < v->hdr->num_seqs; i++) {
                const struct folio_plan_seq *q = &v->seqs[i];
                int id = q->request_id == 1 ? 1 : 2;
                const char *want = id == 1 ? "[a-z]+" : "x{1,9}";
                CHECK(q->grammar_kind == FOLIO_GRAMMAR_REGEX);
                for (int b = 0; b < q->num_bias; b++)
                    CHECK(v->bias[q->bias_offset + b].token != 2); /* EOS never banned */
                if (!q->grammar_new)
                    continue;
                CHECK(q->sample);
                CHECK(q->grammar_len == (int)strlen(want) &&
                      !memcmp(v->grammar_text + q->grammar_offset, want, strlen(want)));
                CHECK(q->num_replay == outputs[id]);
                for (int k = 0; k < q->num_replay; k++)
                    CHECK(v->replay[q->replay_offset + k] == 9);
                news[id]++;
                replays[id] += q->num_replay > 0;
            }
        }
        if (plans_count) {
            const struct folio_plan_header *h = (const void *)plans[plans_head];
            const struct folio_plan_seq *qs = (const void *)(h + 1);
            for (int i = 0; i < h->num_seqs; i++)
                outputs[qs[i].request_id == 1 ? 1 : 2] += qs[i].sample;
            answer(p, 9);
        }
        checked(p);
    }
    struct folio_policy_stats st;
    folio_policy_stats(p, &st);
    CHECK(st.num_preemptions >= 1);
    CHECK(news[1] >= 1 && news[2] >= 1);
    CHECK(news[1] + news[2] == 2 + (int)st.num_preemptions); /* once per admission */
    CHECK(replays[1] + replays[2] >= 1);                     /* a recompute replayed */
    folio_policy_destroy(p);

    /* An EOS ends a constrained sequence despite ignore_eos. */
    p = make(4, 64, 16, 256);
    submit_constrained(p, 3, 20, 10, 50, "a+");
    CHECK(plan(p) != NULL);
    answer(p, 7);
    CHECK(plan(p) != NULL);
    answer(p, 2);
    CHECK(num_events == 2 && events[1].finish == FOLIO_FINISH_STOP);
    checked(p);
    folio_policy_destroy(p);
}

static void test_admission(void)
{
    struct folio_policy *p = make(4, 64, 16, 100);
    submit(p, 1, 200, 0, 1);
    CHECK(num_events == 1 && events[0].finish == FOLIO_FINISH_REJECTED && events[0].status == 400);
    for (uint64_t id = 10; id < 14; id++)
        submit(p, id, 10, 0, 1);
    CHECK(num_events == 1);
    submit(p, 20, 10, 0, 1); /* a fifth waiting request */
    CHECK(num_events == 2 && events[1].status == 429 && events[1].retry >= 1);
    submit(p, 10, 10, 0, 1); /* a live id */
    CHECK(num_events == 3 && events[2].status == 409);
    folio_policy_destroy(p);
}

/* The client's logit bias rides with every sampling entry; a bad one is a 400. */
static void test_logit_bias(void)
{
    struct folio_policy *p = make(4, 64, 16, 256);
    int32_t prompt[3] = {10, 11, 12};
    struct folio_logit_bias bias[2] = {{5, 100.0f}, {999, -100.0f}};
    struct folio_request r = {.request_id = 1,
                              .prompt = prompt,
                              .num_prompt = 3,
                              .params = {.max_tokens = 4, .logit_bias = bias, .num_logit_bias = 2}};
    folio_policy_submit(p, &r);
    const struct folio_plan_view *v = plan(p);
    CHECK(v->seqs[0].num_bias == 2 && v->bias[0].token == 5 && v->bias[1].value == -100.0f);
    bias[1].token = 1000; /* the vocabulary is 1000 */
    r.request_id = 2;
    folio_policy_submit(p, &r);
    CHECK(num_events == 1 && events[0].id == 2 && events[0].finish == FOLIO_FINISH_REJECTED &&
          events[0].status == 400);
    folio_policy_destroy(p);
}

/* Requests with one prompt admitted in one step (a request's n samples)
 * share its full blocks: the later ones compute only the partial last block. */
static void test_same_step_prefix_sharing(void)
{
    struct folio_policy *p = make(4, 256, 32, 256);
    for (uint64_t id = 1; id <= 3; id++)
        submit(p, id, 40, 100, 2);
    const struct folio_plan_view *v = plan(p);
    CHECK(v && v->hdr->num_seqs == 3 && v->hdr->num_tokens == 40 + 8 + 8);
    CHECK(v->seqs[1].context_len == 40 && v->seqs[1].num_new_tokens == 8);
    CHECK(v->block_ids[0] == v->block_ids[3] && v->block_ids[1] == v->block_ids[4]);
    CHECK(v->block_ids[2] != v->block_ids[5]); /* the partial block is each one's own */
    struct folio_policy_stats st;
    folio_policy_stats(p, &st);
    CHECK(st.prompt_tokens_computed == 56);
    checked(p);
    folio_policy_destroy(p);
}

static void test_abort_in_flight(void)
{
    struct folio_policy *p = make(4, 64, 16, 256);
    submit(p, 1, 20, 10, 50);
    submit(p, 2, 20, 40, 50);
    plan(p);
    folio_policy_abort(p, 2); /* in step 1: freed when it returns */
    folio_policy_abort(p, 2); /* twice: ignored */
    CHECK(num_events == 1 && events[0].finish == FOLIO_FINISH_ABORT);
    struct folio_policy_stats st;
    folio_policy_stats(p, &st);
    CHECK(st.kv_blocks_used == 4);
    checked(p);
    const struct folio_plan_view *v = plan(p);
    CHECK(v && v->hdr->num_seqs == 1);
    answer(p, 5);
    folio_policy_stats(p, &st);
    CHECK(st.kv_blocks_used == 2);
    CHECK(num_events == 2 && events[1].id == 1);
    checked(p);
    folio_policy_fail_all(p, 503, "worker exited: killed by signal 9");
    CHECK(num_events == 3 && events[2].id == 1 && events[2].finish == FOLIO_FINISH_ERROR &&
          events[2].status == 503);
    CHECK(folio_policy_idle(p));
    folio_policy_stats(p, &st);
    CHECK(st.kv_blocks_used == 0);
    checked(p);
    folio_policy_destroy(p);
}

/* A worker died: the requests that have had output end with 503; one that
 * has sent nothing yet (prefilling, or still waiting) runs again on the next
 * worker from its first token, and a second death ends it. */
static void test_worker_lost_requeues_silent_requests(void)
{
    struct folio_policy *p = make(3, 64, 16, 256);
    submit(p, 1, 20, 10, 10);
    submit(p, 2, 20, 40, 10);
    plan(p);
    answer(p, 5); /* 1 and 2 have sent a token */
    submit(p, 3, 20, 70, 10);
    submit(p, 4, 20, 100, 10); /* no slot: waits */
    const struct folio_plan_view *v = plan(p);
    CHECK(v && v->hdr->num_seqs == 3 && v->seqs[2].request_id == 3);
    CHECK(num_events == 2);
    folio_policy_worker_lost(p, 503, "worker exited: killed by signal 9");
    plans_head = plans_count = 0; /* the dead worker's steps are void */
    CHECK(num_events == 4);
    for (int i = 2; i < 4; i++)
        CHECK(events[i].finish == FOLIO_FINISH_ERROR && events[i].status == 503 &&
              (events[i].id == 1 || events[i].id == 2));
    struct folio_policy_stats st;
    folio_policy_stats(p, &st);
    CHECK(st.num_waiting == 2 && st.num_running == 0 && st.kv_blocks_used == 0 &&
          st.inflight_steps == 0 && st.requests_finished == 2);
    checked(p);
    v = plan(p); /* 3 again from its first token, then 4 */
    CHECK(v && v->hdr->num_seqs == 2 && v->seqs[0].request_id == 3 &&
          v->seqs[0].context_len == 20 && v->seqs[0].num_new_tokens == 20 &&
          v->seqs[1].request_id == 4);
    checked(p);
    folio_policy_worker_lost(p, 503, "worker exited: killed by signal 9");
    plans_head = plans_count = 0;
    CHECK(num_events == 5 && events[4].id == 3 && events[4].finish == FOLIO_FINISH_ERROR);
    checked(p);
    v = plan(p); /* 4 died once: it runs again */
    CHECK(v && v->hdr->num_seqs == 1 && v->seqs[0].request_id == 4);
    answer(p, 6);
    CHECK(num_events == 6 && events[5].id == 4 && events[5].token == 6);
    checked(p);
    folio_policy_destroy(p);
}

/* A short request that arrives while a long prompt is in prefill starts in the
 * next step, beside the long prompt's chunk; a prompt admitted in part then
 * shares the prefill tokens with the long one instead of waiting for its end. */
static void test_short_request_beside_long_prefill(void)
{
    serial = true;
    struct folio_policy *p = make(4, 64, 64, 1024);
    submit(p, 1, 500, 10, 1);
    const struct folio_plan_view *v = plan(p);
    CHECK(v && v->hdr->num_seqs == 1 && v->seqs[0].num_new_tokens == 64);
    answer(p, 5);
    submit(p, 2, 5, 600, 2);
    /* Half the prompt tokens to the running prefill, the rest to admissions,
     * and what they leave back to the running one. */
    v = plan(p);
    CHECK(v && v->hdr->num_seqs == 2 && v->hdr->num_tokens == 64);
    CHECK(v->seqs[0].request_id == 1 && v->seqs[0].num_new_tokens == 59 &&
          v->seqs[0].context_len == 123);
    CHECK(v->hdr->num_seqs == 2 && v->seqs[1].request_id == 2 && v->seqs[1].num_new_tokens == 5 &&
          v->seqs[1].sample);
    answer(p, 5);
    CHECK(num_events == 1 && events[0].id == 2);
    submit(p, 3, 100, 700, 1);
    /* The decode first; 32 of the 63 left to the long prompt, 31 to the newcomer. */
    v = plan(p);
    CHECK(v && v->hdr->num_seqs == 3 && v->hdr->num_tokens == 64);
    CHECK(v->seqs[0].request_id == 2 && v->seqs[0].num_new_tokens == 1);
    CHECK(v->hdr->num_seqs == 3 && v->seqs[1].request_id == 1 && v->seqs[1].num_new_tokens == 32);
    CHECK(v->hdr->num_seqs == 3 && v->seqs[2].request_id == 3 && v->seqs[2].num_new_tokens == 31);
    answer(p, 5);
    CHECK(num_events == 2 && events[1].id == 2 && events[1].finish == FOLIO_FINISH_LENGTH);
    /* Nothing waits: the two prompts in prefill share the step equally. */
    v = plan(p);
    CHECK(v && v->hdr->num_seqs == 2 && v->hdr->num_tokens == 64);
    CHECK(v->seqs[0].request_id == 1 && v->seqs[0].num_new_tokens == 32);
    CHECK(v->hdr->num_seqs == 2 && v->seqs[1].request_id == 3 && v->seqs[1].num_new_tokens == 32);
    answer(p, 5);
    /* Request 3 needs 37 more: 32 each, then its last 5 and 27 for the long one. */
    v = plan(p);
    CHECK(v && v->seqs[0].num_new_tokens == 32 && v->seqs[1].num_new_tokens == 32);
    answer(p, 5);
    v = plan(p);
    CHECK(v && v->hdr->num_seqs == 2 && v->seqs[0].num_new_tokens == 59);
    CHECK(v->hdr->num_seqs == 2 && v->seqs[1].request_id == 3 && v->seqs[1].num_new_tokens == 5 &&
          v->seqs[1].sample);
    answer(p, 5);
    checked(p);
    folio_policy_destroy(p);
    serial = false;
}

/* With a step target, a step's prompt tokens are what the worker ran in that
 * time lately: one block's worth before anything is measured, then following
 * the backend time of the steps that come back, up to the token budget. */
static void test_chunks_follow_measured_speed(void)
{
    serial = true;
    struct folio_policy_config cfg = {.serial_steps = true,
                                      .max_num_seqs = 4,
                                      .max_num_batched_tokens = 2048,
                                      .num_kv_blocks = 1024,
                                      .max_model_len = 16384,
                                      .vocab_size = 1000,
                                      .max_waiting_requests = 4,
                                      .max_pending_prompt_tokens = 100000,
                                      .eos_ids = {2},
                                      .num_eos_ids = 1,
                                      .seed = 7,
                                      .step_target_seconds = 0.5};
    struct folio_policy *p;
    char err[256];
    CHECK(folio_policy_create(&cfg, on_event, NULL, &p, err, sizeof err) == 0);
    num_events = 0;
    plans_head = plans_count = 0;
    submit(p, 1, 10000, 10, 1);
    const struct folio_plan_view *v = plan(p);
    CHECK(v && v->hdr->num_tokens == 16); /* nothing measured yet */
    answer_seconds = 0.16;                /* 100 tokens/s */
    answer(p, 5);
    v = plan(p);
    CHECK(v && v->hdr->num_tokens == 50);
    answer_seconds = 0.05; /* ten times faster: the chunks grow to 500 within a few steps */
    answer(p, 5);
    int n = 0;
    for (int i = 0; i < 8; i++) {
        v = plan(p);
        n = v ? v->hdr->num_tokens : 0;
        answer_seconds = n / 1000.0;
        answer(p, 5);
    }
    CHECK(n >= 490 && n <= 500);
    for (int i = 0; i < 4; i++) { /* a GPU: the token budget decides */
        v = plan(p);
        n = v ? v->hdr->num_tokens : 0;
        answer_seconds = n / 1e6;
        answer(p, 5);
    }
    CHECK(n == 2048);
    answer_seconds = 0;
    checked(p);
    folio_policy_destroy(p);
    serial = false;
}

int main(void)
{
    test_pipeline_and_length();
    test_stop_one_step_late();
    test_min_tokens_and_stop_ids();
    test_chunked_prefill_decodes_first();
    test_whole_prompts_without_chunks();
    test_serial_steps();
    test_prefix_cache();
    test_preemption();
    test_admission();
    test_abort_in_flight();
    test_worker_lost_requeues_silent_requests();
    test_logit_bias();
    test_same_step_prefix_sharing();
    test_short_request_beside_long_prefill();
    test_chunks_follow_measured_speed();
    test_grammar_travels_with_the_plan();
    return check_report();
}
