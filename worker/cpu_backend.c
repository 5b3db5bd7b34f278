/* The CPU backend: a Llama forward pass over a paged KV cache, behind the step
 * interface of backend.h, in two forms that share everything but the weights,
 * the KV cache's type and the inner loops.
 *
 * The fast path (--backend cpu): weights kept in their GGUF blocks (Q4_0,
 * Q4_1, Q8_0; other quantized types packed as Q8 at load; f32/f16/bf16 as they
 * are), activations quantized per block as llama.cpp does, integer SIMD dot
 * products chosen at run time (cpu_kernels.h), prompt tokens met four at a
 * time by each weight row, and a KV cache in f16.
 *
 * The reference (--backend cpu-ref) is the oracle the fast path and the GPU
 * kernels are checked against, so it is written for clarity first: every
 * weight is converted once to fp32 at creation (TinyLlama-1.1B takes 4.4 GB
 * that way), all arithmetic is fp32 (sums of squares and softmax normalisers
 * in double), and the KV cache is fp32.
 *
 * With --kv-cache-dtype fp8 either keeps its KV cache as e4m3 codes instead
 * (cpu_attention.h), the CUDA backend's FP8 cache emulated.
 *
 * In both, each token's computation does not depend on which other tokens
 * share its step, so a prompt gives the same logits in one chunk, in many
 * chunks or token by token. A pool of threads that lives as long as the
 * backend (cpu_pool.h) takes the runs of rows of each matmul and the (token,
 * head) pairs of attention from a shared counter.
 *
 * The step runs whole inside launch(); collect() hands back the results in
 * launch order. Up to FOLIO_CPU_PIPELINE_DEPTH steps may be launched before
 * they are collected, as the scheduler's one-step-ahead pipeline does. */
#include <math.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_attention.h"
#include "cpu_kernels.h"
#include "cpu_pool.h"
#include "cpu_prompt_logprobs.h"
#include "cpu_weights.h"
#include "sampler.h"

#define FOLIO_CPU_PIPELINE_DEPTH 2

/* The results of one launched step, waiting for collect(). */
struct cpu_step_out {
    int32_t num_seqs;
    int32_t num_logits; /* rows sampled */
    int32_t num_rows;   /* num_seqs and the draft rows (backend.h's result rows) */
    int32_t *token_ids; /* [max_seqs + FOLIO_MAX_DRAFT_ROWS] */
    float *logprobs;    /* [max_seqs] */
    int32_t *top_ids;   /* [max_seqs * FOLIO_MAX_LOGPROBS] */
    float *top_logprobs;
    float *logits;                  /* [max_seqs * vocab] */
    struct folio_prompt_lps prompt; /* the step's prompt logprobs */
};

/* The tokens a slot's sequence has fed so far, by position (-1 where a
 * position was never fed here). A sequence starts over at position 0 when it
 * takes the slot or is recomputed after preemption. */
struct slot_history {
    int32_t *ids;
    int32_t len, cap;
};

static int history_put(struct slot_history *h, int32_t pos, int32_t id)
{
    if (pos < h->len)
        h->len = pos;
    if (pos >= h->cap) {
        int32_t cap = h->cap ? h->cap : 256;
        while (cap <= pos)
            cap *= 2;
        int32_t *ids = realloc(h->ids, (size_t)cap * sizeof *ids);
        if (!ids)
            return -1;
        h->ids = ids;
        h->cap = cap;
    }
    while (h->len < pos)
        h->ids[h->len++] = -1;
    h->ids[h->len++] = id;
    return 0;
}

struct cpu_backend {
    struct folio_backend base;
    struct folio_model_config cfg;
    int num_threads;
    struct cpu_pool *pool;          /* num_threads threads, the caller's among them */
    bool ref;                       /* the f32 reference (weights, KV and loops) */
    enum cpu_kv_type kv;            /* f32 (ref), f16, or e4m3 (--kv-cache-dtype fp8) */
    const struct cpu_kernels *kern; /* the fast path's inner loops */
    struct cpu_act act;             /* the activations a run of matmuls shares */

    float *final_norm;
    /* Tensor parallelism emulated in one process: each rank's share of the
     * weights and KV cache (tp_shard.h), run one after the other, with a sum
     * where the GPUs would all-reduce and a copy where they would gather. */
    int tp;
    struct cpu_rank ranks[FOLIO_CPU_TP_MAX];
    double *inv_freq; /* [head_dim / 2], rope scaling applied */

    int32_t *last_sampled; /* [max_seqs]: the token FOLIO_TOKEN_FROM_PREV stands for; -1 none */
    struct slot_history *history; /* [max_seqs]: each slot's tokens, for the penalties */

