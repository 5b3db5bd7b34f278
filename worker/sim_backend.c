#include "sim_backend.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "rng.h"

#define SIM_PIPELINE_DEPTH 2

/* What a KV entry holds in the simulation: the chain hash up to and
 * including its token, and the chain hash before it. 0 is "never written". */
struct sim_kv {
    uint64_t hash, prev;
};

struct sim_out {
    int32_t num_seqs;
    int32_t *token_ids;
    float *logprobs;
    double step_us;
    uint64_t due_ns; /* monotonic time its results are in (time_scale > 0) */
};

struct sim_backend {
    struct folio_backend base;
    struct folio_sim_options o;
    struct sim_kv *kv; /* [num_kv_blocks * 16] */
    int32_t *last_sampled;
    struct sim_out out[SIM_PIPELINE_DEPTH];
    int out_head, out_count;
    double modelled_us;
};

void folio_sim_options_default(struct folio_sim_options *o)
{
    *o = (struct folio_sim_options){
        .vocab_size = 32000,
        .eos_id = 2,
        .eos_probability = 0.01,
        .base_us = 600,
        .per_token_us = 1.5,
        .per_context_us = 0.01,
        .time_scale = 0,
    };
}

static uint64_t kv_chain(uint64_t prev, int32_t token, int32_t pos)
{
    uint64_t h = folio_splitmix64(prev ^ ((uint64_t)(uint32_t)token << 32 | (uint32_t)pos));
    return h ? h : 1;
}

static struct sim_kv *kv_at(struct sim_backend *b, const struct folio_step_seq *s, int pos)
{
    int block = s->block_table[pos / FOLIO_KV_BLOCK_SIZE];
    return &b->kv[(size_t)block * FOLIO_KV_BLOCK_SIZE + pos % FOLIO_KV_BLOCK_SIZE];
}

static int sim_launch(struct folio_backend *base, const struct folio_step_batch *batch, char *err,
                      size_t errlen)
{
    struct sim_backend *b = (struct sim_backend *)base;
    if (b->out_count == SIM_PIPELINE_DEPTH) {
        snprintf(err, errlen, "sim step: %d steps already launched", SIM_PIPELINE_DEPTH);
        return -1;
    }
    if (folio_step_batch_check(&b->base, batch, err, errlen) != 0)
        return -1;
    struct sim_out *out = &b->out[(b->out_head + b->out_count) % SIM_PIPELINE_DEPTH];
    out->num_seqs = batch->num_seqs;
    int64_t sum_context = 0;
    const int32_t *tok = batch->token_ids;
    for (int i = 0; i < batch->num_seqs; i++) {
        const struct folio_step_seq *s = &batch->seqs[i];
        int start = s->context_len - s->num_new_tokens;
        sum_context += s->context_len;
        /* The cached context this step attends to must be this sequence's. */
        uint64_t prev = 0;
        if (start > 0) {
            const struct sim_kv *e = kv_at(b, s, start - 1);
            if (e->hash == 0) {
                snprintf(err, errlen, "sim step: slot %d attends to position %d, never written",
                         s->slot, start - 1);
                return -1;
            }
            prev = e->hash;
        }
        for (int j = 0; j < s->num_new_tokens; j++) {
            int32_t id = *tok++;
            if (id == FOLIO_TOKEN_FROM_PREV) {
                id = b->last_sampled[s->slot];
                if (id < 0) {
                    snprintf(err, errlen, "sim step: slot %d uses FROM_PREV before sampling",
                             s->slot);
                    return -1;
                }
            }
            struct sim_kv *e = kv_at(b, s, start + j);
            e->prev = prev;
            e->hash = kv_chain(prev, id, start + j);
            prev = e->hash;
        }
        /* Walk the chain back: every entry must link to the one before it. A
         * full walk per step is what makes a wrongly shared block visible. */
        for (int pos = s->context_len - 1; pos > 0; pos--) {
            const struct sim_kv *e = kv_at(b, s, pos), *before = kv_at(b, s, pos - 1);
            if (e->hash == 0 || e->prev != before->hash) {
                snprintf(err, errlen,
                         "sim step: slot %d's KV chain breaks at position %d of %d (a block "
                         "overwritten or shared wrongly)",
                         s->slot, pos, s->context_len);
                return -1;
            }
        }
        out->token_ids[i] = -1;
        out->logprobs[i] = 0;
        if (s->sample) {
            /* Greedy requests depend on the context only; others on the seed. */
            uint64_t r = s->sampling.temperature == 0
                             ? folio_splitmix64(prev)
                             : folio_splitmix64(s->sampling.seed ^
                                                folio_splitmix64((uint64_t)s->output_index));
            double u = (double)(r >> 11) * (1.0 / 9007199254740992.0);
            int32_t id;
            if (b->o.eos_id >= 0 && u < b->o.eos_probability) {
                id = b->o.eos_id;
            } else {
                id = (int32_t)(folio_splitmix64(r) % (uint64_t)b->o.vocab_size);
                if (id == b->o.eos_id)
                    id = (id + 1) % b->o.vocab_size;
            }
            out->token_ids[i] = id;
            out->logprobs[i] = -(float)(r % 1000) / 100.0f;
            b->last_sampled[s->slot] = id;
        }
    }
    out->step_us = b->o.base_us + b->o.per_token_us * batch->num_tokens +
                   b->o.per_context_us * (double)sum_context;
    b->modelled_us += out->step_us;
    /* As on a GPU, a step starts when it is launched or when the one before it ends. */
    uint64_t start = folio_mono_ns();
    if (b->out_count > 0) {
        uint64_t prev = b->out[(b->out_head + b->out_count - 1) % SIM_PIPELINE_DEPTH].due_ns;
        start = prev > start ? prev : start;
    }
    out->due_ns = start + (uint64_t)(out->step_us * 1000.0 * b->o.time_scale);
    b->out_count++;
    return 0;
}

