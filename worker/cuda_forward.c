/* The forward pass of one step on the compute stream: embedding, the layers,
 * the final norm and LM head of the rows that sample, and the sampler. */
#include "cuda_internal.h"

/* The decode kernel's plan for a decode step of n rows: from the graph
 * bucket, so an eager step splits as its graph would. */
struct folio_k_decode_plan cuda_decode_plan(const struct cuda_backend *cb, int n)
{
    /* One-warp CTAs and the combine kernel on the GEMV path (pdl_step, as
     * forward sets it); TMA steps keep their plan whether or not attention is
     * launched with PDL there. */
    bool pdl = cb->pdl && cuda_graph_bucket(n) <= cb->gemv_max_rows;
    return folio_k_attention_decode_plan(cuda_graph_bucket(n), cb->kv_heads, cb->head_dim,
                                         cb->num_sms, cb->attn_warps_per_sm, cb->attn_cta_warps,
                                         pdl);
}

/* Whether a step of m rows runs its projections as folio_k_gemm_tma. */
static bool use_tma(const struct cuda_backend *cb, int m)
{
    return cb->tma && m > cb->gemv_max_rows && m <= FOLIO_K_TMA_MAX_ROWS;
}

/* The O or down projection: into proj_out as any GEMM (splits 1), or as
 * `splits` f32 partials that the next add_rmsnorm sums. */
static int project(struct cuda_backend *cb, const bf16 *x, const bf16 *w, int m, int k, int splits,
                   char *err, size_t errlen)
{
    if (splits <= 1)
        return cuda_gemm(cb, x, w, cb->proj_out, m, cb->hidden, k, false, err, errlen);
    return cuda_gemm_splitk(cb, x, w, cb->splitk_partials, m, cb->hidden, k, splits, err, errlen);
}

/* folio_k_add_rmsnorm on the cuBLASLt path, adding what the last projection
 * left: nothing (add_splits 0), proj_out (1), or its add_splits f32 partials
 * of m rows each. drops (forward's): with L2_DROP_ADD what it adds, once
 * added, and dead (dead_bytes of it) with the bit `dead_bit`. */
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

/* Attention of one layer: the split-KV decode kernel for decode-only steps
 * (num_tiles < 0), the query-tile kernel otherwise, the reference kernel for
 * shapes the tensor-core kernels do not take. */
static int attention(struct cuda_backend *cb, const struct step_layout *l,
                     const struct folio_k_batch *kb, int num_tiles, bf16 *kc, bf16 *vc,
                     const uint32_t *rope_cos_sin, struct folio_k_row_norm norm,
                     struct folio_k_l2_drop drop, bool pdl, char *err, size_t errlen)
{
    cudaStream_t s = cb->stream;
    if (cb->attn_tile_tokens == 0) {
        CUDA_CHECK(folio_k_paged_attention_ref(cb->attn_out, cb->qkv, kc, vc, *kb, cb->heads,
                                               cb->kv_heads, cb->head_dim, s));
    } else if (num_tiles < 0) {
        CUDA_CHECK(folio_k_attention_decode(
            cb->attn_out, cb->qkv, kc, vc, *kb, cuda_decode_plan(cb, kb->num_tokens),
            cb->attn_workspace, cb->attn_counters, cb->heads, cb->kv_heads, cb->head_dim,
            rope_cos_sin, norm, drop, pdl, s));
    } else {
        CUDA_CHECK(folio_k_attention_prefill(cb->attn_out, cb->qkv, kc, vc, *kb,
                                             (const int32_t *)(cb->d_meta + l->attn_tiles),
                                             num_tiles, cb->heads, cb->kv_heads, cb->head_dim, s));
    }
    return 0;
}

/* The whole step on the stream, metadata already in d_meta with layout l:
 * t_rows tokens, s_rows sequence rows, n_sample LM-head rows, num_tiles
 * prefill attention tiles (-1: a decode-only step). */