    /* Scratch for one step of up to max_num_tokens tokens. */
    int32_t *tokens, *tok_pos, *tok_seq;
    float *x, *xn, *q, *k, *v, *attn, *gate, *up;
    float *qkv, *gate_up; /* [max_num_tokens][q+k+v], [..][2 * inter]: the stacked products */
    float *part, *sum;    /* [max_num_tokens][hidden]: a rank's partial sum, their sum (tp > 1) */
    float *shard_logits;  /* [max_seqs][vocab / tp]: a rank's logits (tp > 1) */
    float *rope_cos, *rope_sin; /* [max_num_tokens][head_dim / 2] */
    float *final_x;             /* [max_seqs][hidden] */
    int32_t *sample_seq;        /* [rows]: the sequence of each sampled row, in order */
    int32_t *sample_row;        /* [rows]: its result row (backend.h) */
    int32_t *sample_off;        /* [rows]: its position among the sequence's samples */
    float *scores;              /* [num_threads][scores_cap] */
    size_t scores_cap;
    struct folio_sampler **samplers; /* one per thread */
    float *row_logits;               /* [vocab]: one prompt row's logits */
    int *sample_status;              /* [max_seqs] */
    char (*sample_err)[256];         /* [max_seqs] */

    struct cpu_step_out out[FOLIO_CPU_PIPELINE_DEPTH];
    int out_head, out_count;
};

/* inv_freq[i] = theta^(-2i/d), then the config's scaling, as Hugging Face's
 * _compute_default/linear/llama3_rope_parameters compute it. */
static void compute_inv_freq(const struct folio_model_config *c, double *inv_freq)
{
    int half = c->head_dim / 2;
    const struct folio_rope_scaling *rs = &c->rope_scaling;
    for (int i = 0; i < half; i++) {
        double f = 1.0 / pow((double)c->rope_theta, (2.0 * i) / c->head_dim);
        if (rs->type == FOLIO_ROPE_LINEAR) {
            f /= rs->factor;
        } else if (rs->type == FOLIO_ROPE_LLAMA3) {
            double old_ctx = rs->original_max_position_embeddings;
            double low_wavelen = old_ctx / rs->low_freq_factor;
            double high_wavelen = old_ctx / rs->high_freq_factor;
            double wavelen = 2.0 * M_PI / f;
            if (wavelen > low_wavelen) {
                f /= rs->factor;
            } else if (wavelen >= high_wavelen) {
                double smooth = (old_ctx / wavelen - rs->low_freq_factor) /
                                (rs->high_freq_factor - rs->low_freq_factor);
                f = (1.0 - smooth) * f / rs->factor + smooth * f;
            }
        }
        inv_freq[i] = f;
    }
}

/* ---- the forward pass ----------------------------------------------------- */

/* y = x W^T for ntok rows of x ([ntok][w->cols]); act holds x and, once a
 * packed matrix has met it, its quantized blocks (shared by the products that
 * take the same input). */
static void mm(struct cpu_backend *b, const struct cpu_matrix *w, struct cpu_act *act, float *y)
{
    if (b->ref && w->type == CPU_W_F32) /* E4M3 rows (--quantization fp8) take the kernels */
        cpu_matmul_ref(y, act->x, (const float *)w->data, w->row_bytes / sizeof(float), act->ntok,
                       w->cols, w->rows, b->pool);
    else
        cpu_matmul(b->kern, w, act, y, b->pool);
}

/* The activations x ([ntok][cols]) for the products that follow. */
static struct cpu_act *act_of(struct cpu_backend *b, const float *x, int ntok, int cols)
{
    cpu_act_set(&b->act, x, ntok, cols);
    return &b->act;
}

/* y[t][o] += bias[o]: Qwen2's q/k/v biases, added before RoPE as transformers does. */
static void add_bias(float *y, const float *bias, int ntok, int out)
{
    for (int t = 0; t < ntok; t++)
        for (int o = 0; o < out; o++)
            y[(size_t)t * out + o] += bias[o];
}

static void rmsnorm(float *y, const float *x, const float *w, int ntok, int n, float eps)
{
    for (int t = 0; t < ntok; t++) {
        const float *xr = x + (size_t)t * n;
        float *yr = y + (size_t)t * n;
        double ss = 0;
        for (int i = 0; i < n; i++)
            ss += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(ss / n + eps));
        for (int i = 0; i < n; i++)
            yr[i] = xr[i] * inv * w[i];
    }
}

/* Hugging Face's rotate-half convention: the pairs are (i, i + d/2). */
static void rope(float *v, int nheads, int head_dim, const float *cos_t, const float *sin_t)
{
    int half = head_dim / 2;
    for (int h = 0; h < nheads; h++) {
        float *x = v + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            float a = x[i], b = x[i + half];
            x[i] = a * cos_t[i] - b * sin_t[i];
            x[i + half] = b * cos_t[i] + a * sin_t[i];
        }
    }
}

/* One rank's attention block: its heads' Q/K/V, their cache, attention, and
 * its columns of O, written to y (a partial sum over the ranks). */
