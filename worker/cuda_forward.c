/* The forward pass of one step on the compute stream: embedding, the layers,
 * the final norm and LM head of the rows that sample, and the sampler.
 *
 * plan_path picks the regime once from the step's row count and whether it
 * has prefill tokens; each regime then has its own straight-line forward:
 *   PATH_GEMV      up to gemv_max_rows rows: GEMVs with the norms (and for
 *                  QKV, RoPE and the cache write) fused in, launched with PDL;
 *                  under --quantization fp8 on the e4m3 weights (W8A8), of a
 *                  GGUF whose projections are all Q4_0 on its blocks.
 *   PATH_TMA       up to FOLIO_K_TMA_MAX_ROWS rows: the TMA GEMM, its K slices
 *                  summed by the norm or RoPE kernel after it, launched with PDL.
 *   PATH_LT        cuBLASLt with norm kernels: prefill and mixed steps, and
 *                  decode steps whose O and down projections split K.
 *   PATH_LT_FUSED  decode steps on cuBLASLt without a split: no norm kernels
 *                  (the projections read the residual, attention and SiLU
 *                  scale by 1 / rms, O and down add into the residual) and
 *                  RoPE inside attention.
 *   PATH_QUANT     the other steps under --quantization fp8 or of a GGUF kept
 *                  packed: PATH_LT's kernels with the four
 *                  projections in the weights' format (cuda_fp8.c: FP8
 *                  cuBLASLt; cuda_gguf.c: the packed GEMV for a few rows,
 *                  else the widened copy on cuBLASLt), the LM head bf16.
 * Under --kv-cache-dtype fp8 the caches hold e4m3 codes, written by the RoPE
 * kernel alone (kv_write) and read by the attention kernels' fp8 variants, so
 * steps take the paths where that kernel runs: PATH_GEMV without the fused
 * GEMV+RoPE, PATH_TMA with QKV whole, PATH_LT with RoPE outside attention.
 * A model with a QKV bias (Qwen2) adds it in a kernel of its own after the
 * QKV projection, so its steps take the paths where q, k and v are whole and
 * unrotated there: no fused GEMV+RoPE, no K slices of QKV, no fused path. */
#include "cuda_internal.h"

enum cuda_path { PATH_GEMV, PATH_TMA, PATH_LT, PATH_LT_FUSED, PATH_QUANT };

/* What a step runs, fixed before its first launch. */
struct step_plan {
    enum cuda_path path;
    int split_qkv, split_o, split_down; /* K slices (1: none) */
    bool rope_in_attention;             /* PATH_LT: attention rotates q and writes K/V */
    int drops;                          /* L2_DROP_* bits (decode steps on cuBLASLt) */
};

/* The step's device views and sizes, shared by the regimes' forwards. */
struct step_ctx {
    const struct step_layout *l;
    struct folio_k_batch kb;
    int t_rows, s_rows, n_sample, num_tiles;
    const int32_t *token_ids, *token_slot, *sample_rows;
    struct step_plan plan;
};

/* Whether a step of this many rows takes PATH_GEMV. */
static bool takes_gemv(const struct cuda_backend *cb, int rows)
{
    return rows <= cb->paths.gemv_max_rows && (!cb->gguf || cb->gguf_q4_gemv);
}

/* The decode kernel's plan for a decode step of n rows: from the graph
 * bucket, so an eager step splits as its graph would. One-warp CTAs and the
 * combine kernel where the step's GEMVs use PDL; TMA steps keep their plan
 * whether or not attention is launched with PDL there. */
struct folio_k_decode_plan cuda_decode_plan(const struct cuda_backend *cb, int n)
{
    bool pdl = takes_gemv(cb, cuda_graph_bucket(n));
    return folio_k_attention_decode_plan(cuda_graph_bucket(n), cb->kv_heads, cb->head_dim,
                                         cb->num_sms, FOLIO_K_ATTN_WARPS_PER_SM, 0, pdl);
}

