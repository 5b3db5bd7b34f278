/* The CPU sampler: greedy, the filters, per-request seeds and the
 * distribution its exponential race draws from. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sampler.h"

static struct folio_sampling_params params(float temperature)
{
    return (struct folio_sampling_params){
        .temperature = temperature, .top_p = 1.0f, .repetition_penalty = 1.0f, .seed = 1234};
}

static int32_t draw(struct folio_sampler *s, const float *logits,
                    const struct folio_sampling_params *p, uint32_t output_index)
{
    struct folio_sample_result r;
    char err[256];
    if (folio_sample(s, logits, p, output_index, NULL, &r, err, sizeof err) != 0) {
        fprintf(stderr, "sample failed: %s\n", err);
        return -2;
    }
    return r.token;
}

/* Softmax of logits / t, in double. */
static void softmax(const float *logits, int n, double t, double *p)
{
    double max = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++)
        max = fmax(max, logits[i] / t);
    for (int i = 0; i < n; i++)
        sum += p[i] = exp(logits[i] / t - max);
    for (int i = 0; i < n; i++)
        p[i] /= sum;
}

static void test_greedy(void)
{
    float logits[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 0.0f};
    struct folio_sampler *s = folio_sampler_new(6);
    struct folio_sampling_params p = params(0.0f);
    for (uint32_t k = 0; k < 10; k++)
        CHECK(draw(s, logits, &p, k) == 1); /* the tie 1/3 goes to the lowest id */
    p.temperature = 1e-6f;                  /* below vLLM's epsilon: greedy as well */
    CHECK(draw(s, logits, &p, 3) == 1);
    folio_sampler_free(s);
}

static void test_filters_that_leave_the_argmax(void)
{
    enum { V = 1000 };
    float logits[V];
    srand(7);
    for (int i = 0; i < V; i++)
        logits[i] = (float)rand() / (float)RAND_MAX * 4.0f;
    logits[417] = 4.5f;
    struct folio_sampler *s = folio_sampler_new(V);
    struct folio_sampling_params p = params(1.0f);
    p.top_k = 1;
    int same = 0;
    for (uint32_t k = 0; k < 200; k++)
        same += draw(s, logits, &p, k) == 417;
    CHECK(same == 200);
    p = params(2.0f);
    p.top_p = 1e-6f;
    same = 0;
    for (uint32_t k = 0; k < 200; k++)
        same += draw(s, logits, &p, k) == 417;
    CHECK(same == 200);
    p = params(1.0f);
    p.min_p = 1.0f;
    same = 0;
    for (uint32_t k = 0; k < 200; k++)
        same += draw(s, logits, &p, k) == 417;
    CHECK(same == 200);
    /* Without filters, the same logits do not always give 417. */
    p = params(1.0f);
    same = 0;
    for (uint32_t k = 0; k < 200; k++)
        same += draw(s, logits, &p, k) == 417;
    CHECK(same < 50);
    folio_sampler_free(s);
}

/* Draws n samples over output indexes 0..n-1 and checks the frequencies
 * against want[] (absolute tolerance tol; want 0 must never be drawn). */
static void check_distribution(const float *logits, int v, const struct folio_sampling_params *p,
                               const double *want, int n, double tol)
{
    struct folio_sampler *s = folio_sampler_new(v);
    int counts[64] = {0};
    for (int k = 0; k < n; k++) {
        int32_t t = draw(s, logits, p, (uint32_t)k);
        CHECK(t >= 0 && t < v);
        if (t >= 0 && t < v)
            counts[t]++;
    }
    for (int i = 0; i < v; i++) {
        double f = (double)counts[i] / n;
        if (want[i] == 0)
            CHECK(counts[i] == 0);
        else
            CHECK(fabs(f - want[i]) < tol);
        if (fabs(f - want[i]) >= tol)
            fprintf(stderr, "token %d: frequency %.4f, expected %.4f\n", i, f, want[i]);
    }
    folio_sampler_free(s);
}