static void attention_block(struct cpu_backend *b, const struct folio_step_batch *batch,
                            const struct cpu_rank *R, int l, int ntok, float *y)
{
    const struct folio_model_config *c = &b->cfg;
    const struct cpu_layer *L = &R->layers[l];
    int hidden = c->hidden_size, half = c->head_dim / 2;
    int nkv = R->shard.kv_heads;
    int qdim = R->shard.heads * c->head_dim, kvdim = nkv * c->head_dim;
    struct cpu_act *x = act_of(b, b->xn, ntok, hidden);
    if (L->wqkv.data) {
        int all = qdim + 2 * kvdim;
        mm(b, &L->wqkv, x, b->qkv);
        for (int t = 0; t < ntok; t++) {
            const float *row = b->qkv + (size_t)t * all;
            memcpy(b->q + (size_t)t * qdim, row, (size_t)qdim * sizeof(float));
            memcpy(b->k + (size_t)t * kvdim, row + qdim, (size_t)kvdim * sizeof(float));
            memcpy(b->v + (size_t)t * kvdim, row + qdim + kvdim, (size_t)kvdim * sizeof(float));
        }
    } else {
        mm(b, &L->wq, x, b->q);
        mm(b, &L->wk, x, b->k);
        mm(b, &L->wv, x, b->v);
    }
    if (L->bq) {
        add_bias(b->q, L->bq, ntok, qdim);
        add_bias(b->k, L->bk, ntok, kvdim);
        add_bias(b->v, L->bv, ntok, kvdim);
    }
    for (int t = 0; t < ntok; t++) {
        const float *cs = b->rope_cos + (size_t)t * half, *sn = b->rope_sin + (size_t)t * half;
        rope(b->q + (size_t)t * qdim, R->shard.heads, c->head_dim, cs, sn);
        rope(b->k + (size_t)t * kvdim, nkv, c->head_dim, cs, sn);
        const struct folio_step_seq *s = &batch->seqs[b->tok_seq[t]];
        int32_t pos = b->tok_pos[t];
        size_t off = cpu_kv_offset(c, nkv, s->block_table[pos / FOLIO_KV_BLOCK_SIZE], pos);
        cpu_kv_write(b->kv, b->kern, L->k_cache, off, b->k + (size_t)t * kvdim, kvdim, L->k_scale);
        cpu_kv_write(b->kv, b->kern, L->v_cache, off, b->v + (size_t)t * kvdim, kvdim, L->v_scale);
    }
    struct cpu_attention a = {.cfg = &b->cfg,
                              .kern = b->kern,
                              .kv = b->kv,
                              .batch = batch,
                              .tok_seq = b->tok_seq,
                              .tok_pos = b->tok_pos,
                              .q = b->q,
                              .out = b->attn,
                              .scores = b->scores,
                              .scores_cap = b->scores_cap,
                              .sh = &R->shard,
                              .k_cache = L->k_cache,
                              .v_cache = L->v_cache,
                              .k_scale = L->k_scale,
                              .v_scale = L->v_scale,
                              .ntok = ntok};
    cpu_attention_run(b->pool, &a);
    mm(b, &L->wo, act_of(b, b->attn, ntok, qdim), y);
}

/* One rank's MLP: its intermediate features' gate and up, SwiGLU, and its
 * columns of down, written to y (a partial sum over the ranks). */
static void mlp_block(struct cpu_backend *b, const struct cpu_rank *R, int l, int ntok, float *y)
{
    const struct cpu_layer *L = &R->layers[l];
    int hidden = b->cfg.hidden_size, inter = R->shard.inter;
    struct cpu_act *x = act_of(b, b->xn, ntok, hidden);
    if (L->w_gate_up.data) {
        mm(b, &L->w_gate_up, x, b->gate_up);
        for (int t = 0; t < ntok; t++) {
            const float *g = b->gate_up + (size_t)t * 2 * inter, *u = g + inter;
            float *out = b->gate + (size_t)t * inter;
            for (int i = 0; i < inter; i++)
                out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
        }
    } else {
        mm(b, &L->w_gate, x, b->gate);
        mm(b, &L->w_up, x, b->up);
        for (size_t i = 0; i < (size_t)ntok * inter; i++) {
            float g = b->gate[i];
            b->gate[i] = g / (1.0f + expf(-g)) * b->up[i];
        }
    }
    mm(b, &L->w_down, act_of(b, b->gate, ntok, inter), y);
}

/* x += the sum of every rank's block: what an all-reduce gives each GPU,
 * added in rank order. One rank writes its block straight into xn, whose
 * normed input it no longer needs. */