static struct step_plan plan_path(const struct cuda_backend *cb, int rows, bool has_prefill)
{
    struct step_plan p = {.split_qkv = 1, .split_o = 1, .split_down = 1};
    if (takes_gemv(cb, rows)) {
        p.path = PATH_GEMV;
        return p;
    }
    if (cb->fp8 || cb->gguf) {
        p.path = PATH_QUANT;
        return p;
    }
    if (cb->tma && rows <= FOLIO_K_TMA_MAX_ROWS) {
        p.path = PATH_TMA;
        /* the bias and the fp8 cache's write need qkv whole */
        p.split_qkv = cb->qkv_bias || cb->kv_fp8 ? 1 : cb->tma_split_qkv;
        p.split_o = cb->tma_split_o;
        p.split_down = rows <= TMA_SMALL_ROWS ? cb->tma_split_down_small : cb->tma_split_down;
        return p;
    }
    int qd = cb->heads * cb->head_dim;
    p.split_o = cuda_splitk_slices(cb->paths.splitk_o, rows, qd);
    p.split_down = cuda_splitk_slices(cb->paths.splitk_down, rows, cb->inter);
    p.rope_in_attention = !has_prefill && cb->attn_tile_tokens != 0 && !cb->kv_fp8;
    p.drops = has_prefill ? 0 : cb->l2_drop;
    /* A QKV bias must be added after the norm's scaling, which the fused path
     * leaves to attention. */
    bool fused = p.rope_in_attention && p.split_o == 1 && p.split_down == 1 && !cb->qkv_bias;
    p.path = fused ? PATH_LT_FUSED : PATH_LT;
    return p;
}

/* The O or down projection on cuBLASLt: into proj_out (splits 1), or as
 * `splits` f32 partials that the next add_rmsnorm sums. */
static int project(struct cuda_backend *cb, const bf16 *x, const bf16 *w, int m, int k, int splits,
                   char *err, size_t errlen)
{
    if (splits <= 1)
        return cuda_gemm(cb, x, w, cb->proj_out, m, cb->hidden, k, false, err, errlen);
    return cuda_gemm_splitk(cb, x, w, cb->splitk_partials, m, cb->hidden, k, splits, err, errlen);
}

/* folio_k_add_rmsnorm, adding what the last projection left: nothing
 * (add_splits 0), proj_out (1), or its add_splits f32 partials of m rows
 * each. drops: with L2_DROP_ADD what it adds, once added, and dead
 * (dead_bytes of it) with the bit `dead_bit`. */
static cudaError_t add_rmsnorm(struct cuda_backend *cb, bf16 *out, bf16 *residual, int add_splits,
                               const bf16 *weight, const int32_t *rows, int num_rows, int m,
                               bool pdl, int drops, int dead_bit, const void *dead,
                               int64_t dead_bytes)
{
    struct folio_k_l2_drop drop = {0};
    if (drops & dead_bit)
        drop.dead = dead, drop.dead_bytes = dead_bytes;
    drop.input = (drops & L2_DROP_ADD) != 0;
    if (add_splits > 1)
        return folio_k_add_rmsnorm_partials(out, residual, cb->splitk_partials, add_splits,
                                            (int64_t)m * cb->hidden, weight, rows, num_rows,
                                            cb->hidden, cb->eps, drop, pdl, cb->stream);
    return folio_k_add_rmsnorm(out, residual, add_splits == 1 ? cb->proj_out : NULL, weight, rows,
                               num_rows, cb->hidden, cb->eps, drop, pdl, cb->stream);
}

/* The layer's scales of K and V in the fp8 cache, from its cache's place in the pool. */
static int kv_layer(const struct cuda_backend *cb, const void *kc)
{
    return (int)(((const unsigned char *)kc - cb->kv_pool) / (2 * cb->kv_layer_bytes));
}

/* attention() over the e4m3 caches (q rotated, the new K/V written by kv_write). */
static int attention_fp8(struct cuda_backend *cb, const struct step_ctx *x, const uint8_t *kc,
                         const uint8_t *vc, bool pdl, char *err, size_t errlen)
{
    cudaStream_t s = cb->stream;
    const float *sc = cb->kv_scale + 2 * kv_layer(cb, kc);
    if (cb->attn_tile_tokens == 0) {
        CUDA_CHECK(folio_k_paged_attention_ref_fp8(cb->attn_out, cb->qkv, kc, vc, x->kb, cb->heads,
                                                   cb->kv_heads, cb->head_dim, sc[0], sc[1], s));
    } else if (x->num_tiles < 0) {
        CUDA_CHECK(folio_k_attention_decode_fp8(cb->attn_out, cb->qkv, kc, vc, x->kb,
                                                cuda_decode_plan(cb, x->kb.num_tokens),
                                                cb->attn_workspace, cb->attn_counters, cb->heads,
                                                cb->kv_heads, cb->head_dim, sc[0], sc[1], pdl, s));
    } else {
        CUDA_CHECK(folio_k_attention_prefill_fp8(
            cb->attn_out, cb->qkv, kc, vc, x->kb, (const int32_t *)(cb->d_meta + x->l->attn_tiles),
            x->num_tiles, cb->heads, cb->kv_heads, cb->head_dim, sc[0], sc[1], s));
    }
    return 0;
}