static void test_distributions(void)
{
    enum { V = 8, N = 20000 };
    const float logits[V] = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f, -2.0f, 0.7f};
    double want[V];
    /* A frequency's standard deviation is at most sqrt(0.25 / N) = 0.0035. */
    const double tol = 0.015;
    struct folio_sampling_params p = params(1.0f);
    softmax(logits, V, 1.0, want);
    check_distribution(logits, V, &p, want, N, tol);
    p = params(0.5f);
    softmax(logits, V, 0.5, want);
    check_distribution(logits, V, &p, want, N, tol);

    /* top-k 3 keeps tokens 3, 5 and 0, renormalised. */
    p = params(1.0f);
    p.top_k = 3;
    softmax(logits, V, 1.0, want);
    double kept = want[3] + want[5] + want[0];
    for (int i = 0; i < V; i++)
        want[i] = (i == 3 || i == 5 || i == 0) ? want[i] / kept : 0;
    check_distribution(logits, V, &p, want, N, tol);

    /* min-p 0.3: tokens with p >= 0.3 * p_max, i.e. logit >= 2 + ln 0.3 = 0.796. */
    p = params(1.0f);
    p.min_p = 0.3f;
    softmax(logits, V, 1.0, want);
    kept = 0;
    for (int i = 0; i < V; i++)
        kept += logits[i] >= 2.0f + logf(0.3f) ? want[i] : 0;
    for (int i = 0; i < V; i++)
        want[i] = logits[i] >= 2.0f + logf(0.3f) ? want[i] / kept : 0;
    check_distribution(logits, V, &p, want, N, tol);
}

static void test_top_p(void)
{
    /* Probabilities 0.5, 0.3, 0.15, 0.05. With top_p 0.75 the smallest whose
     * running sum stays <= 0.25 go: 0.05 and 0.15; 0.3 and 0.5 stay. */
    enum { V = 4, N = 20000 };
    const float logits[V] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    struct folio_sampling_params p = params(1.0f);
    p.top_p = 0.75f;
    double want[V] = {0, 0.5 / 0.8, 0, 0.3 / 0.8};
    check_distribution(logits, V, &p, want, N, 0.015);
    /* top_p 0.9: only 0.05 goes (0.05 + 0.15 > 0.1). */
    p.top_p = 0.9f;
    double want2[V] = {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95};
    check_distribution(logits, V, &p, want2, N, 0.015);
}

static void test_seeds(void)
{
    enum { V = 500 };
    float logits[V];
    for (int i = 0; i < V; i++)
        logits[i] = (float)sin(i * 0.37) * 2.0f;
    struct folio_sampler *s = folio_sampler_new(V);
    struct folio_sampling_params a = params(1.0f), b = params(1.0f);
    b.seed = 99;
    int same_seed_equal = 0, other_seed_equal = 0;
    for (uint32_t k = 0; k < 100; k++) {
        int32_t t1 = draw(s, logits, &a, k), t2 = draw(s, logits, &a, k);
        same_seed_equal += t1 == t2;
        other_seed_equal += t1 == draw(s, logits, &b, k);
    }
    CHECK(same_seed_equal == 100);
    CHECK(other_seed_equal < 30);
    /* A second sampler (another thread) draws the same tokens. */
    struct folio_sampler *s2 = folio_sampler_new(V);
    for (uint32_t k = 0; k < 20; k++)
        CHECK(draw(s, logits, &a, k) == draw(s2, logits, &a, k));
    folio_sampler_free(s2);
    folio_sampler_free(s);
}

static void test_logprobs(void)
{
    enum { V = 6 };
    const float logits[V] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 0.0f};
    double p[V];
    softmax(logits, V, 1.0, p);
    struct folio_sampler *s = folio_sampler_new(V);
    struct folio_sampling_params prm = params(0.0f);
    prm.num_logprobs = 4;
    struct folio_sample_result r;
    char err[256];
    CHECK(folio_sample(s, logits, &prm, 0, NULL, &r, err, sizeof err) == 0);
    CHECK(r.token == 1);
    CHECK(fabs(r.logprob - log(p[1])) < 1e-6);
    CHECK(r.num_top == 4);
    int32_t want_ids[4] = {1, 3, 4, 0};
    for (int j = 0; j < 4; j++) {
        CHECK(r.top_ids[j] == want_ids[j]);
        CHECK(fabs(r.top_logprobs[j] - log(p[want_ids[j]])) < 1e-6);
    }
    CHECK(r.top_ids[4] == -1);
    /* Logprobs ignore temperature and filters: the unmodified distribution. */
    prm.temperature = 0.3f;
    prm.top_k = 2;
    CHECK(folio_sample(s, logits, &prm, 5, NULL, &r, err, sizeof err) == 0);
    CHECK(r.token == 1 || r.token == 3);
    CHECK(fabs(r.logprob - log(p[r.token])) < 1e-6);
    CHECK(fabs(r.top_logprobs[2] - log(p[4])) < 1e-6);
    folio_sampler_free(s);
}