static void add_all_ranks(struct cpu_backend *b, const struct folio_step_batch *batch, int l,
                          int ntok, int mlp)
{
    size_t n = (size_t)ntok * b->cfg.hidden_size;
    float *sum = b->tp == 1 ? b->xn : b->sum;
    for (int r = 0; r < b->tp; r++) {
        float *y = r == 0 ? sum : b->part;
        if (mlp)
            mlp_block(b, &b->ranks[r], l, ntok, y);
        else
            attention_block(b, batch, &b->ranks[r], l, ntok, y);
        if (r > 0)
            for (size_t i = 0; i < n; i++)
                sum[i] += b->part[i];
    }
    for (size_t i = 0; i < n; i++)
        b->x[i] += sum[i];
}

static void forward_layer(struct cpu_backend *b, const struct folio_step_batch *batch, int l,
                          int ntok)
{
    const struct folio_model_config *c = &b->cfg;
    const struct cpu_layer *L0 = &b->ranks[0].layers[l]; /* the norms: every rank's copy */
    rmsnorm(b->xn, b->x, L0->attn_norm, ntok, c->hidden_size, c->rms_norm_eps);
    add_all_ranks(b, batch, l, ntok, 0);
    rmsnorm(b->xn, b->x, L0->mlp_norm, ntok, c->hidden_size, c->rms_norm_eps);
    add_all_ranks(b, batch, l, ntok, 1);
}

/* logits[rows][vocab] = x[rows][hidden] through the LM head: each rank's
 * vocabulary rows, gathered into place. */
static void lm_head(struct cpu_backend *b, const float *x, int rows, float *logits)
{
    const struct folio_model_config *c = &b->cfg;
    struct cpu_act *act = act_of(b, x, rows, c->hidden_size);
    if (b->tp == 1) {
        mm(b, &b->ranks[0].lm_head, act, logits);
        return;
    }
    for (int r = 0; r < b->tp; r++) {
        const struct folio_tp_shard *sh = &b->ranks[r].shard;
        mm(b, &b->ranks[r].lm_head, act, b->shard_logits);
        for (int j = 0; j < rows; j++)
            memcpy(logits + (size_t)j * c->vocab_size + sh->vocab0,
                   b->shard_logits + (size_t)j * sh->vocab, (size_t)sh->vocab * sizeof(float));
    }
}

/* ---- the step interface --------------------------------------------------- */

/* The batch checked (folio_step_batch_check), then its tokens staged: each
 * FOLIO_TOKEN_FROM_PREV resolved to its slot's last sample, positions noted and
 * the slots' token histories (for the penalties) extended. */
static int stage_batch(struct cpu_backend *b, const struct folio_step_batch *batch, char *err,
                       size_t errlen)
{
    if (folio_step_batch_check(&b->base, batch, err, errlen) != 0)
        return -1;
    int32_t t = 0;
    for (int32_t i = 0; i < batch->num_seqs; i++) {
        const struct folio_step_seq *s = &batch->seqs[i];
        for (int32_t j = 0; j < s->num_new_tokens; j++, t++) {
            int32_t id = batch->token_ids[t];
            if (id == FOLIO_TOKEN_FROM_PREV) {
                id = b->last_sampled[s->slot];
                if (id < 0) {
                    snprintf(err, errlen,
                             "step: token %d (seq %d) is FOLIO_TOKEN_FROM_PREV but slot %d has "
                             "not sampled yet",
                             t, i, s->slot);
                    return -1;
                }
            }
            b->tokens[t] = id;
            b->tok_seq[t] = i;
            b->tok_pos[t] = s->context_len - s->num_new_tokens + j;
            if (history_put(&b->history[s->slot], b->tok_pos[t], id) != 0) {
                snprintf(err, errlen, "step: out of memory for slot %d's token history", s->slot);
                return -1;
            }
        }
    }
    return 0;
}

static int ensure_scores(struct cpu_backend *b, const struct folio_step_batch *batch, char *err,
                         size_t errlen)
{
    size_t need = 0;
    for (int32_t i = 0; i < batch->num_seqs; i++)
        if ((size_t)batch->seqs[i].context_len > need)
            need = (size_t)batch->seqs[i].context_len;
    if (need <= b->scores_cap)
        return 0;
    size_t cap = need < 1024 ? 1024 : need * 2;
    float *s = cpu_alloc_floats(cap * (size_t)b->num_threads);
    if (!s) {
        snprintf(err, errlen, "cpu backend: out of memory for attention scores (context %zu)",
                 need);
        return -1;
    }
    free(b->scores);
    b->scores = s;
    b->scores_cap = cap;
    return 0;
}

/* folio_row_logits_fn: token row t's final hidden state (in b->x after the
 * layers) through the final norm and the LM head. */
static void row_logits(void *ctx, int32_t t, float *logits)
{
    struct cpu_backend *b = ctx;
    const struct folio_model_config *c = &b->cfg;
    rmsnorm(b->final_x, b->x + (size_t)t * c->hidden_size, b->final_norm, 1, c->hidden_size,
            c->rms_norm_eps);
    lm_head(b, b->final_x, 1, logits);
}

