#include "sampling_params.h"

#include <math.h>
#include <stdio.h>

int folio_sampling_params_check(const struct folio_sampling_params *p, char *err, size_t errlen)
{
    if (!isfinite(p->temperature) || p->temperature < 0) {
        snprintf(err, errlen, "sampling: temperature %g must be finite and >= 0",
                 (double)p->temperature);
        return -1;
    }
    if (!(p->top_p > 0 && p->top_p <= 1)) {
        snprintf(err, errlen, "sampling: top_p %g must be in (0, 1] (1 = off)", (double)p->top_p);
        return -1;
    }
    if (!(p->min_p >= 0 && p->min_p <= 1)) {
        snprintf(err, errlen, "sampling: min_p %g must be in [0, 1] (0 = off)", (double)p->min_p);
        return -1;
    }
    if (p->num_logprobs < 0 || p->num_logprobs > FOLIO_MAX_LOGPROBS) {
        snprintf(err, errlen, "sampling: num_logprobs %d must be in [0, %d]", (int)p->num_logprobs,
                 FOLIO_MAX_LOGPROBS);
        return -1;
    }
    if (!isfinite(p->repetition_penalty) || p->repetition_penalty <= 0) {
        snprintf(err, errlen, "sampling: repetition_penalty %g must be > 0 (1 = off)",
                 (double)p->repetition_penalty);
        return -1;
    }
    if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2) ||
        !(p->presence_penalty >= -2 && p->presence_penalty <= 2)) {
        snprintf(err, errlen,
                 "sampling: frequency_penalty %g and presence_penalty %g must be in [-2, 2]",
                 (double)p->frequency_penalty, (double)p->presence_penalty);
        return -1;
    }
    return 0;
}

int folio_logit_bias_check(const struct folio_logit_bias *b, int32_t n, int32_t vocab, char *err,
                           size_t errlen)
{
    for (int32_t i = 0; i < n; i++) {
        if (b[i].token < 0 || b[i].token >= vocab) {
            snprintf(err, errlen, "logit_bias: token id %d is outside the vocabulary [0, %d)",
                     (int)b[i].token, (int)vocab);
            return -1;
        }
        float v = b[i].value;
        if (!(v == -INFINITY || (v >= -FOLIO_LOGIT_BIAS_MAX && v <= FOLIO_LOGIT_BIAS_MAX))) {
            snprintf(err, errlen, "logit_bias: the bias of token %d is %g; it must be in [-%g, %g]",
                     (int)b[i].token, (double)v, (double)FOLIO_LOGIT_BIAS_MAX,
                     (double)FOLIO_LOGIT_BIAS_MAX);
            return -1;
        }
    }
    return 0;
}

void folio_sampling_defaults_apply(const struct folio_sampling_defaults *d,
                                   struct folio_sampling_params *p)
{
    p->temperature = d && d->has_temperature ? d->temperature : 1.0f;
    p->top_p = d && d->has_top_p ? d->top_p : 1.0f;
    p->top_k = d && d->has_top_k && d->top_k > 0 ? d->top_k : -1;
    p->min_p = d && d->has_min_p ? d->min_p : 0.0f;
    p->repetition_penalty = d && d->has_repetition_penalty ? d->repetition_penalty : 1.0f;
}

int folio_sampling_defaults_check(const struct folio_sampling_defaults *d, char *err, size_t errlen)
{
    struct folio_sampling_params p = {0};
    folio_sampling_defaults_apply(d, &p);
    return folio_sampling_params_check(&p, err, errlen);
}

void folio_sampling_defaults_describe(const struct folio_sampling_defaults *d, char *out,
                                      size_t outlen)
{
    size_t n = 0;
    out[0] = 0;
#define FIELD(flag, fmt, value)                                                                    \
    if (d->flag && n < outlen)                                                                     \
        n += (size_t)snprintf(out + n, outlen - n, "%s" fmt, n ? ", " : "", value);
    FIELD(has_temperature, "temperature %g", (double)d->temperature)
    FIELD(has_top_p, "top_p %g", (double)d->top_p)
    FIELD(has_top_k, "top_k %d", (int)d->top_k)
    FIELD(has_min_p, "min_p %g", (double)d->min_p)
    FIELD(has_repetition_penalty, "repetition_penalty %g", (double)d->repetition_penalty)
#undef FIELD
}

int folio_sampling_defaults_set(struct folio_sampling_defaults *d, double temperature, double top_p,
                                double top_k, double min_p, double repetition_penalty, char *err,
                                size_t errlen)
{
    d->temperature = (float)temperature;
    d->top_p = (float)top_p;
    d->top_k = top_k > 2147483647.0 ? 2147483647 : top_k < 0 ? -1 : (int32_t)top_k;
    d->min_p = (float)min_p;
    d->repetition_penalty = (float)repetition_penalty;
    return folio_sampling_defaults_check(d, err, errlen);
}
