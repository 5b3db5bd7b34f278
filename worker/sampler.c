/* CPU sampling: see sampler.h for the order of the filters and the draw. */
#include "sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* Below this temperature sampling is greedy, as in vLLM (_SAMPLING_EPS). */
#define FOLIO_GREEDY_TEMPERATURE 1e-5f

struct scored_token {
    float value;
    int32_t id;
};

struct folio_sampler {
    int32_t vocab_size;
    float *scaled;              /* logits / T, -inf where a filter removed the token */
    struct scored_token *order; /* kept tokens by value descending, ties lowest id first */
    float *penalized;           /* logits after the penalties */
    int32_t *counts;            /* per token: occurrences in the output; 0 between calls */
    unsigned char *seen;        /* per token: in the prompt or output; 0 between calls */
};

struct folio_sampler *folio_sampler_new(int32_t vocab_size)
{
    if (vocab_size <= 0)
        return NULL;
    struct folio_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->vocab_size = vocab_size;
    s->scaled = malloc((size_t)vocab_size * sizeof *s->scaled);
    s->order = malloc((size_t)vocab_size * sizeof *s->order);
    s->penalized = malloc((size_t)vocab_size * sizeof *s->penalized);
    s->counts = calloc((size_t)vocab_size, sizeof *s->counts);
    s->seen = calloc((size_t)vocab_size, 1);
    if (!s->scaled || !s->order || !s->penalized || !s->counts || !s->seen) {
        folio_sampler_free(s);
        return NULL;
    }
    return s;
}

void folio_sampler_free(struct folio_sampler *s)
{
    if (!s)
        return;
    free(s->scaled);
    free(s->order);
    free(s->penalized);
    free(s->counts);
    free(s->seen);
    free(s);
}

void folio_logits_add_bias(float *logits, int32_t vocab, const struct folio_logit_bias *bias,
                           int32_t num_bias)
{
    for (int32_t i = 0; i < num_bias; i++)
        if (bias[i].token >= 0 && bias[i].token < vocab)
            logits[bias[i].token] += bias[i].value;
}

void folio_logits_apply_mask(float *logits, int32_t vocab, const uint32_t *mask)
{
    for (int32_t i = 0; i < vocab; i++)
        if (!(mask[i >> 5] >> (i & 31) & 1u))
            logits[i] = -INFINITY;
}