struct sample_job {
    struct cpu_backend *b;
    const struct folio_step_batch *batch;
    struct cpu_step_out *out;
};

/* Sampling sequence j of the step: its bias and mask applied, a token drawn. */
static void sample_chunk(void *arg, int j, int thread)
{
    const struct sample_job *sj = arg;
    struct cpu_backend *b = sj->b;
    struct cpu_step_out *out = sj->out;
    const struct folio_model_config *c = &b->cfg;
    int32_t i = b->sample_row[j], off = b->sample_off[j];
    const struct folio_step_seq *s = &sj->batch->seqs[b->sample_seq[j]];
    struct folio_sample_result r;
    const struct slot_history *sh = &b->history[s->slot];
    struct folio_token_history h = {sh->ids, sh->len, s->output_index + off};
    float *logits = out->logits + (size_t)j * c->vocab_size;
    folio_logits_add_bias(logits, c->vocab_size, s->bias, s->num_bias);
    if (s->allowed)
        folio_logits_apply_mask(logits, c->vocab_size, s->allowed);
    b->sample_status[j] =
        folio_sample(b->samplers[thread], logits, &s->sampling, (uint32_t)(s->output_index + off),
                     &h, &r, b->sample_err[j], sizeof b->sample_err[j]);
    if (b->sample_status[j] == 0) {
        out->token_ids[i] = r.token;
        out->logprobs[i] = r.logprob;
        memcpy(out->top_ids + (size_t)i * FOLIO_MAX_LOGPROBS, r.top_ids, sizeof r.top_ids);
        memcpy(out->top_logprobs + (size_t)i * FOLIO_MAX_LOGPROBS, r.top_logprobs,
               sizeof r.top_logprobs);
    }
}

static int cpu_launch(struct folio_backend *base, const struct folio_step_batch *batch, char *err,
                      size_t errlen)
{
    struct cpu_backend *b = (struct cpu_backend *)base;
    const struct folio_model_config *c = &b->cfg;
    if (b->out_count == FOLIO_CPU_PIPELINE_DEPTH) {
        snprintf(err, errlen, "step: %d steps already launched and not collected",
                 FOLIO_CPU_PIPELINE_DEPTH);
        return -1;
    }
    if (stage_batch(b, batch, err, errlen) != 0 || ensure_scores(b, batch, err, errlen) != 0)
        return -1;
    int ntok = batch->num_tokens, hidden = c->hidden_size, half = c->head_dim / 2;

    for (int t = 0; t < ntok; t++) {
        /* The rank holding the id's row gives it; the others' zeros would
         * add nothing to an all-reduce. */
        int32_t id = b->tokens[t], per_rank = b->ranks[0].shard.vocab;
        const struct cpu_rank *R = &b->ranks[id / per_rank];
        cpu_matrix_row_f32(&R->embed, id - R->shard.vocab0, b->x + (size_t)t * hidden);
        for (int i = 0; i < half; i++) {
            double angle = (double)b->tok_pos[t] * b->inv_freq[i];
            b->rope_cos[(size_t)t * half + i] = (float)cos(angle);
            b->rope_sin[(size_t)t * half + i] = (float)sin(angle);
        }
    }
    for (int l = 0; l < c->num_layers; l++)
        forward_layer(b, batch, l, ntok);

    /* Final norm and LM head only for the sampled positions: the last new token of sampling
     * sequences, and the 1 + num_draft last of a sequence with drafts (its draft rows after
     * every sequence's row). */
    int nsample = 0, t_end = 0, draft_row = batch->num_seqs;
    for (int32_t i = 0; i < batch->num_seqs; i++) {
        const struct folio_step_seq *s = &batch->seqs[i];
        t_end += s->num_new_tokens;
        if (!s->sample)
            continue;
        for (int32_t j = 0; j <= s->num_draft; j++) {
            int32_t t = t_end - 1 - s->num_draft + j;
            rmsnorm(b->final_x + (size_t)nsample * hidden, b->x + (size_t)t * hidden, b->final_norm,
                    1, hidden, c->rms_norm_eps);
            b->sample_seq[nsample] = i;
            b->sample_row[nsample] = j == 0 ? i : draft_row++;
            b->sample_off[nsample++] = j;
        }
    }
    struct cpu_step_out *out = &b->out[(b->out_head + b->out_count) % FOLIO_CPU_PIPELINE_DEPTH];
    out->num_seqs = batch->num_seqs;
    out->num_rows = draft_row;
    out->num_logits = nsample;
    for (int32_t i = 0; i < draft_row; i++) {
        out->token_ids[i] = -1;
        out->logprobs[i] = 0.0f;
        for (int j = 0; j < FOLIO_MAX_LOGPROBS; j++) {
            out->top_ids[(size_t)i * FOLIO_MAX_LOGPROBS + j] = -1;
            out->top_logprobs[(size_t)i * FOLIO_MAX_LOGPROBS + j] = -INFINITY;
        }
    }
    if (nsample > 0)
        lm_head(b, b->final_x, nsample, out->logits);

    struct sample_job sj = {b, batch, out};
    cpu_pool_run(b->pool, nsample, sample_chunk, &sj);
    for (int j = 0; j < nsample; j++) {
        int32_t i = b->sample_seq[j];
        if (b->sample_status[j] != 0) {
            snprintf(err, errlen, "step: seq %d (slot %d): %s", i, batch->seqs[i].slot,
                     b->sample_err[j]);
            return -1;
        }
        /* A sequence's rows come in order, so FOLIO_TOKEN_FROM_PREV stands for its last row's
         * sample, after a verify step the one after its last draft (as on CUDA). */
        b->last_sampled[batch->seqs[i].slot] = out->token_ids[b->sample_row[j]];
    }
    if (folio_cpu_prompt_logprobs(batch, c->vocab_size, row_logits, b, b->row_logits, &out->prompt,
                                  err, errlen) != 0)
        return -1;
    b->out_count++;
    return 0;
}