/* RoPE and the cache write of one layer's new K/V (folio_k_rope_kv_write), into the bf16 or
 * the e4m3 caches. */
static cudaError_t kv_write(struct cuda_backend *cb, const struct step_ctx *x, void *kc, void *vc,
                            bool pdl)
{
    if (!cb->kv_fp8)
        return folio_k_rope_kv_write(cb->qkv, kc, vc, cb->rope_cos_sin, x->kb, cb->heads,
                                     cb->kv_heads, cb->head_dim, pdl, cb->stream);
    const float *sc = cb->kv_scale + 2 * kv_layer(cb, kc);
    return folio_k_rope_kv_write_fp8(cb->qkv, kc, vc, cb->rope_cos_sin, x->kb, cb->heads,
                                     cb->kv_heads, cb->head_dim, sc[0], sc[1], pdl, cb->stream);
}

/* Attention of one layer: the split-KV decode kernel for decode-only steps,
 * the query-tile kernel otherwise, the reference kernel for shapes the
 * tensor-core kernels do not take. */
static int attention(struct cuda_backend *cb, const struct step_ctx *x, void *kc, void *vc,
                     const uint32_t *rope_cos_sin, struct folio_k_row_norm norm,
                     struct folio_k_l2_drop drop, bool pdl, char *err, size_t errlen)
{
    cudaStream_t s = cb->stream;
    if (cb->kv_fp8)
        return attention_fp8(cb, x, kc, vc, pdl, err, errlen);
    if (cb->attn_tile_tokens == 0) {
        CUDA_CHECK(folio_k_paged_attention_ref(cb->attn_out, cb->qkv, kc, vc, x->kb, cb->heads,
                                               cb->kv_heads, cb->head_dim, s));
    } else if (x->num_tiles < 0) {
        CUDA_CHECK(folio_k_attention_decode(
            cb->attn_out, cb->qkv, kc, vc, x->kb, cuda_decode_plan(cb, x->kb.num_tokens),
            cb->attn_workspace, cb->attn_counters, cb->heads, cb->kv_heads, cb->head_dim,
            rope_cos_sin, norm, drop, pdl, s));
    } else {
        CUDA_CHECK(folio_k_attention_prefill(
            cb->attn_out, cb->qkv, kc, vc, x->kb, (const int32_t *)(cb->d_meta + x->l->attn_tiles),
            x->num_tiles, cb->heads, cb->kv_heads, cb->head_dim, s));
    }
    return 0;
}

/* The step's first kernels: the embedding gather (alone, or with the first
 * norm in the same kernel), then the penalty update alongside it (PDL): every
 * step, graphs included (rows without penalties return at once), before the
 * sampler overwrites last_sampled, which it reads. */
static int embed(struct cuda_backend *cb, const struct step_ctx *x, bool with_norm, char *err,
                 size_t errlen)
{
    cudaStream_t s = cb->stream;
    if (with_norm)
        CUDA_CHECK(folio_k_embed_rmsnorm(cb->normed, cb->res, cb->embed, x->token_ids,
                                         x->token_slot, cb->d_last_sampled, cb->lw[0].attn_norm,
                                         x->t_rows, cb->hidden, cb->vocab, cb->eps, 0, s));
    else
        CUDA_CHECK(folio_k_embed(cb->res, cb->embed, x->token_ids, x->token_slot,
                                 cb->d_last_sampled, x->t_rows, cb->hidden, cb->vocab, s));
    CUDA_CHECK(folio_k_penalty_update(
        cb->d_pen_state, cb->d_pen_history, cb->d_pen_rebuild,
        (const struct folio_k_penalty_seq *)(cb->d_meta + x->l->pen_seqs), x->s_rows, x->token_ids,
        cb->d_last_sampled, cb->vocab, cb->pen_max_ctx, true, s));
    return 0;
}

/* The sampler over the step's LM-head rows, after their logit bias and grammar masks; none
 * while the forward being queued stops at the logits (cb->defer_sample). */
static int sample(struct cuda_backend *cb, const struct step_ctx *x, bool pdl, char *err,
                  size_t errlen)
{
    return cb->defer_sample ? 0 : cuda_sample(cb, x->l, x->n_sample, pdl, err, errlen);
}