static void test_bad_input(void)
{
    char err[256];
    struct folio_sampling_params p = params(1.0f);
    CHECK(folio_sampling_params_check(&p, err, sizeof err) == 0);
    p.temperature = -1.0f;
    CHECK(folio_sampling_params_check(&p, err, sizeof err) == -1 && strstr(err, "temperature"));
    p = params(NAN);
    CHECK(folio_sampling_params_check(&p, err, sizeof err) == -1);
    p = params(1.0f);
    p.top_p = 0.0f;
    CHECK(folio_sampling_params_check(&p, err, sizeof err) == -1 && strstr(err, "top_p"));
    p = params(1.0f);
    p.min_p = 1.5f;
    CHECK(folio_sampling_params_check(&p, err, sizeof err) == -1 && strstr(err, "min_p"));
    p = params(1.0f);
    p.num_logprobs = FOLIO_MAX_LOGPROBS + 1;
    CHECK(folio_sampling_params_check(&p, err, sizeof err) == -1 && strstr(err, "logprobs"));
    p = params(1.0f);
    p.frequency_penalty = 2.5f;
    CHECK(folio_sampling_params_check(&p, err, sizeof err) == -1 && strstr(err, "penalty"));
    p = params(1.0f);
    p.repetition_penalty = 0.0f;
    CHECK(folio_sampling_params_check(&p, err, sizeof err) == -1 && strstr(err, "repetition"));

    float logits[3] = {1.0f, NAN, 0.0f};
    struct folio_sampler *s = folio_sampler_new(3);
    struct folio_sample_result r;
    p = params(1.0f);
    CHECK(folio_sample(s, logits, &p, 0, NULL, &r, err, sizeof err) == -1 && strstr(err, "NaN"));
    float neg[3] = {-INFINITY, -INFINITY, -INFINITY};
    CHECK(folio_sample(s, neg, &p, 0, NULL, &r, err, sizeof err) == -1);
    folio_sampler_free(s);
    CHECK(folio_sampler_new(0) == NULL);
}

/* vLLM's penalties, checked against the formulas computed here: greedy
 * picks the argmax of the penalized logits, logprobs stay the raw ones. */