static int cpu_collect(struct folio_backend *base, struct folio_step_result *res, char *err,
                       size_t errlen)
{
    struct cpu_backend *b = (struct cpu_backend *)base;
    if (b->out_count == 0) {
        snprintf(err, errlen, "collect: no step was launched");
        return -1;
    }
    const struct cpu_step_out *out = &b->out[b->out_head];
    size_t n = (size_t)out->num_rows, ntop = n * FOLIO_MAX_LOGPROBS;
    if (res->token_ids)
        memcpy(res->token_ids, out->token_ids, n * sizeof *res->token_ids);
    if (res->logprobs)
        memcpy(res->logprobs, out->logprobs, n * sizeof *res->logprobs);
    if (res->top_ids)
        memcpy(res->top_ids, out->top_ids, ntop * sizeof *res->top_ids);
    if (res->top_logprobs)
        memcpy(res->top_logprobs, out->top_logprobs, ntop * sizeof *res->top_logprobs);
    folio_prompt_lps_copy(&out->prompt, res);
    if (res->logits)
        memcpy(res->logits, out->logits,
               (size_t)out->num_logits * (size_t)b->cfg.vocab_size * sizeof *res->logits);
    b->out_head = (b->out_head + 1) % FOLIO_CPU_PIPELINE_DEPTH;
    b->out_count--;
    return 0;
}

static void cpu_destroy(struct folio_backend *base)
{
    struct cpu_backend *b = (struct cpu_backend *)base;
    if (!b)
        return;
    folio_backend_base_free(base);
    cpu_pool_free(b->pool);
    cpu_free_ranks(b->ranks, FOLIO_CPU_TP_MAX, b->cfg.num_layers);
    free(b->final_norm);
    free(b->inv_freq);
    free(b->last_sampled);
    if (b->history)
        for (int i = 0; i < b->base.max_seqs; i++)
            free(b->history[i].ids);
    free(b->history);
    free(b->tokens);
    free(b->tok_pos);
    free(b->tok_seq);
    free(b->act.q);
    free(b->act.d);
    free(b->act.s);
    free(b->act.x8);
    free(b->act.x8_scale);
    float *scratch[] = {
        b->x,        b->xn,      b->q,       b->k,    b->v,   b->attn,         b->gate,
        b->up,       b->qkv,     b->gate_up, b->part, b->sum, b->shard_logits, b->rope_cos,
        b->rope_sin, b->final_x, b->scores};
    for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++)
        free(scratch[i]);
    free(b->sample_seq);
    free(b->sample_row);
    free(b->sample_off);
    free(b->sample_status);
    free(b->sample_err);
    if (b->samplers)
        for (int i = 0; i < b->num_threads; i++)
            folio_sampler_free(b->samplers[i]);
    free(b->samplers);
    for (int i = 0; i < FOLIO_CPU_PIPELINE_DEPTH; i++) {
        free(b->out[i].token_ids);
        free(b->out[i].logprobs);
        free(b->out[i].top_ids);
        free(b->out[i].top_logprobs);
        free(b->out[i].logits);
        folio_prompt_lps_free(&b->out[i].prompt);
    }
    free(b->row_logits);
    free(b);
}

static const struct folio_backend_ops cpu_ops = {
    .name = "cpu",
    .launch = cpu_launch,
    .collect = cpu_collect,
    .destroy = cpu_destroy,
};

static int check_config(const struct folio_model_config *c, char *err, size_t errlen)
{
    if (c->hidden_size <= 0 || c->intermediate_size <= 0 || c->num_layers <= 0 ||
        c->num_heads <= 0 || c->num_kv_heads <= 0 || c->head_dim <= 0 || c->vocab_size <= 0) {
        snprintf(err, errlen, "cpu backend: config has a non-positive size");
        return -1;
    }
    if (c->num_heads % c->num_kv_heads != 0) {
        snprintf(err, errlen,
                 "cpu backend: num_attention_heads %d is not a multiple of "
                 "num_key_value_heads %d",
                 c->num_heads, c->num_kv_heads);
        return -1;
    }
    if (c->head_dim % 2 != 0) {
        snprintf(err, errlen, "cpu backend: head_dim %d must be even for RoPE", c->head_dim);
        return -1;
    }
    return 0;
}