int cuda_forward(struct cuda_backend *cb, const struct step_layout *l, int t_rows, int s_rows,
                 int n_sample, int num_tiles, char *err, size_t errlen)
{
    cudaStream_t s = cb->stream;
    const int32_t *token_ids = (const int32_t *)(cb->d_meta + l->token_ids);
    const int32_t *token_slot = (const int32_t *)(cb->d_meta + l->token_slot);
    struct folio_k_batch kb = {
        .num_tokens = t_rows,
        .num_seqs = s_rows,
        .token_seq = (const int32_t *)(cb->d_meta + l->token_seq),
        .token_pos = (const int32_t *)(cb->d_meta + l->token_pos),
        .seq_ctx_len = (const int32_t *)(cb->d_meta + l->seq_ctx),
        .block_tables = (const int32_t *)(cb->d_meta + l->tables),
        .block_stride = cb->block_stride,
    };
    const int32_t *sample_rows = (const int32_t *)(cb->d_meta + l->sample_rows);
    const struct folio_k_sample_params *params =
        (const struct folio_k_sample_params *)(cb->d_meta + l->params);

    /* Small batches take each RMSNorm into the GEMV that reads it; the residual
     * then moves between res and res2 (the GEMV's CTAs all read the old sum
     * while one writes the new). */
    bool fuse_norm = t_rows <= cb->gemv_max_rows;
    /* Programmatic dependent launch pays on the GEMV path, whose kernels issue
     * their weight loads before waiting; with cuBLASLt between the small kernels
     * it made batch 64 slower (1.72 vs 1.58 ms on the H200). */
    cb->pdl_step = cb->pdl && fuse_norm;
    /* Split-K of the O and down projections (the GEMV path never splits), and
     * what the next add_rmsnorm adds: 0 nothing, 1 proj_out, S > 1 partials. */
    int qd = cb->heads * cb->head_dim;
    int split_o = fuse_norm ? 1 : cuda_splitk_slices(cb->splitk_o, t_rows, qd);
    int split_down = fuse_norm ? 1 : cuda_splitk_slices(cb->splitk_down, t_rows, cb->inter);
    const bool tma = use_tma(cb, t_rows);
    /* The TMA GEMM lets the next kernel launch once its weight copies are out,
     * so on the TMA path the kernels after one are launched with PDL (pdl_tma):
     * each add_rmsnorm reads its norm weight meanwhile (batch 64: 1.281 ms
     * against 1.328 without, 1.360 before either). QKV runs on the TMA GEMM
     * too, in K slices that the RoPE kernel sums, so RoPE follows a kernel that
     * lets it launch early; so does attention after RoPE, which copies its
     * first K/V tiles while RoPE runs. On the H200, QKV there made batch 8
     * 1.073 ms against 1.091 on cuBLASLt; attention's PDL then batch 8 1.039
     * against 1.101, batch 32 1.162 against 1.221. At 64 rows each lost alone
     * (1.321 against 1.279; 1.399 against 1.290) and won together (1.273
     * against 1.287). */
    const bool pdl_tma = tma && cb->pdl && cb->pdl_norm;
    const int split_qkv = tma ? cb->tma_split_qkv : 1;
    if (tma) {
        split_o = cb->tma_split_o;
        split_down = t_rows <= TMA_SMALL_ROWS ? cb->tma_split_down_small : cb->tma_split_down;
    }
    /* The O or down projection's output on the TMA path: proj_out (one slice)
     * or the partials. */
    void *tma_o_out = split_o > 1 ? (void *)cb->splitk_partials : (void *)cb->proj_out;
    void *tma_down_out = split_down > 1 ? (void *)cb->splitk_partials : (void *)cb->proj_out;
    /* Decode-only steps on the cuBLASLt path (65-256 rows, one-warp attention
     * CTAs) rotate q and write the new K/V inside the attention kernel instead
     * of in a RoPE kernel before it: one kernel a layer fewer. On the H200:
     * batch 256 2.369 ms against 2.393, batch 128 1.777 against 1.817. On the
     * TMA path (3-64 rows) the attention CTAs would each sum QKV's K slices
     * for q again: batch 64 took 1.421 ms against 1.239, batch 8 1.070
     * against 0.986 (bench/results/2026-12-01-cuda-round18.md). */
    const bool rope_in_attention =
        cb->rope_in_attention && !tma && !fuse_norm && num_tiles < 0 && cb->attn_tile_tokens != 0;
    /* No norm kernels there either (norm_in_consumers) where the O and down
     * GEMMs do not split (above 128 rows), so that they can add into the
     * residual themselves. On the H200 (bench/results/2026-12-01-cuda-round21.md)
     * batch 256 2.3052 ms against 2.3404; at batch 128, forced to one slice,
     * 1.7662 against 1.7451. */
    const bool norm_in_consumers = rope_in_attention && cb->norm_in_consumers && split_o == 1 &&
                                   split_down == 1 && cb->hidden % 8 == 0;
    const struct folio_k_row_norm row_norm = {norm_in_consumers ? cb->res : NULL, cb->hidden,
                                              cb->eps};
    /* The dead buffers this step drops from the L2 (L2_DROP_*): decode-only
     * steps on the cuBLASLt path. On the TMA path (3-64 rows) the same drops
     * made steps slower on the H200 (b64 1.1345 ms against 1.1286, b32 1.0854
     * against 1.0615, b8 0.9657 against 0.9521): its buffers are small enough
     * to stay in the L2 from one layer to the next, and the drops only add
     * work to kernels that are all latency. */
    const int drops = num_tiles < 0 && !fuse_norm && !tma ? cb->l2_drop : 0;
    const int64_t act_bytes = (int64_t)sizeof(bf16) * t_rows * cb->inter;
    const int64_t normed_bytes = (int64_t)sizeof(bf16) * t_rows * cb->hidden;
    struct folio_k_l2_drop attn_drop = {0};
    if (norm_in_consumers) { /* SiLU's output, and q, k and v once read */
        if (drops & L2_DROP_ACT)
            attn_drop.dead = cb->act, attn_drop.dead_bytes = act_bytes;
        attn_drop.input = (drops & L2_DROP_QKV) != 0;
    } else if (drops & L2_DROP_NORMED) { /* the QKV GEMM read it last */
        attn_drop.dead = cb->normed, attn_drop.dead_bytes = normed_bytes;
    }
    /* The embedding gather (with the GEMV) or the gather and the first norm in
     * one kernel, then the penalty update alongside it (PDL): every step,
     * graphs included (rows without penalties return at once), before the
     * sampler overwrites last_sampled, which it reads. */
    if (fuse_norm || !cb->embed_norm || norm_in_consumers)
        CUDA_CHECK(folio_k_embed(cb->res, cb->embed, token_ids, token_slot, cb->d_last_sampled,
                                 t_rows, cb->hidden, cb->vocab, s));
    else
        CUDA_CHECK(folio_k_embed_rmsnorm(cb->normed, cb->res, cb->embed, token_ids, token_slot,
                                         cb->d_last_sampled, cb->lw[0].attn_norm, t_rows,
                                         cb->hidden, cb->vocab, cb->eps, 0, s));
    CUDA_CHECK(folio_k_penalty_update(
        cb->d_pen_state, cb->d_pen_history, cb->d_pen_rebuild,
        (const struct folio_k_penalty_seq *)(cb->d_meta + l->pen_seqs), s_rows, token_ids,
        cb->d_last_sampled, cb->vocab, cb->pen_max_ctx, cb->pdl, s));
    int pending_add = 0;
    bf16 *cur = cb->res;
    for (int li = 0; li < cb->layers; li++) {
        struct cuda_layer *L = &cb->lw[li];
        bf16 *kc = cb->kv_pool + (size_t)li * 2 * cb->kv_layer_stride;
        bf16 *vc = kc + cb->kv_layer_stride;
        bool rope_done = false; /* RoPE and the K/V cache write, in the QKV epilogue */
        if (fuse_norm) {
            bf16 *next = li == 0 ? NULL : cur == cb->res ? cb->res2 : cb->res;
            const bf16 *add = li == 0 ? NULL : cb->proj_out;
            if (cb->qkv_rope) {
                CUDA_CHECK(folio_k_gemv_qkv_rope(
                    cb->qkv, cur, add, L->attn_norm, cb->eps, next, L->wqkv, cb->hidden, kc, vc,
                    cb->inv_freq, kb, cb->heads, cb->kv_heads, cb->head_dim,
                    (struct folio_k_gemv_opts){0, cb->pdl_step, cb->gemv_persist}, s));
                rope_done = true;
            } else {
                CUDA_CHECK(cuda_gemv(cb, cb->qkv, cur, add, L->attn_norm, NULL, next, L->wqkv,
                                     t_rows, cb->qkv_dim, cb->hidden, false, false));
            }
            if (next)
                cur = next;
        } else {
            if (!norm_in_consumers && (li > 0 || !cb->embed_norm))
                CUDA_CHECK(add_rmsnorm(cb, cb->normed, cur, pending_add, L->attn_norm, NULL, t_rows,
                                       t_rows, pdl_tma && li > 0, li > 0 ? drops : 0, L2_DROP_ACT,
                                       cb->act, act_bytes));
            if (tma) {
                CUDA_CHECK(folio_k_gemm_tma(
                    cuda_tma_xmap(cb, TMA_X_NORMED), cuda_tma_wmap(cb, li, TMA_QKV),
                    split_qkv > 1 ? (void *)cb->splitk_partials : (void *)cb->qkv, t_rows,
                    cb->qkv_dim, cb->hidden, split_qkv, FOLIO_K_TMA_BF16, cb->pdl, s));
            } else if (cuda_gemm(cb, norm_in_consumers ? cur : cb->normed, L->wqkv, cb->qkv, t_rows,
                                 cb->qkv_dim, cb->hidden, false, err, errlen) != 0) {
                return -1;
            }
        }
        if (!rope_done && !rope_in_attention) {
            if (split_qkv > 1)
                CUDA_CHECK(folio_k_rope_kv_write_partials(cb->qkv, cb->splitk_partials, split_qkv,
                                                          kc, vc, cb->rope_cos_sin, kb, cb->heads,
                                                          cb->kv_heads, cb->head_dim, pdl_tma, s));
            else
                CUDA_CHECK(folio_k_rope_kv_write(cb->qkv, kc, vc, cb->rope_cos_sin, kb, cb->heads,
                                                 cb->kv_heads, cb->head_dim, cb->pdl_step, s));
        }
        if (attention(cb, l, &kb, num_tiles, kc, vc, rope_in_attention ? cb->rope_cos_sin : NULL,
                      row_norm, attn_drop, cb->pdl_step || pdl_tma, err, errlen) != 0)
            return -1;
        if (tma)
            CUDA_CHECK(folio_k_gemm_tma(cuda_tma_xmap(cb, TMA_X_ATTN_OUT),
                                        cuda_tma_wmap(cb, li, TMA_O), tma_o_out, t_rows, cb->hidden,
                                        qd, split_o, FOLIO_K_TMA_BF16, cb->pdl, s));
        else if (norm_in_consumers) {
            if (cuda_gemm_lt(cb, cb->attn_out, L->wo, cur, t_rows, cb->hidden, qd, false, 1.0f, err,
                             errlen) != 0)
                return -1;
        } else if (project(cb, cb->attn_out, L->wo, t_rows, qd, split_o, err, errlen) != 0)
            return -1;
        if (fuse_norm) { /* RMSNorm + gate/up + SiLU*mul in one launch */
            bf16 *next = cur == cb->res ? cb->res2 : cb->res;
            CUDA_CHECK(cuda_gemv(cb, cb->act, cur, cb->proj_out, L->mlp_norm, NULL, next,
                                 L->w_gate_up, t_rows, cb->inter, cb->hidden, false, true));
            cur = next;
        } else {
            if (!norm_in_consumers)
                CUDA_CHECK(add_rmsnorm(cb, cb->normed, cur, split_o, L->mlp_norm, NULL, t_rows,
                                       t_rows, pdl_tma, drops, L2_DROP_ATTN_OUT, cb->attn_out,
                                       (int64_t)sizeof(bf16) * t_rows * qd));
            if (tma) { /* SiLU*mul in the GEMM's epilogue */
                CUDA_CHECK(folio_k_gemm_tma(cuda_tma_xmap(cb, TMA_X_NORMED),
                                            cuda_tma_wmap(cb, li, TMA_GATE_UP), cb->act, t_rows,
                                            cb->inter, cb->hidden, 1, FOLIO_K_TMA_GLU, cb->pdl, s));
            } else {
                if (cuda_gemm(cb, norm_in_consumers ? cur : cb->normed, L->w_gate_up, cb->gate_up,
                              t_rows, 2 * cb->inter, cb->hidden, false, err, errlen) != 0)
                    return -1;
                /* What the O GEMM (norms in the consumers) or the gate/up
                 * GEMM read last. */
                struct folio_k_l2_drop drop = {0};
                if (norm_in_consumers && (drops & L2_DROP_ATTN_OUT))
                    drop.dead = cb->attn_out, drop.dead_bytes = (int64_t)sizeof(bf16) * t_rows * qd;
                else if (!norm_in_consumers && (drops & L2_DROP_NORMED))
                    drop.dead = cb->normed, drop.dead_bytes = normed_bytes;
                drop.input = (drops & L2_DROP_GATE_UP) != 0;
                CUDA_CHECK(
                    folio_k_silu_mul(cb->act, cb->gate_up, t_rows, cb->inter, row_norm, drop, s));
            }
        }
        if (tma)
            CUDA_CHECK(folio_k_gemm_tma(
                cuda_tma_xmap(cb, TMA_X_ACT), cuda_tma_wmap(cb, li, TMA_DOWN), tma_down_out, t_rows,
                cb->hidden, cb->inter, split_down, FOLIO_K_TMA_BF16, cb->pdl, s));
        else if (norm_in_consumers) {
            if (cuda_gemm_lt(cb, cb->act, L->w_down, cur, t_rows, cb->hidden, cb->inter, false,
                             1.0f, err, errlen) != 0)
                return -1;
        } else if (project(cb, cb->act, L->w_down, t_rows, cb->inter, split_down, err, errlen) != 0)
            return -1;
        pending_add = norm_in_consumers ? 0 : split_down;
    }
    if (n_sample <= 0)
        return 0;
    /* Only the rows that sample go through the final norm and the LM head. */
    const bool lm_tma = tma && cb->tma_lm_head;
    if (fuse_norm) {
        CUDA_CHECK(cuda_gemv(cb, cb->d_logits, cur, cb->proj_out, cb->final_norm, sample_rows, NULL,
                             cb->lm_head, n_sample, cb->vocab, cb->hidden, true, false));
    } else {
        CUDA_CHECK(add_rmsnorm(cb, cb->final_h, cur, pending_add, cb->final_norm, sample_rows,
                               n_sample, t_rows, pdl_tma, drops, L2_DROP_ACT, cb->act, act_bytes));
        if (lm_tma)
            CUDA_CHECK(folio_k_gemm_tma(cuda_tma_xmap(cb, TMA_X_FINAL), cuda_tma_lm_head_map(cb),
                                        cb->d_logits, n_sample, cb->vocab, cb->hidden, 1,
                                        FOLIO_K_TMA_F32, cb->pdl, s));
        else if (cuda_gemm(cb, cb->final_h, cb->lm_head, cb->d_logits, n_sample, cb->vocab,
                           cb->hidden, true, err, errlen) != 0)
            return -1;
    }
    CUDA_CHECK(folio_k_sample(
        cb->d_logits, n_sample, cb->vocab, params, (int32_t *)(cb->d_meta + l->out_tokens),
        (float *)(cb->d_meta + l->out_logprobs), (int32_t *)(cb->d_meta + l->out_top_ids),
        (float *)(cb->d_meta + l->out_top_logprobs), FOLIO_MAX_LOGPROBS, cb->d_last_sampled,
        cb->d_pen_state, cb->d_sample_split, (cb->l2_drop & L2_DROP_LOGITS) != 0,
        cb->pdl_step || (lm_tma && pdl_tma), s));
    return 0;
}
