/* The scheduler's policy against the simulated worker at 10,000 requests:
 * plans go through the real plan/result records and the worker's step_io
 * conversions, two steps in flight, and the sim backend checks the KV chain
 * of every sequence it runs. Checked on the way:
 *   - every request finishes exactly once, and never gets a token after;
 *   - token counts agree with completion_tokens and respect max_tokens;
 *   - the token budget and the slot count of every step;
 *   - decodes are never starved: a generating sequence is in every step
 *     until it finishes, unless that step preempted something;
 *   - preemption happens when blocks run out, aborts free their blocks,
 *     the books balance (folio_policy_check) and no block leaks at the end;
 *   - with a step target (the worker's modelled step times fed back as its
 *     backend time), prompts are chunked to that time: no step with more
 *     prompt tokens than the one-block floor runs much past the target.
 * Prints the plan time per step at 256 running sequences. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "ipc_records.h"
#include "policy.h"
#include "sim_backend.h"
#include "step_io.h"

#define NUM_REQUESTS 10000
#define VOCAB 32000
#define EOS 2

struct req_state {
    int max_tokens, min_tokens, prompt_len;
    int tokens, finishes, planned_samples;
    bool finished, aborted, in_last_plan_sampling;
    uint32_t last_completion;
};

static struct req_state reqs[NUM_REQUESTS + 1];
static int event_errors;
static int stop_token = 12345;

static void on_event(void *ctx, const struct folio_token_event *e)
{
    (void)ctx;
    if (e->request_id == 0 || e->request_id > NUM_REQUESTS) {
        event_errors++;
        return;
    }
    struct req_state *r = &reqs[e->request_id];
    if (r->finished) {
        event_errors++; /* an event after the finish */
        fprintf(stderr, "request %llu: event after its finish\n",
                (unsigned long long)e->request_id);
        return;
    }
    r->tokens += e->num_tokens;
    if ((int)e->completion_tokens != r->tokens && e->finish != FOLIO_FINISH_ABORT)
        event_errors++;
    if (r->tokens > r->max_tokens)
        event_errors++;
    if (e->finish == FOLIO_FINISH_STOP) {
        int32_t t = e->token_ids[e->num_tokens - 1];
        if ((t != EOS && t != stop_token) || r->tokens < r->min_tokens)
            event_errors++;
    }
    if (e->finish == FOLIO_FINISH_LENGTH && r->tokens != r->max_tokens)
        event_errors++;
    if (e->finish != FOLIO_FINISH_NONE) {
        r->finished = true;
        r->finishes++;
    }
}