int folio_cpu_backend_create(const struct folio_model *m, const struct folio_backend_options *opt,
                             struct folio_backend **out, char *err, size_t errlen)
{
    *out = NULL;
    if (check_config(&m->config, err, errlen) != 0)
        return -1;
    if (opt->max_seqs < 1 || opt->max_num_tokens < 1) {
        snprintf(err, errlen, "cpu backend: max_seqs %d and max_num_tokens %d must be >= 1",
                 opt->max_seqs, opt->max_num_tokens);
        return -1;
    }
    const struct folio_model_config *c = &m->config;
    int tp = opt->tensor_parallel_size > 0 ? opt->tensor_parallel_size : 1;
    size_t kvdim = (size_t)c->num_kv_heads * c->head_dim;
    size_t block_floats = FOLIO_KV_BLOCK_SIZE * kvdim; /* all the ranks' heads together */
    enum cpu_kv_type kv = opt->kv_cache_dtype == FOLIO_KV_FP8 ? CPU_KV_E4M3
                          : opt->cpu_reference                ? CPU_KV_F32
                                                              : CPU_KV_F16;
    size_t kv_elem = cpu_kv_elem_bytes(kv);
    size_t block_bytes = 2 * (size_t)c->num_layers * block_floats * kv_elem;
    size_t num_blocks =
        opt->num_kv_blocks > 0 ? (size_t)opt->num_kv_blocks : opt->cpu_kv_bytes / block_bytes;
    if (opt->num_kv_blocks < 0 || num_blocks < 1 || num_blocks > INT32_MAX) {
        snprintf(err, errlen,
                 "cpu backend: the KV pool needs num_kv_blocks > 0 or cpu_kv_bytes >= %zu (one "
                 "block); got num_kv_blocks %d, cpu_kv_bytes %zu",
                 block_bytes, opt->num_kv_blocks, opt->cpu_kv_bytes);
        return -1;
    }

