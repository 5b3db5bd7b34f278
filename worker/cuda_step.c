/* The launch/collect pipeline of the CUDA backend.
 *
 * A step is queued on one stream: one host-to-device copy of the step's
 * metadata (packed in pinned memory), the forward pass, sampling, and one
 * device-to-host copy per result array into pinned memory, then an event.
 * collect() waits on the event of the oldest step. Up to two steps are in
 * flight, each with its own pinned staging, so step N+1 is queued before N's
 * results are read; FOLIO_TOKEN_FROM_PREV ids are read on the GPU from the ids
 * each slot sampled last (the embedding kernel does it), never from the host.
 * A step launched with masks_later stops after its forward until
 * sample_masked brings its grammar masks: the host computes them from step
 * N's tokens while the GPU runs step N+1's forward. A sequence with drafts
 * (speculative decoding's verify step) samples its last 1 + num_draft
 * positions in consecutive sampling rows; its draft rows follow every
 * sequence's row in the results.
 *
 * Any CUDA or cuBLAS error returns -1 with a message and marks the backend
 * failed: the worker exits and the scheduler starts a fresh one. */
#include <math.h>
#include <string.h>

#include "cuda_internal.h"

static size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

void cuda_layout_for(const struct step_shape *sh, int block_stride, struct step_layout *l)
{
    const size_t t_rows = (size_t)sh->t_rows, s_rows = (size_t)sh->s_rows,
                 r_rows = (size_t)sh->r_rows;
    size_t o = 0;
    l->token_ids = o;
    o = align_up(o + sizeof(int32_t) * t_rows, 16);
    l->token_slot = o;
    o = align_up(o + sizeof(int32_t) * t_rows, 16);
    l->token_seq = o;
    o = align_up(o + sizeof(int32_t) * t_rows, 16);
    l->token_pos = o;
    o = align_up(o + sizeof(int32_t) * t_rows, 16);
    l->seq_ctx = o;
    o = align_up(o + sizeof(int32_t) * s_rows, 16);
    l->sample_rows = o;
    o = align_up(o + sizeof(int32_t) * r_rows, 16);
    l->params = o;
    o = align_up(o + sizeof(struct folio_k_sample_params) * r_rows, 16);
    l->tables = o;
    o = align_up(o + sizeof(int32_t) * s_rows * (size_t)block_stride, 16);
    l->attn_tiles = o; /* at most one prefill tile per token */
    o = align_up(o + sizeof(int32_t) * 2 * t_rows, 16);
    l->pen_seqs = o;
    o = align_up(o + sizeof(struct folio_k_penalty_seq) * s_rows, 16);
    l->inputs = o;
    l->out_tokens = o;
    o = align_up(o + sizeof(int32_t) * r_rows, 16);
    l->out_logprobs = o;
    o = align_up(o + sizeof(float) * r_rows, 16);
    l->out_top_ids = o;
    o = align_up(o + sizeof(int32_t) * r_rows * FOLIO_MAX_LOGPROBS, 16);
    l->out_top_logprobs = o;
    o = align_up(o + sizeof(float) * r_rows * FOLIO_MAX_LOGPROBS, 16);
    l->total = o;
}

/* The query tiles of tokens [first, first + n) of one sequence. */
static int add_tiles(int32_t *tiles, int n_tiles, int first, int n, int per_tile)
{
    for (int j = 0; per_tile > 0 && j < n; j += per_tile, n_tiles++) {
        tiles[2 * n_tiles] = first + j;
        tiles[2 * n_tiles + 1] = n - j < per_tile ? n - j : per_tile;
    }
    return n_tiles;
}

/* Writes the step's metadata into fl->staging (struct step_shape says where
 * each token and sampling row goes); rows beyond the batch (a graph's
 * padding) read as padding. Returns the number of LM-head rows. */
