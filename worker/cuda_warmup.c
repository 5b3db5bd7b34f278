/* The CUDA worker's start-up runs: every decode and verify graph captured,
 * and each mixed step size run once, so that no request pays for a first
 * launch. */
#include <stdlib.h>

#include "cuda_internal.h"

/* Captures one shape's graphs for both in-flight slots from a step whose rows
 * are all padding (no keys, no cache writes, no sampling), then replays them. */
static int capture_shape(struct cuda_backend *cb, struct step_shape sh, char *err, size_t errlen)
{
    const struct folio_step_batch none = {0};
    struct step_layout l;
    cuda_layout_for(&sh, cb->block_stride, &l);
    for (int slot = 0; slot < MAX_INFLIGHT; slot++) {
        struct inflight *fl = &cb->fl[slot];
        cuda_pack_step(cb, &none, &sh, &l, fl);
        int tiles = sh.stride == 1 ? -1 : fl->num_attn_tiles;
        CUDA_CHECK(
            cudaMemcpyAsync(fl->d_step, fl->staging, l.inputs, cudaMemcpyHostToDevice, cb->stream));
        cb->d_meta = fl->d_step;
        /* Slot 0: the eager run, then capture + replay; slot 1: capture + replay; then
         * the forward-only graph of each. */
        for (int pass = slot == 0 ? 0 : 1; pass < 3; pass++)
            if (cuda_run_graph(cb, &sh, tiles, slot, pass == 2, &l, err, errlen) != 0)
                return -1;
        CUDA_CHECK(cudaStreamSynchronize(cb->stream));
    }
    return 0;
}

/* Captures the graphs of every bucket up front, as vLLM does at start-up, so
 * that the first step of each batch size while serving does not pay for an
 * eager run and a capture (tens of milliseconds of inter-token latency): the
 * decode graphs, and with speculative decoding the verify graphs of 1 + K
 * token rows a sequence. */
int cuda_capture_graphs(struct cuda_backend *cb, char *err, size_t errlen)
{
    if (!cb->use_graphs)
        return 0;
    for (int bucket = 1; bucket <= cb->base.max_seqs && bucket <= cb->base.max_num_tokens;
         bucket <<= 1)
        if (capture_shape(cb, cuda_graph_shape(bucket, 1), err, errlen) != 0)
            return -1;
    for (int bucket = 1; cuda_verify_graph_fits(cb, bucket); bucket <<= 1)
        if (capture_shape(cb, cuda_graph_shape(bucket, cb->verify_stride), err, errlen) != 0)
            return -1;
    return 0;
}

/* A worker's first mixed steps of a size would load their kernels (CUDA loads
 * a kernel at its first launch) and have cuBLASLt pick algorithms for their
 * row counts while requests wait. So start-up runs one step of each size
 * below through the step path, as vLLM's profile run does: a prefill chunk in
 * slot 0 plus one-token sequences in the next slots, all sampling
 * (temperature 1, the server's default), on KV blocks the scheduler has not
 * handed out yet; the results are thrown away. The decode-only sizes are warm
 * already (cuda_capture_graphs). Bursts of arrivals bring the largest
 * steps, which otherwise run cold and show in the TTFT tail. */
int cuda_warm_up_mixed_steps(struct cuda_backend *cb, char *err, size_t errlen)
{
    static const int sizes[] = {80, 200, 500, 1200, 3000, 8192};
    const int max_t = cb->base.max_num_tokens;
    const int seqs = cb->base.max_seqs < 8 ? cb->base.max_seqs : 8;
    int32_t *ids = calloc((size_t)max_t, sizeof(int32_t));
    int32_t *blocks = calloc((size_t)cb->block_stride + seqs, sizeof(int32_t));
    struct folio_step_seq q[8];
    int32_t out_ids[8], top_ids[8 * FOLIO_MAX_LOGPROBS];
    float out_lp[8], top_lp[8 * FOLIO_MAX_LOGPROBS];
    struct folio_step_result res = {
        .token_ids = out_ids, .logprobs = out_lp, .top_ids = top_ids, .top_logprobs = top_lp};
    int rc = ids && blocks ? 0 : -1;
    if (rc != 0)
        snprintf(err, errlen, "cuda backend: out of host memory");
    for (size_t si = 0; rc == 0 && si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        int t = sizes[si] < max_t ? sizes[si] : max_t;
        int prefill = t - (seqs - 1);
        int need = (prefill + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE;
        if (prefill < 1 || need > cb->block_stride || need + seqs > cb->base.num_kv_blocks)
            break;
        for (int b = 0; b < need + seqs; b++)
            blocks[b] = b;
        for (int i = 0; i < seqs; i++) {
            int n = i == 0 ? prefill : 1;
            q[i] = (struct folio_step_seq){
                .slot = i,
                .num_new_tokens = n,
                .context_len = n,
                .num_blocks = i == 0 ? need : 1,
                .block_table = i == 0 ? blocks : blocks + need + i,
                .sample = true,
                .sampling = {.temperature = 1.0f, .top_p = 1.0f, .repetition_penalty = 1.0f},
            };
        }
        for (int j = 0; j < t; j++)
            ids[j] = j % cb->vocab;
        const struct folio_step_batch batch = {
            .num_seqs = seqs, .num_tokens = t, .token_ids = ids, .seqs = q};
        rc = cuda_launch(&cb->base, &batch, err, errlen);
        if (rc == 0)
            rc = cuda_collect(&cb->base, &res, err, errlen);
        if (sizes[si] >= max_t)
            break;
    }
    free(ids);
    free(blocks);
    return rc;
}