    struct cpu_backend *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "cpu backend: out of memory");
        return -1;
    }
    b->base.ops = &cpu_ops;
    b->base.caps = (struct folio_backend_caps){.pipeline_depth = 1,
                                               .prompt_logprobs = true,
                                               .grammar = true,
                                               .host_cores = true,
                                               .verify_drafts = true};
    b->base.model = m;
    b->base.num_kv_blocks = (int)num_blocks;
    b->base.max_seqs = opt->max_seqs;
    b->base.vocab_size = m->config.vocab_size;
    b->base.max_num_tokens = opt->max_num_tokens;
    b->cfg = *c;
    b->num_threads = opt->num_threads > 0 ? opt->num_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (b->num_threads < 1)
        b->num_threads = 1;
    if (!(b->pool = cpu_pool_new(b->num_threads))) {
        snprintf(err, errlen, "cpu backend: could not start %d threads", b->num_threads);
        cpu_destroy(&b->base);
        return -1;
    }
    b->ref = opt->cpu_reference;
    b->kv = kv;
    b->kern = cpu_kernels_best();

    b->tp = tp;
    enum cpu_weight_policy policy = b->ref ? CPU_WEIGHTS_F32 : CPU_WEIGHTS_PACKED;
    bool fp8 = folio_backend_quantization(m, opt->quantization) == FOLIO_QUANT_FP8;
    if (cpu_load_ranks(m, tp, policy, fp8 ? CPU_WEIGHTS_E4M3 : policy, b->ranks, err, errlen) !=
            0 ||
        cpu_convert_tensor(m->final_norm, (size_t)c->hidden_size, "final norm", &b->final_norm, err,
                           errlen) != 0) {
        cpu_destroy(&b->base);
        return -1;
    }

    size_t T = (size_t)opt->max_num_tokens, S = (size_t)opt->max_seqs;
    size_t R = S + FOLIO_MAX_DRAFT_ROWS; /* sampled rows: every sequence and the draft rows */
    size_t hidden = (size_t)c->hidden_size, qdim = (size_t)c->num_heads * c->head_dim;
    size_t half = (size_t)c->head_dim / 2, inter = (size_t)c->intermediate_size;
    int ok = 1;
    for (int r = 0; r < tp; r++) {
        for (int l = 0; l < c->num_layers; l++) {
            /* calloc: a block read before it is written holds zeros, not garbage. */
            struct cpu_layer *L = &b->ranks[r].layers[l];
            L->k_cache = calloc(num_blocks * block_floats / (size_t)tp, kv_elem);
            L->v_cache = calloc(num_blocks * block_floats / (size_t)tp, kv_elem);
            ok &= L->k_cache && L->v_cache;
            L->k_scale = m->layers[l].k_scale;
            L->v_scale = m->layers[l].v_scale;
        }
    }
    b->inv_freq = malloc(half * sizeof *b->inv_freq);
    b->last_sampled = malloc(S * sizeof *b->last_sampled);
    b->history = calloc(S, sizeof *b->history);
    b->tokens = malloc(T * sizeof *b->tokens);
    b->tok_pos = malloc(T * sizeof *b->tok_pos);
    b->tok_seq = malloc(T * sizeof *b->tok_seq);
    b->x = cpu_alloc_floats(T * hidden);
    b->xn = cpu_alloc_floats(T * hidden);
    b->q = cpu_alloc_floats(T * qdim);
    b->k = cpu_alloc_floats(T * kvdim);
    b->v = cpu_alloc_floats(T * kvdim);
    b->attn = cpu_alloc_floats(T * qdim);
    b->gate = cpu_alloc_floats(T * inter);
    b->up = cpu_alloc_floats(T * inter);
    b->qkv = cpu_alloc_floats(T * (qdim + 2 * kvdim));
    b->gate_up = cpu_alloc_floats(T * 2 * inter);
    size_t widest = hidden > inter ? hidden : inter;
    widest = widest > qdim ? widest : qdim;
    b->act.q = aligned_alloc(64, (T * widest + 63) / 64 * 64);
    b->act.d = cpu_alloc_floats(T * widest / CPU_QBLOCK + 1);
    b->act.s = cpu_alloc_floats(T * widest / CPU_QBLOCK + 1);
    b->act.x8 = cpu_alloc_floats(fp8 ? T * widest : 1);
    b->act.x8_scale = cpu_alloc_floats(T);
    b->part = cpu_alloc_floats(tp > 1 ? T * hidden : 1);
    b->sum = cpu_alloc_floats(tp > 1 ? T * hidden : 1);
    b->shard_logits = cpu_alloc_floats(tp > 1 ? R * (size_t)c->vocab_size / (size_t)tp : 1);
    b->rope_cos = cpu_alloc_floats(T * half);
    b->rope_sin = cpu_alloc_floats(T * half);
    b->final_x = cpu_alloc_floats(R * hidden);
    b->sample_seq = malloc(R * sizeof *b->sample_seq);
    b->sample_row = malloc(R * sizeof *b->sample_row);
    b->sample_off = malloc(R * sizeof *b->sample_off);
    b->sample_status = malloc(R * sizeof *b->sample_status);
    b->row_logits = cpu_alloc_floats((size_t)c->vocab_size);
    b->sample_err = malloc(R * sizeof *b->sample_err);
    b->samplers = calloc((size_t)b->num_threads, sizeof *b->samplers);
    ok &= b->inv_freq && b->last_sampled && b->history && b->tokens && b->tok_pos && b->tok_seq &&
          b->act.q && b->act.d && b->act.s && b->act.x8 && b->act.x8_scale && b->x && b->xn &&
          b->q && b->k && b->v && b->attn && b->gate && b->up && b->qkv && b->gate_up && b->part &&
          b->sum && b->shard_logits && b->rope_cos && b->rope_sin && b->final_x && b->sample_seq &&
          b->sample_row && b->sample_off && b->sample_status && b->sample_err && b->samplers &&
          b->row_logits;
    for (int i = 0; ok && i < b->num_threads; i++)
        ok &= (b->samplers[i] = folio_sampler_new(c->vocab_size)) != NULL;
    for (int i = 0; i < FOLIO_CPU_PIPELINE_DEPTH; i++) {
        struct cpu_step_out *o = &b->out[i];
        o->token_ids = malloc(R * sizeof *o->token_ids);
        o->logprobs = malloc(R * sizeof *o->logprobs);
        o->top_ids = malloc(R * FOLIO_MAX_LOGPROBS * sizeof *o->top_ids);
        o->top_logprobs = malloc(R * FOLIO_MAX_LOGPROBS * sizeof *o->top_logprobs);
        o->logits = cpu_alloc_floats(R * (size_t)c->vocab_size);
        ok &= o->token_ids && o->logprobs && o->top_ids && o->top_logprobs && o->logits &&
              folio_prompt_lps_alloc(&o->prompt, opt->max_num_tokens) == 0;
    }
    if (!ok) {
        snprintf(err, errlen,
                 "cpu backend: out of memory (KV pool %zu blocks of %zu bytes, %d seqs, %d "
                 "tokens per step)",
                 num_blocks, block_bytes, opt->max_seqs, opt->max_num_tokens);
        cpu_destroy(&b->base);
        return -1;
    }
    for (size_t i = 0; i < S; i++)
        b->last_sampled[i] = -1;
    compute_inv_freq(c, b->inv_freq);
    *out = &b->base;
    return 0;
}