struct driver {
    struct folio_policy *p;
    struct folio_backend *sim;
    struct folio_step_io io;
    int32_t inflight_logprobs[2][1024];
    char plan_copy[2][1 << 20];
    int budget, max_seqs;
    uint64_t steps;
    double plan_seconds;
    double step_us[2];    /* the modelled time of each step in flight */
    bool feed_time;       /* the modelled time goes back as the result's backend_ns */
    double target_us;     /* the policy's step target */
    int prompt_tokens[2]; /* prompt (not decode) tokens of each step in flight */
    uint64_t timed_steps, over_target;
    double max_over_us;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Plans and launches one step; false when there was nothing to plan. */
static bool step_launch(struct driver *d, int k)
{
    struct folio_policy_stats before;
    folio_policy_stats(d->p, &before);
    const void *rec;
    size_t len;
    double t0 = now_s();
    int n = folio_policy_plan(d->p, 0, &rec, &len);
    d->plan_seconds += now_s() - t0;
    if (n == 0)
        return false;
    d->steps++;
    memcpy(d->plan_copy[k], rec, len);
    struct folio_plan_view v;
    char err[256];
    CHECK(folio_plan_decode(d->plan_copy[k], len, &v, err, sizeof err) == 0);
    CHECK(v.hdr->num_tokens <= d->budget);
    CHECK(v.hdr->num_seqs <= d->max_seqs);
    struct folio_policy_stats after;
    folio_policy_stats(d->p, &after);
    bool preempted = after.num_preemptions > before.num_preemptions;
    /* Starvation: who sampled in the previous plan and can still sample
     * must be here, unless this plan preempted. */
    static bool here[NUM_REQUESTS + 1];
    for (int i = 0; i < v.hdr->num_seqs; i++)
        here[v.seqs[i].request_id] = true;
    for (int id = 1; id <= NUM_REQUESTS; id++) {
        struct req_state *r = &reqs[id];
        if (r->in_last_plan_sampling && !here[id] && !r->finished && !preempted &&
            r->planned_samples < r->max_tokens) {
            fprintf(stderr, "request %d starved in step %llu\n", id,
                    (unsigned long long)v.hdr->step_id);
            event_errors++;
        }
        r->in_last_plan_sampling = false;
    }
    for (int i = 0; i < v.hdr->num_seqs; i++) {
        here[v.seqs[i].request_id] = false;
        if (v.seqs[i].sample) {
            reqs[v.seqs[i].request_id].in_last_plan_sampling = true;
            reqs[v.seqs[i].request_id].planned_samples++;
        }
    }
    struct folio_step_batch batch;
    CHECK(folio_step_io_batch(&d->io, &v, NULL, false, &batch, err, sizeof err) == 0);
    memcpy(d->inflight_logprobs[k], d->io.num_logprobs, (size_t)v.hdr->num_seqs * 4);
    double us0 = folio_sim_backend_modelled_us(d->sim);
    int rc = d->sim->ops->launch(d->sim, &batch, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    CHECK(rc == 0);
    d->step_us[k] = folio_sim_backend_modelled_us(d->sim) - us0;
    d->prompt_tokens[k] = 0;
    for (int i = 0; i < v.hdr->num_seqs; i++)
        if (v.seqs[i].num_new_tokens > 1 || !v.seqs[i].sample || v.seqs[i].output_index == 0)
            d->prompt_tokens[k] += v.seqs[i].num_new_tokens;
    /* Past the first steps (nothing measured yet), a step with more prompt
     * tokens than the floor is sized by the measured speed. */
    if (d->target_us > 0 && d->steps > 8 && d->prompt_tokens[k] > 16) {
        d->timed_steps++;
        double over = d->step_us[k] - d->target_us;
        if (over > 0)
            d->over_target++;
        if (over > d->max_over_us)
            d->max_over_us = over;
    }
    return true;
}

static void step_collect(struct driver *d, int k)
{
    char err[256];
    const struct folio_plan_header *h = (const void *)d->plan_copy[k];
    CHECK(d->sim->ops->collect(d->sim, &d->io.res, err, sizeof err) == 0);
    uint64_t backend_ns = d->feed_time ? (uint64_t)(d->step_us[k] * 1000) : 0;
    size_t len = folio_step_io_encode_result(&d->io, NULL, h, h->num_seqs, d->inflight_logprobs[k],
                                             NULL, backend_ns);
    struct folio_result_view rv;
    CHECK(folio_result_decode(d->io.result_buf, len, &rv, err, sizeof err) == 0);
    int rc = folio_policy_apply_result(d->p, &rv, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    CHECK(rc == 0);
}

static void driver_init(struct driver *d, int seqs, int budget, int blocks, int max_len,
                        bool no_chunks, bool serial, double target_us)
{
    memset(d, 0, sizeof *d);
    d->budget = budget;
    d->max_seqs = seqs;
    d->target_us = target_us;
    d->feed_time = target_us > 0;
    struct folio_policy_config cfg = {.disable_chunked_prefill = no_chunks,
                                      .serial_steps = serial,
                                      .max_num_seqs = seqs,
                                      .max_num_batched_tokens = budget,
                                      .num_kv_blocks = blocks,
                                      .max_model_len = max_len,
                                      .vocab_size = VOCAB,
                                      .max_waiting_requests = NUM_REQUESTS,
                                      .max_pending_prompt_tokens = 1 << 30,
                                      .eos_ids = {EOS},
                                      .num_eos_ids = 1,
                                      .seed = 1,
                                      .step_target_seconds = target_us * 1e-6};
    char err[256];
    CHECK(folio_policy_create(&cfg, on_event, NULL, &d->p, err, sizeof err) == 0);
    struct folio_backend_options bo = {
        .max_seqs = seqs, .max_num_tokens = budget, .num_kv_blocks = blocks};
    struct folio_sim_options so;
    folio_sim_options_default(&so);
    so.vocab_size = VOCAB;
    so.eos_id = EOS;
    so.eos_probability = 0.02;
    CHECK(folio_sim_backend_create(&bo, &so, &d->sim, err, sizeof err) == 0);
    CHECK(folio_step_io_init(&d->io, seqs, budget, err, sizeof err) == 0);
}

static void driver_free(struct driver *d)
{
    d->sim->ops->destroy(d->sim);
    folio_step_io_free(&d->io);
    folio_policy_destroy(d->p);
}

/* Runs until idle, feeding 8 new requests each step; one abort per 50 submits.
 * The ablations (whole prompts, one step in flight) keep the same books. */
static void run_10k(const char *name, bool no_chunks, bool serial, double target_us)
{
    struct driver d;
    memset(reqs, 0, sizeof reqs);
    /* A pool too small for 128 long sequences: preemption must happen. */
    driver_init(&d, 128, no_chunks ? 4096 : 2048, 1200, 4096, no_chunks, serial, target_us);
    uint64_t rng = 42;
    int next = 1, k = 0, inflight = 0;
    /* Five shared "system prompts" so that the prefix cache has hits. */
    int32_t prompt[2048];
    double t0 = now_s();
    while (next <= NUM_REQUESTS || !folio_policy_idle(d.p)) {
        for (int j = 0; j < 8 && next <= NUM_REQUESTS; j++, next++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            struct req_state *r = &reqs[next];
            r->prompt_len = 1 + (int)((rng >> 33) % 700);
            int sys = (int)((rng >> 20) % 6);
            for (int i = 0; i < r->prompt_len; i++)
                prompt[i] = (sys < 5 && i < 64)
                                ? 1000 * (sys + 1) + i
                                : (int32_t)(((rng >> 7) + (uint64_t)i * 31) % VOCAB);
            r->max_tokens = 1 + (int)((rng >> 45) % 300);
            r->min_tokens = (next % 7 == 0) ? r->max_tokens / 2 : 0;
            int32_t stops[1] = {stop_token};
            struct folio_request q = {.request_id = (uint64_t)next,
                                      .frontend_id = 1,
                                      .prompt = prompt,
                                      .num_prompt = r->prompt_len,
                                      .params = {.max_tokens = r->max_tokens,
                                                 .min_tokens = r->min_tokens,
                                                 .stop_ids = stops,
                                                 .num_stop_ids = 1,
                                                 .ignore_eos = next % 5 == 0}};
            q.params.sampling.top_p = 1.0f; /* as the scheduler's submit sets them */
            q.params.sampling.repetition_penalty = 1.0f;
            q.params.sampling.temperature = next % 3 == 0 ? 0.0f : 0.8f;
            q.params.sampling.num_logprobs = next % 11 == 0 ? 3 : 0;
            folio_policy_submit(d.p, &q);
            if (next % 50 == 0 && next > 20)
                folio_policy_abort(d.p, (uint64_t)(next - 20)); /* may be running or done */
        }
        while (inflight < 2 && step_launch(&d, (k + inflight) % 2))
            inflight++;
        if (inflight == 0)
            continue;
        step_collect(&d, k);
        k = (k + 1) % 2;
        inflight--;
        if (d.steps % 97 == 0) {
            char err[256];
            int rc = folio_policy_check(d.p, err, sizeof err);
            if (rc)
                fprintf(stderr, "%s\n", err);
            CHECK(rc == 0);
        }
    }
    double wall = now_s() - t0;
    int done_once = 0, aborted = 0;
    for (int id = 1; id <= NUM_REQUESTS; id++)
        done_once += reqs[id].finishes == 1;
    struct folio_policy_stats st;
    folio_policy_stats(d.p, &st);
    aborted = (int)st.requests_aborted;
    CHECK(done_once == NUM_REQUESTS);
    CHECK(event_errors == 0);
    CHECK(st.kv_blocks_used == 0);
    CHECK(st.num_preemptions > 0);
    CHECK(st.prefix_cache_hits > 0);
    CHECK(aborted > 0);
    char err[256];
    CHECK(folio_policy_check(d.p, err, sizeof err) == 0);
    printf(
        "10k requests (%s): %.2f s wall, %llu steps, %.1f us plan/step, modelled GPU time %.1f s, "
        "%llu preemptions, prefix hits %llu of %llu tokens, %d aborted, %llu tokens "
        "discarded one step late\n",
        name, wall, (unsigned long long)d.steps, d.plan_seconds / d.steps * 1e6,
        folio_sim_backend_modelled_us(d.sim) / 1e6, (unsigned long long)st.num_preemptions,
        (unsigned long long)st.prefix_cache_hits, (unsigned long long)st.prefix_cache_queries,
        aborted, (unsigned long long)st.tokens_discarded);
    if (target_us > 0) {
        /* A full budget's step would take about twice the target: the time bounds them. */
        CHECK(d.timed_steps > 1000);
        CHECK(d.max_over_us < 0.1 * target_us);
        CHECK(d.over_target * 100 < d.timed_steps);
        printf("  %llu steps sized by time, %llu past the %.0f us target, by %.0f us at most\n",
               (unsigned long long)d.timed_steps, (unsigned long long)d.over_target, target_us,
               d.max_over_us);
    }
    driver_free(&d);
}

/* Plan time with 256 sequences decoding (the steady state that matters). */
static void bench_plan_256(void)
{
    memset(reqs, 0, sizeof reqs);
    struct driver d;
    driver_init(&d, 256, 8192, 256 * 80, 2048, false, false, 0);
    int32_t prompt[512];
    for (int id = 1; id <= 256; id++) {
        for (int i = 0; i < 500; i++)
            prompt[i] = (id * 7919 + i) % VOCAB;
        reqs[id].max_tokens = 600;
        struct folio_request q = {.request_id = (uint64_t)id,
                                  .prompt = prompt,
                                  .num_prompt = 500,
                                  .params = {.max_tokens = 600, .ignore_eos = true}};
        q.params.sampling.top_p = 1.0f;
        q.params.sampling.repetition_penalty = 1.0f;
        folio_policy_submit(d.p, &q);
    }
    int k = 0, inflight = 0;
    for (int s = 0; s < 20; s++) { /* prefill */
        while (inflight < 2 && step_launch(&d, (k + inflight) % 2))
            inflight++;
        step_collect(&d, k);
        k = (k + 1) % 2;
        inflight--;
    }
    d.plan_seconds = 0;
    uint64_t steps0 = d.steps;
    for (int s = 0; s < 400; s++) {
        while (inflight < 2 && step_launch(&d, (k + inflight) % 2))
            inflight++;
        step_collect(&d, k);
        k = (k + 1) % 2;
        inflight--;
    }
    struct folio_policy_stats st;
    folio_policy_stats(d.p, &st);
    CHECK(st.num_running == 256);
    printf("plan time at %d running sequences: %.1f us per step (%llu steps)\n", st.num_running,
           d.plan_seconds / (double)(d.steps - steps0) * 1e6,
           (unsigned long long)(d.steps - steps0));
    driver_free(&d);
}

int main(void)
{
    run_10k("default", false, false, 0);
    run_10k("whole prompts", true, false, 0);
    run_10k("one step in flight", false, true, 0);
    run_10k("steps of 2 ms", false, false, 2000);
    bench_plan_256();
    return check_report();
}