int cuda_sample(struct cuda_backend *cb, const struct step_layout *l, int n_sample, bool pdl,
                char *err, size_t errlen)
{
    CUDA_CHECK(folio_cuda_bias_apply(&cb->bias, cb->d_logits, cb->vocab, cb->stream));
    CUDA_CHECK(folio_cuda_mask_apply(&cb->mask, cb->d_logits, cb->vocab, cb->stream));
    CUDA_CHECK(folio_k_sample(
        cb->d_logits, n_sample, cb->vocab,
        (const struct folio_k_sample_params *)(cb->d_meta + l->params),
        (int32_t *)(cb->d_meta + l->out_tokens), (float *)(cb->d_meta + l->out_logprobs),
        (int32_t *)(cb->d_meta + l->out_top_ids), (float *)(cb->d_meta + l->out_top_logprobs),
        FOLIO_MAX_LOGPROBS, cb->d_last_sampled, cb->d_pen_state, cb->d_sample_split,
        (cb->l2_drop & L2_DROP_LOGITS) != 0, pdl, cb->stream));
    return 0;
}

/* The QKV projection's bias on its t rows of output, where the model has one. */
static cudaError_t add_qkv_bias(struct cuda_backend *cb, const struct cuda_layer *L, int t)
{
    if (!L->bqkv)
        return cudaSuccess;
    return folio_k_add_bias(cb->qkv, L->bqkv, t, cb->qkv_dim, cb->stream);
}

/* Layer li's K and V caches: bf16 values, or e4m3 codes (kv_fp8). */
static void *k_cache(const struct cuda_backend *cb, int li)
{
    return cb->kv_pool + (size_t)li * 2 * cb->kv_layer_bytes;
}

static void *v_cache(const struct cuda_backend *cb, int li)
{
    return cb->kv_pool + ((size_t)li * 2 + 1) * cb->kv_layer_bytes;
}

/* A projection as the GEMV reads it: bf16; under fp8 its e4m3 form; of a GGUF kept packed
 * (where PATH_GEMV runs: gguf_q4_gemv) its one Q4_0X8 part. */
static struct folio_k_weight gemv_w(const struct cuda_backend *cb, const bf16 *w,
                                    const struct fp8_weight *w8, const struct gguf_weight *wg)
{
    if (cb->fp8)
        return (struct folio_k_weight){w8->q, w8->scale, FOLIO_K_W_E4M3};
    if (cb->gguf)
        return (struct folio_k_weight){wg->part[0].q, NULL, FOLIO_K_W_Q4_0X8};
    return (struct folio_k_weight){w, NULL, FOLIO_K_W_BF16};
}

/* PATH_GEMV. The residual moves between res and res2 (the GEMV's CTAs all
 * read the old sum while one writes the new). */
static int forward_gemv(struct cuda_backend *cb, const struct step_ctx *x, char *err, size_t errlen)
{
    cudaStream_t s = cb->stream;
    const int t = x->t_rows, qd = cb->heads * cb->head_dim;
    const struct folio_k_row_norm no_norm = {NULL, cb->hidden, cb->eps};
    const struct folio_k_l2_drop no_drop = {0};
    if (embed(cb, x, false, err, errlen) != 0)
        return -1;
    bf16 *cur = cb->res;
    for (int li = 0; li < cb->layers; li++) {
        const struct cuda_layer *L = &cb->lw[li];
        void *kc = k_cache(cb, li), *vc = v_cache(cb, li);
        bf16 *next = li == 0 ? NULL : cur == cb->res ? cb->res2 : cb->res;
        const bf16 *add = li == 0 ? NULL : cb->proj_out;
        const struct folio_k_weight wqkv = gemv_w(cb, L->wqkv, &L->qkv8, &L->qkv_g),
                                    wo = gemv_w(cb, L->wo, &L->o8, &L->o_g),
                                    w_gate_up =
                                        gemv_w(cb, L->w_gate_up, &L->gate_up8, &L->gate_up_g),
                                    w_down = gemv_w(cb, L->w_down, &L->down8, &L->down_g);
        if (L->bqkv || cb->kv_fp8) { /* the bias goes in between the projection and RoPE; the
                                        fp8 cache takes the RoPE kernel's write */
            CUDA_CHECK(cuda_gemv(cb, cb->qkv, cur, add, L->attn_norm, NULL, next, wqkv, t,
                                 cb->qkv_dim, cb->hidden, false, false));
            CUDA_CHECK(add_qkv_bias(cb, L, t));
            CUDA_CHECK(kv_write(cb, x, kc, vc, cb->pdl_step));
        } else {
            CUDA_CHECK(folio_k_gemv_qkv_rope(cb->qkv, cur, add, L->attn_norm, cb->eps, next, wqkv,
                                             cb->hidden, kc, vc, cb->inv_freq, x->kb, cb->heads,
                                             cb->kv_heads, cb->head_dim, cb->pdl_step, s));
        }
        if (next)
            cur = next;
        if (attention(cb, x, kc, vc, NULL, no_norm, no_drop, cb->pdl_step, err, errlen) != 0)
            return -1;
        CUDA_CHECK(cuda_gemv(cb, cb->proj_out, cb->attn_out, NULL, NULL, NULL, NULL, wo, t,
                             cb->hidden, qd, false, false));
        next = cur == cb->res ? cb->res2 : cb->res; /* norm + gate/up + SiLU*mul in one */
        CUDA_CHECK(cuda_gemv(cb, cb->act, cur, cb->proj_out, L->mlp_norm, NULL, next, w_gate_up, t,
                             cb->inter, cb->hidden, false, true));
        cur = next;
        CUDA_CHECK(cuda_gemv(cb, cb->proj_out, cb->act, NULL, NULL, NULL, NULL, w_down, t,
                             cb->hidden, cb->inter, false, false));
    }
    if (x->n_sample <= 0)
        return 0;
    CUDA_CHECK(cuda_gemv(cb, cb->d_logits, cur, cb->proj_out, cb->final_norm, x->sample_rows, NULL,
                         (struct folio_k_weight){cb->lm_head, NULL, FOLIO_K_W_BF16}, x->n_sample,
                         cb->vocab, cb->hidden, true, false));
    return sample(cb, x, cb->pdl_step, err, errlen);
}