static int sim_collect(struct folio_backend *base, struct folio_step_result *res, char *err,
                       size_t errlen)
{
    struct sim_backend *b = (struct sim_backend *)base;
    if (b->out_count == 0) {
        snprintf(err, errlen, "sim collect: no step launched");
        return -1;
    }
    struct sim_out *out = &b->out[b->out_head];
    uint64_t now = folio_mono_ns();
    if (out->due_ns > now) {
        uint64_t ns = out->due_ns - now;
        struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                              .tv_nsec = (long)(ns % 1000000000u)};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < out->num_seqs; i++) {
        res->token_ids[i] = out->token_ids[i];
        res->logprobs[i] = out->logprobs[i];
        if (res->top_ids) {
            /* Top-N: the sampled token first, then its neighbours. */
            for (int k = 0; k < FOLIO_MAX_LOGPROBS; k++) {
                res->top_ids[(size_t)i * FOLIO_MAX_LOGPROBS + k] =
                    out->token_ids[i] < 0 ? -1 : (out->token_ids[i] + k) % b->o.vocab_size;
                res->top_logprobs[(size_t)i * FOLIO_MAX_LOGPROBS + k] = out->logprobs[i] - (float)k;
            }
        }
    }
    b->out_head = (b->out_head + 1) % SIM_PIPELINE_DEPTH;
    b->out_count--;
    return 0;
}

static int sim_ready(struct folio_backend *base)
{
    struct sim_backend *b = (struct sim_backend *)base;
    if (b->out_count == 0)
        return -1;
    return folio_mono_ns() >= b->out[b->out_head].due_ns;
}

static void sim_destroy(struct folio_backend *base)
{
    struct sim_backend *b = (struct sim_backend *)base;
    if (!b)
        return;
    folio_backend_base_free(base);
    for (int i = 0; i < SIM_PIPELINE_DEPTH; i++) {
        free(b->out[i].token_ids);
        free(b->out[i].logprobs);
    }
    free(b->kv);
    free(b->last_sampled);
    free(b);
}

static const struct folio_backend_ops sim_ops = {
    .name = "sim",
    .launch = sim_launch,
    .ready = sim_ready,
    .collect = sim_collect,
    .destroy = sim_destroy,
};

int folio_sim_backend_create(const struct folio_backend_options *opt,
                             const struct folio_sim_options *sim, struct folio_backend **out,
                             char *err, size_t errlen)
{
    if (opt->max_seqs <= 0 || opt->max_num_tokens <= 0 || sim->vocab_size <= 0) {
        snprintf(err, errlen, "sim backend: max_seqs, max_num_tokens and vocab must be positive");
        return -1;
    }
    int blocks = opt->num_kv_blocks > 0 ? opt->num_kv_blocks : 4096;
    struct sim_backend *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "sim backend: out of memory");
        return -1;
    }
    b->base = (struct folio_backend){.ops = &sim_ops,
                                     .num_kv_blocks = blocks,
                                     .max_seqs = opt->max_seqs,
                                     .max_num_tokens = opt->max_num_tokens,
                                     .vocab_size = sim->vocab_size,
                                     .caps = {.pipeline_depth = 2}};
    b->o = *sim;
    b->kv = calloc((size_t)blocks * FOLIO_KV_BLOCK_SIZE, sizeof *b->kv);
    b->last_sampled = malloc((size_t)opt->max_seqs * sizeof *b->last_sampled);
    bool ok = b->kv && b->last_sampled;
    for (int i = 0; i < SIM_PIPELINE_DEPTH && ok; i++) {
        b->out[i].token_ids = calloc((size_t)opt->max_seqs, sizeof(int32_t));
        b->out[i].logprobs = calloc((size_t)opt->max_seqs, sizeof(float));
        ok = b->out[i].token_ids && b->out[i].logprobs;
    }
    if (!ok) {
        sim_destroy(&b->base);
        snprintf(err, errlen, "sim backend: out of memory for %d KV blocks", blocks);
        return -1;
    }
    for (int i = 0; i < opt->max_seqs; i++)
        b->last_sampled[i] = -1;
    *out = &b->base;
    return 0;
}

double folio_sim_backend_modelled_us(const struct folio_backend *base)
{
    return ((const struct sim_backend *)base)->modelled_us;
}
