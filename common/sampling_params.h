/* A sequence's sampling parameters, their limits and their check: one
 * definition that the frontend's validation, the scheduler (which refuses a
 * bad request alone rather than fail a whole step) and every worker backend
 * (CPU sampler, GPU sampler) share. */
#ifndef FOLIO_SAMPLING_PARAMS_H
#define FOLIO_SAMPLING_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Top logprobs per token (vLLM's default max_logprobs). */
#define FOLIO_MAX_LOGPROBS 20
/* OpenAI's logit_bias range; a bias of -100 bans a token in practice, +100
 * forces it. */
#define FOLIO_LOGIT_BIAS_MAX 100.0f
/* Per request; beyond these a request is refused (400) naming the limit.
 * They bound the logit bias entries a step plan carries: the client's, and
 * the bans of EOS and stop tokens while min_tokens is not reached. */
#define FOLIO_MAX_LOGIT_BIAS 1024
#define FOLIO_MAX_STOP_TOKEN_IDS 1024

struct folio_sampling_params {
    float temperature;        /* 0: greedy */
    int32_t top_k;            /* <= 0: off */
    float top_p;              /* 1: off */
    float min_p;              /* 0: off */
    float repetition_penalty; /* 1: off */
    float frequency_penalty;  /* 0: off */
    float presence_penalty;   /* 0: off */
    uint64_t seed;            /* per request; the scheduler draws one when the client gave none */
    int32_t num_logprobs;     /* top-N logprobs to return, 0..FOLIO_MAX_LOGPROBS */
};

/* One additive logit bias: the client's logit_bias, or a ban (-inf) that
 * the scheduler adds for EOS and stop tokens while min_tokens is not
 * reached. Applied to the logits before anything else, so the reported
 * logprobs include it (the forced token's logprob is near 0, a banned one
 * never shows among the top logprobs) and both samplers agree. */
struct folio_logit_bias {
    int32_t token;
    float value; /* [-FOLIO_LOGIT_BIAS_MAX, FOLIO_LOGIT_BIAS_MAX], or -inf */
};

/* Repetition, frequency or presence penalty on: the worker must see every token
 * of the sequence (no cached prefix skipped) and keep its token counts. */
static inline int folio_sampling_params_penalized(const struct folio_sampling_params *p)
{
    return p->repetition_penalty != 1.0f || p->frequency_penalty != 0.0f ||
           p->presence_penalty != 0.0f;
}

/* The sampling settings a model recommends: generation_config.json's, or a
 * GGUF's general.sampling.* keys. A request that omits a field gets the
 * model's value, one that omits it too gets OpenAI's (vLLM's
 * --generation-config auto): request > model > OpenAI. Each value counts
 * only where its has_ flag is set. */
struct folio_sampling_defaults {
    bool has_temperature, has_top_p, has_top_k, has_min_p, has_repetition_penalty;
    float temperature;
    float top_p;
    int32_t top_k; /* <= 0: off */
    float min_p;
    float repetition_penalty;
};

/* 0, or -1 with a message naming the field. */
int folio_sampling_params_check(const struct folio_sampling_params *p, char *err, size_t errlen);

/* Checks a bias list against a vocabulary: ids in [0, vocab), values in
 * range (or -inf). 0, or -1 with a message naming the entry. */
int folio_logit_bias_check(const struct folio_logit_bias *b, int32_t n, int32_t vocab, char *err,
                           size_t errlen);

/* The model's values (d) over OpenAI's defaults, into p's sampling fields
 * (temperature 1, top_p 1, top_k off, min_p 0, repetition_penalty 1 where d
 * has none). d may be NULL. */
void folio_sampling_defaults_apply(const struct folio_sampling_defaults *d,
                                   struct folio_sampling_params *p);
/* Whether d's values are ones a request could send: 0, or -1 with the
 * message of folio_sampling_params_check. */
/* Stores the values a reader found (k clamped to an int32; negative: off) and checks them:
 * 0, or -1 with the message of folio_sampling_defaults_check. */
int folio_sampling_defaults_set(struct folio_sampling_defaults *d, double temperature, double top_p,
                                double top_k, double min_p, double repetition_penalty, char *err,
                                size_t errlen);
int folio_sampling_defaults_check(const struct folio_sampling_defaults *d, char *err,
                                  size_t errlen);
/* "temperature 0.6, top_p 0.9" (the fields d has), or "" when none. */
void folio_sampling_defaults_describe(const struct folio_sampling_defaults *d, char *out,
                                      size_t outlen);

#endif