/* PATH_TMA. The TMA GEMM lets the next kernel launch once its weight copies
 * are out, so the kernels after each one (norm, RoPE, attention, which copies
 * its first K/V tiles while RoPE runs) are launched with PDL; QKV's K slices
 * are summed by the RoPE kernel, O's and down's by the next norm. */
static int forward_tma(struct cuda_backend *cb, const struct step_ctx *x, char *err, size_t errlen)
{
    cudaStream_t s = cb->stream;
    const struct step_plan *p = &x->plan;
    const int t = x->t_rows, qd = cb->heads * cb->head_dim;
    const bool pdl = true; /* every kernel here may start while the one before drains */
    const struct folio_k_row_norm no_norm = {NULL, cb->hidden, cb->eps};
    const struct folio_k_l2_drop no_drop = {0};
    void *qkv_out = p->split_qkv > 1 ? (void *)cb->splitk_partials : (void *)cb->qkv;
    void *o_out = p->split_o > 1 ? (void *)cb->splitk_partials : (void *)cb->proj_out;
    void *down_out = p->split_down > 1 ? (void *)cb->splitk_partials : (void *)cb->proj_out;
    if (embed(cb, x, true, err, errlen) != 0)
        return -1;
    for (int li = 0; li < cb->layers; li++) {
        const struct cuda_layer *L = &cb->lw[li];
        void *kc = k_cache(cb, li), *vc = v_cache(cb, li);
        if (li > 0)
            CUDA_CHECK(add_rmsnorm(cb, cb->normed, cb->res, p->split_down, L->attn_norm, NULL, t, t,
                                   pdl, 0, 0, NULL, 0));
        CUDA_CHECK(folio_k_gemm_tma(cuda_tma_xmap(cb, TMA_X_NORMED), cuda_tma_wmap(cb, li, TMA_QKV),
                                    qkv_out, t, cb->qkv_dim, cb->hidden, p->split_qkv,
                                    FOLIO_K_TMA_BF16, pdl, s));
        CUDA_CHECK(add_qkv_bias(cb, L, t));
        if (p->split_qkv > 1)
            CUDA_CHECK(folio_k_rope_kv_write_partials(cb->qkv, cb->splitk_partials, p->split_qkv,
                                                      kc, vc, cb->rope_cos_sin, x->kb, cb->heads,
                                                      cb->kv_heads, cb->head_dim, pdl, s));
        else
            CUDA_CHECK(kv_write(cb, x, kc, vc, false));
        if (attention(cb, x, kc, vc, NULL, no_norm, no_drop, pdl, err, errlen) != 0)
            return -1;
        CUDA_CHECK(folio_k_gemm_tma(cuda_tma_xmap(cb, TMA_X_ATTN_OUT), cuda_tma_wmap(cb, li, TMA_O),
                                    o_out, t, cb->hidden, qd, p->split_o, FOLIO_K_TMA_BF16, pdl,
                                    s));
        CUDA_CHECK(add_rmsnorm(cb, cb->normed, cb->res, p->split_o, L->mlp_norm, NULL, t, t, pdl, 0,
                               0, NULL, 0));
        CUDA_CHECK(folio_k_gemm_tma(cuda_tma_xmap(cb, TMA_X_NORMED),
                                    cuda_tma_wmap(cb, li, TMA_GATE_UP), cb->act, t, cb->inter,
                                    cb->hidden, 1, FOLIO_K_TMA_GLU, pdl, s));
        CUDA_CHECK(folio_k_gemm_tma(cuda_tma_xmap(cb, TMA_X_ACT), cuda_tma_wmap(cb, li, TMA_DOWN),
                                    down_out, t, cb->hidden, cb->inter, p->split_down,
                                    FOLIO_K_TMA_BF16, pdl, s));
    }
    if (x->n_sample <= 0)
        return 0;
    CUDA_CHECK(add_rmsnorm(cb, cb->final_h, cb->res, p->split_down, cb->final_norm, x->sample_rows,
                           x->n_sample, t, pdl, 0, 0, NULL, 0));
    if (cb->tma_lm_head)
        CUDA_CHECK(folio_k_gemm_tma(cuda_tma_xmap(cb, TMA_X_FINAL), cuda_tma_lm_head_map(cb),
                                    cb->d_logits, x->n_sample, cb->vocab, cb->hidden, 1,
                                    FOLIO_K_TMA_F32, pdl, s));
    else if (cuda_gemm(cb, cb->final_h, cb->lm_head, cb->d_logits, x->n_sample, cb->vocab,
                       cb->hidden, true, err, errlen) != 0)
        return -1;
    return sample(cb, x, cb->tma_lm_head && pdl, err, errlen);
}