int cuda_pack_step(struct cuda_backend *cb, const struct folio_step_batch *batch,
                   const struct step_shape *sh, const struct step_layout *l, struct inflight *fl)
{
    unsigned char *st = fl->staging;
    int32_t *ids = (int32_t *)(st + l->token_ids), *slot = (int32_t *)(st + l->token_slot);
    int32_t *tseq = (int32_t *)(st + l->token_seq), *tpos = (int32_t *)(st + l->token_pos);
    int32_t *ctx = (int32_t *)(st + l->seq_ctx), *srows = (int32_t *)(st + l->sample_rows);
    struct folio_k_sample_params *prm = (struct folio_k_sample_params *)(st + l->params);
    int32_t *tables = (int32_t *)(st + l->tables);

    int32_t *tiles = (int32_t *)(st + l->attn_tiles);
    struct folio_k_penalty_seq *pen = (struct folio_k_penalty_seq *)(st + l->pen_seqs);
    const int stride = sh->stride;
    int t = 0, in = 0, n_sample = 0, n_tiles = 0;
    if (stride > 0) /* every token row is an LM-head row; only sampled positions sample */
        for (int r = 0; r < sh->r_rows; r++) {
            srows[r] = r;
            memset(&prm[r], 0, sizeof(prm[r]));
            prm[r].slot = -1;
        }
    for (int i = 0; i < sh->s_rows; i++) {
        const struct folio_step_seq *q = i < batch->num_seqs ? &batch->seqs[i] : NULL;
        const int n = q ? q->num_new_tokens : 0;
        if (stride > 0) { /* the sequence's rows: padding, then its tokens */
            for (; t < i * stride + stride - n; t++) {
                ids[t] = 0;
                slot[t] = -1;
                tseq[t] = i;
                tpos[t] = -1;
            }
            n_tiles = add_tiles(tiles, n_tiles, i * stride, stride, cb->attn_tile_tokens);
        } else {
            n_tiles = add_tiles(tiles, n_tiles, t, n, cb->attn_tile_tokens);
        }
        if (!q) {
            ctx[i] = 0;
            memset(&pen[i], 0, sizeof(pen[i]));
            memset(tables + (size_t)i * cb->block_stride, 0, sizeof(int32_t) * cb->block_stride);
            continue;
        }
        int start = q->context_len - n;
        for (int j = 0; j < n; j++, t++, in++) {
            ids[t] = batch->token_ids[in];
            slot[t] = q->slot;
            tseq[t] = i;
            tpos[t] = start + j;
        }
        ctx[i] = q->context_len;
        const struct folio_sampling_params *sp = &q->sampling;
        bool penalized = folio_sampling_params_penalized(sp);
        pen[i] = (struct folio_k_penalty_seq){
            .flags = penalized ? FOLIO_K_PEN_TRACK | (q->sample ? FOLIO_K_PEN_SAMPLES : 0) : 0,
            .slot = q->slot,
            .first_token = t - n,
            .num_new = n,
            .context_len = q->context_len,
            .output_index = q->output_index,
        };
        int need = (q->context_len + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE;
        memcpy(tables + (size_t)i * cb->block_stride, q->block_table, sizeof(int32_t) * need);
        fl->seq_row[i] = -1;
        fl->seq_drafts[i] = 0;
        if (!q->sample)
            continue;
        /* The last 1 + num_draft positions sample, position j with RNG counter output_index + j.
         * The draft positions' samples go to the discard entry of last_sampled, so
         * FOLIO_TOKEN_FROM_PREV stands for the sequence's last row's sample (as on the CPU). */
        const int d = q->num_draft, first = t - 1 - d;
        int row = stride > 0 ? first : n_sample;
        fl->seq_row[i] = row;
        fl->seq_drafts[i] = d;
        for (int j = 0; j <= d; j++, row++) {
            srows[row] = first + j;
            prm[row] = (struct folio_k_sample_params){.s = q->sampling,
                                                      .output_index = q->output_index + j,
                                                      .slot = j == d ? q->slot : cb->base.max_seqs};
        }
        if (stride == 0)
            n_sample = row;
    }
    if (stride > 0)
        n_sample = sh->r_rows;
    fl->num_attn_tiles = n_tiles;
    return n_sample;
}

/* Queues what follows a step's forward: its sampling where it runs eagerly (with the batch's
 * logit bias and grammar masks), then its results' copy down. */
static int queue_sampling(struct cuda_backend *cb, struct inflight *fl,
                          const struct folio_step_batch *batch, bool eager_sampling, char *err,
                          size_t errlen)
{
    const struct step_layout *l = &fl->layout;
    int slot = (int)(fl - cb->fl);
    cb->failed = true; /* until the step is queued */
    if (eager_sampling && fl->num_sample_rows > 0) {
        cb->d_meta = fl->d_step;
        if (folio_cuda_bias_upload(&cb->bias, batch, fl->seq_row, cb->stream, err, errlen) != 0 ||
            folio_cuda_mask_upload(&cb->mask, slot, batch, fl->seq_row, cb->stream, err, errlen) !=
                0 ||
            cuda_sample(cb, l, fl->num_sample_rows, false, err, errlen) != 0)
            return -1;
    }
    CUDA_CHECK(cudaEventRecord(fl->computed, cb->stream));
    CUDA_CHECK(cudaStreamWaitEvent(cb->download, fl->computed, 0));
    fl->h_tokens = (int32_t *)(fl->staging + l->out_tokens);
    fl->h_logprobs = (float *)(fl->staging + l->out_logprobs);
    fl->h_top_ids = (int32_t *)(fl->staging + l->out_top_ids);
    fl->h_top_logprobs = (float *)(fl->staging + l->out_top_logprobs);
    if (fl->num_sample_rows > 0)
        CUDA_CHECK(cudaMemcpyAsync(fl->staging + l->inputs, fl->d_step + l->inputs,
                                   l->total - l->inputs, cudaMemcpyDeviceToHost, cb->download));
    CUDA_CHECK(cudaEventRecord(fl->done, cb->download));
    cb->failed = false;
    return 0;
}

/* LM-head rows of an eager step: one per sampling sequence and one per draft. */
static int sample_rows_of(const struct folio_step_batch *batch)
{
    int r = 0;
    for (int i = 0; i < batch->num_seqs; i++)
        r += batch->seqs[i].sample ? 1 + batch->seqs[i].num_draft : 0;
    return r;
}

/* The graph a step replays, by its token rows a sequence (struct step_shape): 1, a decode graph
 * (every sequence one token); 1 + K, a verify graph (every sequence at most 1 + K tokens: a
 * token and its drafts, or a short prefill chunk); 0, none (the step runs eagerly). */
static int graph_stride(const struct cuda_backend *cb, const struct folio_step_batch *batch)
{
    const int bucket = cuda_graph_bucket(batch->num_seqs);
    if (!cb->use_graphs)
        return 0;
    if (batch->num_tokens == batch->num_seqs)
        return bucket <= cb->base.max_seqs && bucket <= cb->base.max_num_tokens ? 1 : 0;
    if (!cuda_verify_graph_fits(cb, bucket))
        return 0;
    for (int i = 0; i < batch->num_seqs; i++)
        if (batch->seqs[i].num_new_tokens > cb->verify_stride)
            return 0;
    return cb->verify_stride;
}

int cuda_launch(struct folio_backend *b, const struct folio_step_batch *batch, char *err,
                size_t errlen)
{
    struct cuda_backend *cb = (struct cuda_backend *)b;
    if (cb->failed) {
        snprintf(err, errlen, "cuda backend: unusable after an earlier CUDA error");
        return -1;
    }
    if (cb->fl_count == MAX_INFLIGHT) {
        snprintf(err, errlen, "cuda backend: %d steps already in flight; collect first",
                 MAX_INFLIGHT);
        return -1;
    }
    if (cb->fl_count > 0 &&
        cb->fl[(cb->fl_head + cb->fl_count - 1) % MAX_INFLIGHT].awaiting_masks) {
        snprintf(err, errlen,
                 "cuda backend: the latest step awaits its masks (sample_masked): "
                 "the next step reads what it samples");
        return -1;
    }
    if (folio_step_batch_check(&cb->base, batch, err, errlen) != 0)
        return -1;
    /* An earlier step's logits stay readable only until the next launch,
     * unless paths.keep_logits asks for a copy (off the hot path). */
    for (int i = 0; i < cb->fl_count; i++) {
        struct inflight *prev = &cb->fl[(cb->fl_head + i) % MAX_INFLIGHT];
        if (prev->logits_on_device && cb->paths.keep_logits && prev->num_sample_rows > 0) {
            cb->failed = true;
            CUDA_CHECK(cudaMemcpyAsync(prev->d_logits_keep, cb->d_logits,
                                       sizeof(float) * prev->num_sample_rows * cb->vocab,
                                       cudaMemcpyDeviceToDevice, cb->stream));
            cb->failed = false;
            prev->logits_kept = true;
        }
        prev->logits_on_device = false;
    }

    const int slot = (cb->fl_head + cb->fl_count) % MAX_INFLIGHT;
    struct inflight *fl = &cb->fl[slot];
    bool decode_only = batch->num_tokens == batch->num_seqs;
    struct step_shape sh = {batch->num_tokens, batch->num_seqs, sample_rows_of(batch), 0};
    const int stride = graph_stride(cb, batch);
    if (stride > 0)
        sh = cuda_graph_shape(cuda_graph_bucket(batch->num_seqs), stride);
    /* A logit bias or grammar masks change from step to step, so such a step's sampling is
     * queued eagerly after its forward (its graph's forward-only variant). */
    bool eager_sampling =
        batch->masks_later || folio_cuda_bias_in_batch(batch) || folio_cuda_mask_in_batch(batch);
    struct step_layout *l = &fl->layout;
    cuda_layout_for(&sh, cb->block_stride, l);
    int n_sample = cuda_pack_step(cb, batch, &sh, l, fl);
    fl->num_seqs = batch->num_seqs;
    fl->num_sample_rows = n_sample;
    fl->logits_on_device = true;
    fl->logits_kept = false;
    fl->awaiting_masks = false;

    cb->failed = true; /* until the step is queued */
    /* The slot's buffer is free: its last step was collected before this launch. */
    CUDA_CHECK(
        cudaMemcpyAsync(fl->d_step, fl->staging, l->inputs, cudaMemcpyHostToDevice, cb->upload));
    CUDA_CHECK(cudaEventRecord(fl->uploaded, cb->upload));
    CUDA_CHECK(cudaStreamWaitEvent(cb->stream, fl->uploaded, 0));
    cb->d_meta = fl->d_step;
    /* Decode steps take the split-KV decode kernel (num_tiles -1), the rest the query tiles. */
    if (stride > 0) {
        if (cuda_run_graph(cb, &sh, stride == 1 ? -1 : fl->num_attn_tiles, slot, eager_sampling, l,
                           err, errlen) != 0)
            return -1;
    } else {
        cb->defer_sample = eager_sampling;
        int rc = cuda_forward(cb, l, sh.t_rows, sh.s_rows, n_sample,
                              decode_only ? -1 : fl->num_attn_tiles, err, errlen);
        cb->defer_sample = false;
        if (rc != 0)
            return -1;
    }
    cb->failed = false;
    cb->fl_count++;
    if (batch->masks_later) {
        fl->awaiting_masks = true;
        return 0;
    }
    return queue_sampling(cb, fl, batch, eager_sampling, err, errlen);
}

int cuda_sample_masked(struct folio_backend *b, const struct folio_step_batch *batch, char *err,
                       size_t errlen)
{
    struct cuda_backend *cb = (struct cuda_backend *)b;
    struct inflight *fl = &cb->fl[(cb->fl_head + cb->fl_count + MAX_INFLIGHT - 1) % MAX_INFLIGHT];
    if (cb->failed || cb->fl_count == 0 || !fl->awaiting_masks) {
        snprintf(err, errlen,
                 "cuda backend: sample_masked without a step launched with "
                 "masks_later");
        return -1;
    }
    if (batch->num_seqs != fl->num_seqs || folio_backend_masks_check(b, batch, err, errlen) != 0)
        return -1;
    fl->awaiting_masks = false;
    return queue_sampling(cb, fl, batch, true, err, errlen);
}

int cuda_ready(struct folio_backend *b)
{
    struct cuda_backend *cb = (struct cuda_backend *)b;
    if (cb->failed || cb->fl_count == 0 || cb->fl[cb->fl_head].awaiting_masks)
        return -1;
    cudaError_t e = cudaEventQuery(cb->fl[cb->fl_head].done);
    if (e == cudaErrorNotReady)
        return 0;
    return e == cudaSuccess ? 1 : -1;
}

/* Result row i from sampling row `row` (-1: the sequence did not sample). */
static void copy_row(const struct inflight *fl, int row, struct folio_step_result *res, int i)
{
    if (res->token_ids)
        res->token_ids[i] = row < 0 ? -1 : fl->h_tokens[row];
    if (res->logprobs)
        res->logprobs[i] = row < 0 ? 0.0f : fl->h_logprobs[row];
    for (int n = 0; n < FOLIO_MAX_LOGPROBS; n++) {
        size_t o = (size_t)i * FOLIO_MAX_LOGPROBS + n, ro = (size_t)row * FOLIO_MAX_LOGPROBS + n;
        if (res->top_ids)
            res->top_ids[o] = row < 0 ? -1 : fl->h_top_ids[ro];
        if (res->top_logprobs)
            res->top_logprobs[o] = row < 0 ? -INFINITY : fl->h_top_logprobs[ro];
    }
}

int cuda_collect(struct folio_backend *b, struct folio_step_result *res, char *err, size_t errlen)
{
    struct cuda_backend *cb = (struct cuda_backend *)b;
    if (cb->failed) {
        snprintf(err, errlen, "cuda backend: unusable after an earlier CUDA error");
        return -1;
    }
    if (cb->fl_count == 0) {
        snprintf(err, errlen, "cuda backend: collect without a launched step");
        return -1;
    }
    struct inflight *fl = &cb->fl[cb->fl_head];
    if (fl->awaiting_masks) {
        snprintf(err, errlen, "cuda backend: collect of a step that awaits its masks");
        return -1;
    }
    cudaError_t e = cudaEventSynchronize(fl->done);
    if (e != cudaSuccess) {
        cb->failed = true;
        snprintf(err, errlen, "cuda backend: step failed on the GPU: %s", cudaGetErrorString(e));
        return -1;
    }
    cb->fl_head = (cb->fl_head + 1) % MAX_INFLIGHT;
    cb->fl_count--;

    /* The sampler's logprob is NaN exactly when the row's logits hold a NaN, a
     * +inf, or are all -inf (its log-sum-exp is then NaN): the cases where
     * worker/sampler.c refuses to sample. The step fails as it does on the CPU
     * backend, rather than hand out a token drawn from garbage. */
    for (int i = 0; i < fl->num_seqs; i++) {
        int row = fl->seq_row[i];
        for (int j = 0; row >= 0 && j <= fl->seq_drafts[i]; j++)
            if (isnan(fl->h_logprobs[row + j])) {
                snprintf(err, errlen,
                         "step: seq %d: sampling: the logits are not finite (a NaN, +inf, or "
                         "all -inf)",
                         i);
                return -1;
            }
    }
    /* Result rows: each sequence's, then the draft rows in batch order (backend.h). */
    int out = 0, draft_row = fl->num_seqs;
    for (int i = 0; i < fl->num_seqs; i++) {
        int row = fl->seq_row[i];
        copy_row(fl, row, res, i);
        for (int j = 1; row >= 0 && j <= fl->seq_drafts[i]; j++)
            copy_row(fl, row + j, res, draft_row++);
        if (res->logits && row >= 0) {
            const float *src = fl->logits_kept ? fl->d_logits_keep : cb->d_logits;
            if (cb->l2_drop & L2_DROP_LOGITS) {
                snprintf(err, errlen,
                         "cuda backend: created with logits_unread, the logits are not kept");
                return -1;
            }
            if (!fl->logits_on_device && !fl->logits_kept) {
                snprintf(err, errlen,
                         "cuda backend: logits are kept only for the latest step; collect "
                         "before launching the next one when you need them");
                return -1;
            }
            /* The sequence's rows and its drafts' lie side by side, as on the CPU backend. */
            size_t n = (size_t)(1 + fl->seq_drafts[i]) * cb->vocab;
            cb->failed = true;
            /* Stream-ordered: a kept copy is queued behind this step's event. */
            CUDA_CHECK(cudaMemcpyAsync(res->logits + (size_t)out * cb->vocab,
                                       src + (size_t)row * cb->vocab, sizeof(float) * n,
                                       cudaMemcpyDeviceToHost, cb->stream));
            CUDA_CHECK(cudaStreamSynchronize(cb->stream));
            cb->failed = false;
            out += 1 + fl->seq_drafts[i];
        }
    }
    return 0;
}