static int by_value_desc(const void *a, const void *b)
{
    const struct scored_token *x = a, *y = b;
    if (x->value != y->value)
        return x->value > y->value ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The n largest raw logits, ties lowest id first, by insertion: n <= 20. */
static int32_t top_logprobs(const float *logits, int32_t vocab, int32_t n, double lse, int32_t *ids,
                            float *lps)
{
    float vals[FOLIO_MAX_LOGPROBS];
    int32_t count = 0;
    for (int32_t i = 0; i < vocab && n > 0; i++) {
        float v = logits[i];
        if (count == n && !(v > vals[n - 1]))
            continue;
        int32_t j = count < n ? count++ : n - 1;
        while (j > 0 && v > vals[j - 1]) {
            vals[j] = vals[j - 1];
            ids[j] = ids[j - 1];
            j--;
        }
        vals[j] = v;
        ids[j] = i;
    }
    for (int32_t j = 0; j < count; j++)
        lps[j] = (float)((double)vals[j] - lse);
    return count;
}

static int32_t argmax_lowest_id(const float *v, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

/* Sorts the tokens still kept (scaled > -inf) by value; returns how many. */
static int32_t sort_kept(struct folio_sampler *s)
{
    int32_t n = 0;
    for (int32_t i = 0; i < s->vocab_size; i++)
        if (s->scaled[i] != -INFINITY)
            s->order[n++] = (struct scored_token){s->scaled[i], i};
    qsort(s->order, (size_t)n, sizeof *s->order, by_value_desc);
    return n;
}

/* Keeps the k largest, and every token tied with the k-th (as vLLM's mask
 * `logits < kth value` does). */
static void apply_top_k(struct folio_sampler *s, int32_t k)
{
    int32_t n = sort_kept(s);
    if (k >= n)
        return;
    float kth = s->order[k - 1].value;
    for (int32_t j = k; j < n; j++)
        if (s->order[j].value < kth)
            s->scaled[s->order[j].id] = -INFINITY;
}

/* Removes the least likely tokens whose probabilities, summed from the
 * smallest up and including themselves, stay <= 1 - top_p (vLLM's rule); the
 * most likely token always stays. */
static void apply_top_p(struct folio_sampler *s, float top_p)
{
    int32_t n = sort_kept(s);
    double max = s->order[0].value, sum = 0;
    for (int32_t j = 0; j < n; j++)
        sum += exp((double)s->order[j].value - max);
    double cum = 0, limit = 1.0 - (double)top_p;
    for (int32_t j = n - 1; j > 0; j--) {
        cum += exp((double)s->order[j].value - max) / sum;
        if (cum > limit)
            break;
        s->scaled[s->order[j].id] = -INFINITY;
    }
}

/* Removes tokens with probability below min_p times the largest one. */
static void apply_min_p(struct folio_sampler *s, float min_p)
{
    int32_t best = argmax_lowest_id(s->scaled, s->vocab_size);
    double max = s->scaled[best];
    for (int32_t i = 0; i < s->vocab_size; i++)
        if (s->scaled[i] != -INFINITY && exp((double)s->scaled[i] - max) < (double)min_p)
            s->scaled[i] = -INFINITY;
}

/* vLLM's penalties, into s->penalized: the repetition penalty divides a
 * positive logit (multiplies a negative one) of every token seen in the
 * prompt or the output; the frequency and presence penalties subtract
 * count * f and (count > 0) * p for tokens of the output. */
static void apply_penalties(struct folio_sampler *s, const float *logits,
                            const struct folio_sampling_params *p,
                            const struct folio_token_history *h)
{
    int32_t vocab = s->vocab_size;
    memcpy(s->penalized, logits, (size_t)vocab * sizeof *logits);
    int32_t num_out = h->num_output < h->len ? h->num_output : h->len;
    const int32_t *out = h->ids + (h->len - num_out);
    for (int32_t i = 0; i < h->len; i++) {
        int32_t t = h->ids[i];
        if (t < 0 || t >= vocab || s->seen[t])
            continue;
        s->seen[t] = 1;
        float *l = &s->penalized[t];
        *l = *l > 0 ? *l / p->repetition_penalty : *l * p->repetition_penalty;
    }
    for (int32_t i = 0; i < num_out; i++)
        if (out[i] >= 0 && out[i] < vocab)
            s->counts[out[i]]++;
    for (int32_t i = 0; i < num_out; i++) {
        int32_t t = out[i];
        if (t < 0 || t >= vocab || !s->counts[t])
            continue;
        s->penalized[t] -= (float)s->counts[t] * p->frequency_penalty + p->presence_penalty;
        s->counts[t] = 0; /* each token once; also leaves the scratch zeroed */
    }
    for (int32_t i = 0; i < h->len; i++)
        if (h->ids[i] >= 0 && h->ids[i] < vocab)
            s->seen[h->ids[i]] = 0;
}

/* The log-sum-exp of logits[vocab] into *lse: 0, or -1 for a NaN, an
 * infinite maximum or all -inf. */
static int log_sum_exp(const float *logits, int32_t vocab, double *lse, char *err, size_t errlen)
{
    float max = -INFINITY;
    for (int32_t i = 0; i < vocab; i++) {
        if (isnan(logits[i])) {
            snprintf(err, errlen, "sampling: logit %d is NaN", (int)i);
            return -1;
        }
        if (logits[i] > max)
            max = logits[i];
    }
    if (max == -INFINITY || max == INFINITY) {
        snprintf(err, errlen, "sampling: the logits are %s", max < 0 ? "all -inf" : "+inf");
        return -1;
    }
    double sum = 0;
    for (int32_t i = 0; i < vocab; i++)
        sum += exp((double)logits[i] - max);
    *lse = max + log(sum);
    return 0;
}

static void fill_top(const float *logits, int32_t vocab, int32_t num_top, double lse,
                     struct folio_sample_result *out)
{
    out->num_top = top_logprobs(logits, vocab, num_top, lse, out->top_ids, out->top_logprobs);
    for (int32_t j = out->num_top; j < FOLIO_MAX_LOGPROBS; j++) {
        out->top_ids[j] = -1;
        out->top_logprobs[j] = -INFINITY;
    }
}

int folio_token_logprobs(const float *logits, int32_t vocab, int32_t token, int32_t num_top,
                         struct folio_sample_result *out, char *err, size_t errlen)
{
    double lse;
    if (token < 0 || token >= vocab) {
        snprintf(err, errlen, "prompt logprobs: token id %d outside the vocabulary", (int)token);
        return -1;
    }
    if (log_sum_exp(logits, vocab, &lse, err, errlen) != 0)
        return -1;
    out->token = token;
    out->logprob = (float)((double)logits[token] - lse);
    fill_top(logits, vocab, num_top, lse, out);
    return 0;
}

int folio_sample(struct folio_sampler *s, const float *logits,
                 const struct folio_sampling_params *p, uint32_t output_index,
                 const struct folio_token_history *history, struct folio_sample_result *out,
                 char *err, size_t errlen)
{
    int32_t vocab = s->vocab_size;
    double lse;
    if (log_sum_exp(logits, vocab, &lse, err, errlen) != 0)
        return -1;

    /* The draw sees the penalized logits; logprobs report the raw ones. */
    const float *work = logits;
    if (folio_sampling_params_penalized(p)) {
        if (!history) {
            snprintf(err, errlen, "sampling: penalties need the sequence's token history");
            return -1;
        }
        apply_penalties(s, logits, p, history);
        work = s->penalized;
    }
    int32_t token;
    if (p->temperature < FOLIO_GREEDY_TEMPERATURE) {
        token = argmax_lowest_id(work, vocab);
    } else {
        for (int32_t i = 0; i < vocab; i++)
            s->scaled[i] = work[i] / p->temperature;
        if (p->top_k > 0 && p->top_k < vocab)
            apply_top_k(s, p->top_k);
        if (p->top_p < 1.0f)
            apply_top_p(s, p->top_p);
        if (p->min_p > 0.0f)
            apply_min_p(s, p->min_p);
        float smax = s->scaled[argmax_lowest_id(s->scaled, vocab)];
        token = -1;
        float best = -1.0f;
        for (int32_t i = 0; i < vocab; i++) {
            if (s->scaled[i] == -INFINITY)
                continue;
            float e = -logf(folio_rng_uniform(p->seed, output_index, (uint32_t)i));
            float score = expf(s->scaled[i] - smax) / e;
            if (score > best) {
                best = score;
                token = i;
            }
        }
    }
    out->token = token;
    out->logprob = (float)((double)logits[token] - lse);
    fill_top(logits, vocab, p->num_logprobs, lse, out);
    return 0;
}