/* The final norm and the LM head on cuBLASLt (or the GEMV, for a few rows)
 * of the rows that sample, then the sampler. pending: what the norm adds. */
static int lm_head_lt(struct cuda_backend *cb, const struct step_ctx *x, int pending, char *err,
                      size_t errlen)
{
    if (x->n_sample <= 0)
        return 0;
    const int64_t act_bytes = (int64_t)sizeof(bf16) * x->t_rows * cb->inter;
    CUDA_CHECK(add_rmsnorm(cb, cb->final_h, cb->res, pending, cb->final_norm, x->sample_rows,
                           x->n_sample, x->t_rows, false, x->plan.drops, L2_DROP_ACT, cb->act,
                           act_bytes));
    if (cuda_gemm(cb, cb->final_h, cb->lm_head, cb->d_logits, x->n_sample, cb->vocab, cb->hidden,
                  true, err, errlen) != 0)
        return -1;
    return sample(cb, x, false, err, errlen);
}

/* PATH_LT: a norm kernel before each projection pair; O and down may write
 * K slices that the next norm sums. Decode steps rotate q and write the new
 * K/V in attention where the tile kernels run, and drop dead buffers from the
 * L2 (plan.drops). */
static int forward_lt(struct cuda_backend *cb, const struct step_ctx *x, char *err, size_t errlen)
{
    cudaStream_t s = cb->stream;
    const struct step_plan *p = &x->plan;
    const int t = x->t_rows, qd = cb->heads * cb->head_dim, drops = p->drops;
    const int64_t act_bytes = (int64_t)sizeof(bf16) * t * cb->inter;
    const int64_t normed_bytes = (int64_t)sizeof(bf16) * t * cb->hidden;
    const struct folio_k_row_norm no_norm = {NULL, cb->hidden, cb->eps};
    struct folio_k_l2_drop attn_drop = {0}; /* the QKV GEMM read the norm's output last */
    if (drops & L2_DROP_NORMED)
        attn_drop.dead = cb->normed, attn_drop.dead_bytes = normed_bytes;
    struct folio_k_l2_drop silu_drop = attn_drop; /* and gate/up, the second norm's */
    silu_drop.input = (drops & L2_DROP_GATE_UP) != 0;
    if (embed(cb, x, true, err, errlen) != 0)
        return -1;
    for (int li = 0; li < cb->layers; li++) {
        const struct cuda_layer *L = &cb->lw[li];
        void *kc = k_cache(cb, li), *vc = v_cache(cb, li);
        if (li > 0)
            CUDA_CHECK(add_rmsnorm(cb, cb->normed, cb->res, p->split_down, L->attn_norm, NULL, t, t,
                                   false, drops, L2_DROP_ACT, cb->act, act_bytes));
        if (cuda_gemm(cb, cb->normed, L->wqkv, cb->qkv, t, cb->qkv_dim, cb->hidden, false, err,
                      errlen) != 0)
            return -1;
        CUDA_CHECK(add_qkv_bias(cb, L, t));
        if (!p->rope_in_attention)
            CUDA_CHECK(kv_write(cb, x, kc, vc, false));
        if (attention(cb, x, kc, vc, p->rope_in_attention ? cb->rope_cos_sin : NULL, no_norm,
                      attn_drop, false, err, errlen) != 0 ||
            project(cb, cb->attn_out, L->wo, t, qd, p->split_o, err, errlen) != 0)
            return -1;
        CUDA_CHECK(add_rmsnorm(cb, cb->normed, cb->res, p->split_o, L->mlp_norm, NULL, t, t, false,
                               drops, L2_DROP_ATTN_OUT, cb->attn_out,
                               (int64_t)sizeof(bf16) * t * qd));
        if (cuda_gemm(cb, cb->normed, L->w_gate_up, cb->gate_up, t, 2 * cb->inter, cb->hidden,
                      false, err, errlen) != 0)
            return -1;
        CUDA_CHECK(folio_k_silu_mul(cb->act, cb->gate_up, t, cb->inter, no_norm, silu_drop, s));
        if (project(cb, cb->act, L->w_down, t, cb->inter, p->split_down, err, errlen) != 0)
            return -1;
    }
    return lm_head_lt(cb, x, p->split_down, err, errlen);
}