static void test_penalties(void)
{
    /* Tokens 0..5; the prompt is {1, 4}, the output so far {2, 2, 3}. */
    const int32_t ids[] = {1, 4, 2, 2, 3};
    struct folio_token_history h = {ids, 5, 3};
    float logits[6] = {0.0f, 3.0f, 2.9f, 2.8f, -1.0f, 2.0f};
    struct folio_sampler *s = folio_sampler_new(6);
    struct folio_sample_result r;
    char err[256];

    struct folio_sampling_params p = params(0.0f);
    CHECK(folio_sample(s, logits, &p, 3, &h, &r, err, sizeof err) == 0 && r.token == 1);

    /* Repetition 2: 1 -> 1.5, 2 -> 1.45, 3 -> 1.4, 4 -> -2; token 5 (2.0) wins. */
    p.repetition_penalty = 2.0f;
    CHECK(folio_sample(s, logits, &p, 3, &h, &r, err, sizeof err) == 0 && r.token == 5);
    double lse = 0;
    for (int i = 0; i < 6; i++)
        lse += exp((double)logits[i]);
    CHECK(fabs(r.logprob - (2.0 - log(lse))) < 1e-5); /* raw logits */

    /* Frequency 0.2 on the output {2, 2, 3}: 2 -> 2.5, 3 -> 2.6; 1 (prompt) keeps 3.0. */
    p = params(0.0f);
    p.frequency_penalty = 0.2f;
    CHECK(folio_sample(s, logits, &p, 3, &h, &r, err, sizeof err) == 0 && r.token == 1);
    /* Presence 1.5 and frequency 0.2 with a history whose output includes 1. */
    const int32_t ids2[] = {4, 1, 2, 2};
    struct folio_token_history h2 = {ids2, 4, 3};
    p.presence_penalty = 1.5f; /* 1 -> 1.3, 2 -> 1.0; 3 (2.8) wins */
    CHECK(folio_sample(s, logits, &p, 3, &h2, &r, err, sizeof err) == 0 && r.token == 3);
    /* A negative penalty rewards repeats. */
    p = params(0.0f);
    p.frequency_penalty = -1.0f; /* output {1, 2, 2}: 1 -> 4.0, 2 -> 4.9 */
    CHECK(folio_sample(s, logits, &p, 3, &h2, &r, err, sizeof err) == 0 && r.token == 2);
    /* The scratch is clean between calls: no penalty, no change. */
    p = params(0.0f);
    CHECK(folio_sample(s, logits, &p, 3, &h2, &r, err, sizeof err) == 0 && r.token == 1);
    /* Penalties without a history are refused, not ignored. */
    p.frequency_penalty = 0.5f;
    CHECK(folio_sample(s, logits, &p, 3, NULL, &r, err, sizeof err) == -1 &&
          strstr(err, "history"));
    folio_sampler_free(s);
}

/* A logit bias: +100 forces its token at any temperature, -inf bans the
 * argmax, and the logprobs include the bias. */
static void test_logit_bias(void)
{
    const float logits[8] = {1.0f, 4.0f, 0.5f, -2.0f, 3.5f, 0.0f, 2.0f, 1.5f};
    struct folio_sampler *s = folio_sampler_new(8);
    struct folio_logit_bias force = {3, 100.0f}, ban = {1, -INFINITY}, outside = {8, 100.0f};
    float forced[8], banned[8];
    memcpy(forced, logits, sizeof logits);
    memcpy(banned, logits, sizeof logits);
    folio_logits_add_bias(forced, 8, &force, 1);
    folio_logits_add_bias(banned, 8, &ban, 1);
    folio_logits_add_bias(banned, 8, &outside, 1); /* skipped */
    for (uint32_t i = 0; i < 50; i++) {
        struct folio_sampling_params p = params(i % 2 ? 1.0f : 0.0f);
        CHECK(draw(s, forced, &p, i) == 3);
        CHECK(draw(s, banned, &p, i) != 1);
    }
    struct folio_sampling_params p = params(0.0f);
    p.num_logprobs = 2;
    struct folio_sample_result r;
    char err[128];
    CHECK(folio_sample(s, banned, &p, 0, NULL, &r, err, sizeof err) == 0);
    CHECK(r.token == 4 && r.top_ids[0] == 4 && r.top_ids[1] == 6);
    CHECK(folio_sample(s, forced, &p, 0, NULL, &r, err, sizeof err) == 0);
    CHECK(r.token == 3 && r.logprob > -1e-6f);
    folio_sampler_free(s);
}

/* A grammar's mask (grammar/grammar.h): clear bits become -inf, set bits keep
 * their logit, over a vocabulary that is no multiple of 32. */
static void test_apply_mask(void)
{
    enum { V = 37 };
    float logits[V];
    for (int i = 0; i < V; i++)
        logits[i] = (float)i;
    uint32_t mask[2] = {0x80000001u, 0x12u}; /* ids 0, 31, 33, 36 */
    folio_logits_apply_mask(logits, V, mask);
    for (int i = 0; i < V; i++) {
        bool kept = i == 0 || i == 31 || i == 33 || i == 36;
        CHECK(kept ? logits[i] == (float)i : isinf(logits[i]) && logits[i] < 0);
    }
}

int main(void)
{
    test_apply_mask();
    test_logit_bias();
    test_penalties();
    test_greedy();
    test_filters_that_leave_the_argmax();
    test_distributions();
    test_top_p();
    test_seeds();
    test_logprobs();
    test_bad_input();
    return check_report();
}