/* PATH_LT_FUSED: no norm kernels. The QKV and gate/up GEMMs read the residual
 * itself (their weights hold the norms' weights), attention and SiLU scale
 * what they read by each token's 1 / rms, and the O and down GEMMs add into
 * the residual (beta 1); attention rotates q and writes the new K/V. */
static int forward_lt_fused(struct cuda_backend *cb, const struct step_ctx *x, char *err,
                            size_t errlen)
{
    cudaStream_t s = cb->stream;
    const int t = x->t_rows, qd = cb->heads * cb->head_dim, drops = x->plan.drops;
    const struct folio_k_row_norm row_norm = {cb->res, cb->hidden, cb->eps};
    struct folio_k_l2_drop attn_drop = {0}; /* SiLU's output, and q, k and v once read */
    if (drops & L2_DROP_ACT)
        attn_drop.dead = cb->act, attn_drop.dead_bytes = (int64_t)sizeof(bf16) * t * cb->inter;
    attn_drop.input = (drops & L2_DROP_QKV) != 0;
    struct folio_k_l2_drop silu_drop = {0}; /* what the O GEMM read, and gate/up once read */
    if (drops & L2_DROP_ATTN_OUT)
        silu_drop.dead = cb->attn_out, silu_drop.dead_bytes = (int64_t)sizeof(bf16) * t * qd;
    silu_drop.input = (drops & L2_DROP_GATE_UP) != 0;
    if (embed(cb, x, false, err, errlen) != 0)
        return -1;
    for (int li = 0; li < cb->layers; li++) {
        const struct cuda_layer *L = &cb->lw[li];
        void *kc = k_cache(cb, li), *vc = v_cache(cb, li);
        if (cuda_gemm(cb, cb->res, L->wqkv, cb->qkv, t, cb->qkv_dim, cb->hidden, false, err,
                      errlen) != 0 ||
            attention(cb, x, kc, vc, cb->rope_cos_sin, row_norm, attn_drop, false, err, errlen) !=
                0 ||
            cuda_gemm_lt(cb, cb->attn_out, L->wo, cb->res, t, cb->hidden, qd, false, 1.0f, err,
                         errlen) != 0 ||
            cuda_gemm(cb, cb->res, L->w_gate_up, cb->gate_up, t, 2 * cb->inter, cb->hidden, false,
                      err, errlen) != 0)
            return -1;
        CUDA_CHECK(folio_k_silu_mul(cb->act, cb->gate_up, t, cb->inter, row_norm, silu_drop, s));
        if (cuda_gemm_lt(cb, cb->act, L->w_down, cb->res, t, cb->hidden, cb->inter, false, 1.0f,
                         err, errlen) != 0)
            return -1;
    }
    return lm_head_lt(cb, x, 0, err, errlen);
}

/* A projection of PATH_QUANT in the weights' format: the weight-format branch of the products. */
static int product(struct cuda_backend *cb, const bf16 *x, const struct fp8_weight *w8,
                   const struct gguf_weight *wg, bf16 *y, int m, int n, int k, char *err,
                   size_t errlen)
{
    if (cb->fp8)
        return cuda_gemm_fp8(cb, x, w8, y, m, n, k, err, errlen);
    return cuda_gemm_gguf(cb, x, wg, y, m, n, k, err, errlen);
}

/* PATH_QUANT: a norm kernel before QKV and gate/up (the norms' own weights: fp8 quantizes the
 * activations after them, and GGUF blocks cannot hold them), RoPE and the cache write in their
 * kernel, each projection in the weights' format into bf16 (cuda_gemm_fp8 quantizes its input
 * per token), the LM head as PATH_LT's. */
static int forward_quant(struct cuda_backend *cb, const struct step_ctx *x, char *err,
                         size_t errlen)
{
    cudaStream_t s = cb->stream;
    const int t = x->t_rows, qd = cb->heads * cb->head_dim;
    const struct folio_k_row_norm no_norm = {NULL, cb->hidden, cb->eps};
    const struct folio_k_l2_drop no_drop = {0};
    if (embed(cb, x, true, err, errlen) != 0)
        return -1;
    for (int li = 0; li < cb->layers; li++) {
        const struct cuda_layer *L = &cb->lw[li];
        void *kc = k_cache(cb, li), *vc = v_cache(cb, li);
        if (li > 0)
            CUDA_CHECK(add_rmsnorm(cb, cb->normed, cb->res, 1, L->attn_norm, NULL, t, t, false, 0,
                                   0, NULL, 0));
        if (product(cb, cb->normed, &L->qkv8, &L->qkv_g, cb->qkv, t, cb->qkv_dim, cb->hidden, err,
                    errlen) != 0)
            return -1;
        CUDA_CHECK(add_qkv_bias(cb, L, t));
        CUDA_CHECK(kv_write(cb, x, kc, vc, false));
        if (attention(cb, x, kc, vc, NULL, no_norm, no_drop, false, err, errlen) != 0 ||
            product(cb, cb->attn_out, &L->o8, &L->o_g, cb->proj_out, t, cb->hidden, qd, err,
                    errlen) != 0)
            return -1;
        CUDA_CHECK(
            add_rmsnorm(cb, cb->normed, cb->res, 1, L->mlp_norm, NULL, t, t, false, 0, 0, NULL, 0));
        if (product(cb, cb->normed, &L->gate_up8, &L->gate_up_g, cb->gate_up, t, 2 * cb->inter,
                    cb->hidden, err, errlen) != 0)
            return -1;
        CUDA_CHECK(folio_k_silu_mul(cb->act, cb->gate_up, t, cb->inter, no_norm, no_drop, s));
        if (product(cb, cb->act, &L->down8, &L->down_g, cb->proj_out, t, cb->hidden, cb->inter, err,
                    errlen) != 0)
            return -1;
    }
    return lm_head_lt(cb, x, 1, err, errlen);
}

int cuda_forward(struct cuda_backend *cb, const struct step_layout *l, int t_rows, int s_rows,
                 int n_sample, int num_tiles, char *err, size_t errlen)
{
    struct step_ctx x = {
        .l = l,
        .kb =
            {
                .num_tokens = t_rows,
                .num_seqs = s_rows,
                .token_seq = (const int32_t *)(cb->d_meta + l->token_seq),
                .token_pos = (const int32_t *)(cb->d_meta + l->token_pos),
                .seq_ctx_len = (const int32_t *)(cb->d_meta + l->seq_ctx),
                .block_tables = (const int32_t *)(cb->d_meta + l->tables),
                .block_stride = cb->block_stride,
            },
        .t_rows = t_rows,
        .s_rows = s_rows,
        .n_sample = n_sample,
        .num_tiles = num_tiles,
        .token_ids = (const int32_t *)(cb->d_meta + l->token_ids),
        .token_slot = (const int32_t *)(cb->d_meta + l->token_slot),
        .sample_rows = (const int32_t *)(cb->d_meta + l->sample_rows),
        .plan = plan_path(cb, t_rows, num_tiles >= 0),
    };
    /* PDL pays on the GEMV path, whose kernels issue their weight loads before
     * waiting; with cuBLASLt between the small kernels it made steps slower. */
    cb->pdl_step = x.plan.path == PATH_GEMV;
    switch (x.plan.path) {
    case PATH_GEMV:
        return forward_gemv(cb, &x, err, errlen);
    case PATH_TMA:
        return forward_tma(cb, &x, err, errlen);
    case PATH_LT:
        return forward_lt(cb, &x, err, errlen);
    case PATH_LT_FUSED:
        return forward_lt_fused(cb, &x, err, errlen);
    case PATH_QUANT:
        return forward_quant(cb, &x, err, errlen);
    }
    return -1;
}
