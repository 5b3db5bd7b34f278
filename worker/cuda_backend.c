/* The CUDA backend of backend.h: weights in bf16 on the GPU, a paged KV pool,
 * cuBLASLt and TMA GEMMs, the kernels of kernels/, GPU sampling and CUDA
 * graphs for decode and verify steps. This file creates and destroys it; the files
 * named in cuda_internal.h do the rest. */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

/* ---------------------------------------------------------------- setup */

static void cuda_destroy(struct folio_backend *b)
{
    struct cuda_backend *cb = (struct cuda_backend *)b;
    if (!cb)
        return;
    folio_backend_base_free(b);
    if (cb->stream)
        cudaStreamSynchronize(cb->stream);
    if (cb->download)
        cudaStreamSynchronize(cb->download);
    for (int i = 0; i < cb->num_graphs; i++)
        for (int f = 0; f < 2; f++)
            for (int j = 0; j < MAX_INFLIGHT; j++)
                if (cb->graphs[i].captured[f][j])
                    cudaGraphExecDestroy(cb->graphs[i].exec[f][j]);
    if (cb->plans) {
        cuda_gemm_plans_clear(cb);
        free(cb->plans);
    }
    for (int i = 0; i < MAX_INFLIGHT; i++) {
        struct inflight *fl = &cb->fl[i];
        cudaEvent_t evs[] = {fl->uploaded, fl->computed, fl->done};
        for (int j = 0; j < 3; j++)
            if (evs[j])
                cudaEventDestroy(evs[j]);
        cudaFreeHost(fl->staging);
        cudaFree(fl->d_step);
        free(fl->seq_row);
        free(fl->seq_drafts);
        cudaFree(fl->d_logits_keep);
    }
    for (int i = 0; i < cb->num_weight_blocks; i++)
        cudaFree(cb->weight_blocks[i]);
    folio_cuda_bias_free(&cb->bias);
    folio_cuda_mask_free(&cb->mask);
    void *bufs[] = {cb->kv_pool,
                    cb->res,
                    cb->normed,
                    cb->qkv,
                    cb->attn_out,
                    cb->proj_out,
                    cb->gate_up,
                    cb->act,
                    cb->final_h,
                    cb->d_logits,
                    cb->d_last_sampled,
                    cb->inv_freq,
                    cb->workspace,
                    cb->attn_workspace,
                    cb->attn_counters,
                    cb->res2,
                    cb->d_pen_state,
                    cb->d_pen_history,
                    cb->d_pen_rebuild,
                    cb->splitk_partials,
                    cb->d_sample_split,
                    cb->rope_cos_sin,
                    cb->x8,
                    cb->x8_scale,
                    cb->fp8_acc,
                    cb->gguf_scratch};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        cudaFree(bufs[i]);
    free(cb->lw);
    free(cb->kv_scale);
    free(cb->tmaps);
    if (cb->lt)
        cublasLtDestroy(cb->lt);
    cudaStream_t streams[] = {cb->stream, cb->upload, cb->download};
    for (int i = 0; i < 3; i++)
        if (streams[i])
            cudaStreamDestroy(streams[i]);
    free(cb);
}

static const struct folio_backend_ops cuda_ops = {
    .name = "cuda",
    .launch = cuda_launch,
    .collect = cuda_collect,
    .sample_masked = cuda_sample_masked,
    .ready = cuda_ready,
    .destroy = cuda_destroy,
};

/* The options, and what follows from them before any allocation. The GEMV
 * and decode attention kernels ask for the whole carveout as shared memory,
 * so that their CTAs can share SMs and PDL overlaps them. */
static void read_tuning(struct cuda_backend *cb, const struct folio_backend_options *opt)
{
    cb->paths = opt->cuda_paths;
    /* Where the GEMV stays ahead of the tensor cores: 2 rows of bf16 or of e4m3 (whose
     * widening costs the GEMV more a row than cuBLASLt's FP8 GEMM from 3 rows), every row
     * count it takes of a GGUF's Q4_0 blocks. */
    const bool quant = cb->fp8 || cb->gguf;
    if (cb->paths.gemv_max_rows == 0 ||
        (quant && cb->paths.gemv_max_rows > FOLIO_K_GEMV_QUANT_MAX_ROWS))
        cb->paths.gemv_max_rows = cb->gguf ? FOLIO_K_GEMV_QUANT_MAX_ROWS : 2;
    else if (cb->paths.gemv_max_rows < 0)
        cb->paths.gemv_max_rows = 0;
    cb->use_graphs = !opt->enforce_eager;
    /* Verify graphs take a token and its drafts a sequence (1 + K rows). */
    cb->verify_stride = opt->num_speculative_tokens > 0 ? 1 + opt->num_speculative_tokens : 0;
    /* Sampled positions are distinct tokens: a row per sequence and per draft, at most one
     * per token. */
    int rows = opt->max_seqs + FOLIO_MAX_DRAFT_ROWS;
    cb->max_sample_rows = rows < opt->max_num_tokens ? rows : opt->max_num_tokens;
    cb->attn_tile_tokens = folio_k_attention_tile_tokens(cb->heads, cb->kv_heads, cb->head_dim);
    /* the TMA GEMM reads bf16 weights */
    cb->tma = !cb->paths.no_tma_gemm && !cb->fp8 && !cb->gguf;
    /* The packed GEMV reads a few bits a weight where the other path writes and reads a
     * bf16 copy: it takes every row count it can, unless a test forces the paths. */
    int forced = opt->cuda_paths.gemv_max_rows;
    cb->gguf_gemv_rows = forced == 0 ? FOLIO_K_GGUF_GEMV_MAX_ROWS : forced < 0 ? 0 : forced;
    cb->tma_lm_head = true;
    cb->l2_drop = L2_DROP_ALL;
    if (!opt->logits_unread || cb->paths.keep_logits)
        cb->l2_drop &= ~L2_DROP_LOGITS;
    folio_k_set_smem_carveout(100);
}

/* Activations for max_num_tokens rows, logits and outputs for max_sample_rows,
 * the RoPE table and the penalty state. */
static int alloc_activations(struct cuda_backend *cb, const struct folio_model_config *c,
                             const struct folio_backend_options *opt, char *err, size_t errlen)
{
    size_t H = (size_t)cb->hidden, I = (size_t)cb->inter, QD = (size_t)cb->heads * cb->head_dim;
    size_t T = (size_t)opt->max_num_tokens, S = (size_t)opt->max_seqs,
           R = (size_t)cb->max_sample_rows;
    int max_ctx = c->max_position_embeddings > opt->max_num_tokens ? c->max_position_embeddings
                                                                   : opt->max_num_tokens;
    cb->block_stride = (max_ctx + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE;
    cb->base.max_blocks_per_seq = cb->block_stride;
    const int positions = cb->block_stride * FOLIO_KV_BLOCK_SIZE;
    CUDA_CHECK(cudaMalloc((void **)&cb->rope_cos_sin,
                          sizeof(uint32_t) * (size_t)positions * (cb->head_dim / 2)));
    CUDA_CHECK(
        folio_k_rope_table(cb->rope_cos_sin, cb->inv_freq, positions, cb->head_dim, cb->stream));
    CUDA_CHECK(cudaMalloc((void **)&cb->res, sizeof(bf16) * T * H));
    /* The residual's second buffer of the fused-norm GEMV path (<= 8 rows). */
    CUDA_CHECK(cudaMalloc((void **)&cb->res2, sizeof(bf16) * FOLIO_K_GEMV_MAX_ROWS * H));
    CUDA_CHECK(cudaMalloc((void **)&cb->normed, sizeof(bf16) * T * H));
    CUDA_CHECK(cudaMalloc((void **)&cb->qkv, sizeof(bf16) * T * cb->qkv_dim));
    CUDA_CHECK(cudaMalloc((void **)&cb->attn_out, sizeof(bf16) * T * QD));
    CUDA_CHECK(cudaMalloc((void **)&cb->proj_out, sizeof(bf16) * T * H));
    CUDA_CHECK(cudaMalloc((void **)&cb->gate_up, sizeof(bf16) * T * 2 * I));
    CUDA_CHECK(cudaMalloc((void **)&cb->act, sizeof(bf16) * T * I));
    CUDA_CHECK(cudaMalloc((void **)&cb->final_h, sizeof(bf16) * R * H));
    if (cb->fp8) { /* the e4m3 rows a cuBLASLt product reads: as wide as its widest k */
        size_t k = H > QD ? H : QD;
        k = k > I ? k : I;
        CUDA_CHECK(cudaMalloc((void **)&cb->x8, T * k));
        CUDA_CHECK(cudaMalloc((void **)&cb->x8_scale, sizeof(float) * T));
    }
    CUDA_CHECK(cudaMalloc((void **)&cb->d_logits, sizeof(float) * R * cb->vocab));
    CUDA_CHECK(cudaMalloc((void **)&cb->d_last_sampled, sizeof(int32_t) * (S + 1)));
    CUDA_CHECK(cudaMemsetAsync(cb->d_last_sampled, 0, sizeof(int32_t) * (S + 1), cb->stream));
    if (!cb->paths.one_cta_sampler) { /* for the steps that split: up to 8 rows */
        const size_t bytes = folio_k_sample_split_bytes(
            R < FOLIO_K_SAMPLE_SPLIT_MAX_ROWS ? (int)R : FOLIO_K_SAMPLE_SPLIT_MAX_ROWS);
        CUDA_CHECK(cudaMalloc(&cb->d_sample_split, bytes));
        CUDA_CHECK(cudaMemsetAsync(cb->d_sample_split, 0, bytes, cb->stream));
    }
    /* Penalty state for every slot, allocated before the KV pool takes what is
     * left: (vocab + max context) * 4 bytes per slot. */
    cb->pen_max_ctx = cb->block_stride * FOLIO_KV_BLOCK_SIZE;
    CUDA_CHECK(cudaMalloc((void **)&cb->d_pen_state, sizeof(uint32_t) * S * cb->vocab));
    CUDA_CHECK(cudaMalloc((void **)&cb->d_pen_history, sizeof(int32_t) * S * cb->pen_max_ctx));
    CUDA_CHECK(cudaMalloc((void **)&cb->d_pen_rebuild, sizeof(int32_t) * S));
    CUDA_CHECK(cudaMemsetAsync(cb->d_pen_state, 0, sizeof(uint32_t) * S * cb->vocab, cb->stream));
    CUDA_CHECK(cudaMemsetAsync(cb->d_pen_history, 0xff, sizeof(int32_t) * S * cb->pen_max_ctx,
                               cb->stream));
    CUDA_CHECK(cudaMemsetAsync(cb->d_pen_rebuild, 0, sizeof(int32_t) * S, cb->stream));
    return 0;
}

/* The step buffers of the in-flight slots, the split-KV and split-K workspaces
 * and the TMA maps (the activations are allocated already). */
static int alloc_step_buffers(struct cuda_backend *cb, size_t T, size_t S, char *err, size_t errlen)
{
    int64_t H = cb->hidden, QD = (int64_t)cb->heads * cb->head_dim;
    /* The largest layout: the eager maximum, or a decode graph bucket of max_seqs rows (a
     * verify graph's rows are within the eager maximum's). */
    struct step_layout l1, l2;
    const struct step_shape eager = {(int)T, (int)S, cb->max_sample_rows, 0};
    const struct step_shape decode = cuda_graph_shape(cuda_graph_bucket((int)S), 1);
    cuda_layout_for(&eager, cb->block_stride, &l1);
    cuda_layout_for(&decode, cb->block_stride, &l2);
    size_t meta = l1.total > l2.total ? l1.total : l2.total;
    /* Split-KV partials: the largest over the decode batch sizes (their buckets). */
    for (int n = 1; n <= (int)S; n++) {
        struct folio_k_decode_plan p = cuda_decode_plan(cb, n);
        size_t bytes = folio_k_attention_decode_workspace_bytes(n, p, cb->heads, cb->head_dim);
        size_t gbytes = cuda_graph_bucket(n) <= (int)S && cuda_graph_bucket(n) <= (int)T
                            ? folio_k_attention_decode_workspace_bytes(cuda_graph_bucket(n), p,
                                                                       cb->heads, cb->head_dim)
                            : 0;
        bytes = bytes > gbytes ? bytes : gbytes;
        if (bytes > cb->attn_workspace_bytes)
            cb->attn_workspace_bytes = bytes;
    }
    if (cb->attn_workspace_bytes > 0)
        CUDA_CHECK(cudaMalloc(&cb->attn_workspace, cb->attn_workspace_bytes));
    /* The counters of the last-CTA merge: one per (row, KV head) of the largest bucket. */
    size_t counters = sizeof(int) * (size_t)cuda_graph_bucket((int)S) * cb->kv_heads;
    CUDA_CHECK(cudaMalloc((void **)&cb->attn_counters, counters));
    CUDA_CHECK(cudaMemsetAsync(cb->attn_counters, 0, counters, cb->stream));
    /* Split-K partials of the O and down projections (both n = hidden): the most
     * S * m over the row counts on the cuBLASLt path that split (forward runs at
     * most T rows, graph buckets included). Allocated before the KV pool takes
     * what the budget leaves, like the other activations. */
    size_t splitk_bytes = 0;
    for (int rows = cb->paths.gemv_max_rows + 1; rows <= (int)T && rows <= SPLITK_MAX_ROWS;
         rows++) {
        int so = cuda_splitk_slices(cb->paths.splitk_o, rows, (int)QD);
        int sd = cuda_splitk_slices(cb->paths.splitk_down, rows, cb->inter);
        int sp = so > sd ? so : sd;
        size_t bytes = sp > 1 ? sizeof(float) * sp * rows * H : 0;
        if (bytes > splitk_bytes)
            splitk_bytes = bytes;
    }
    cuda_tma_setup(cb, T, (size_t)cb->max_sample_rows);
    if (cb->tma) {
        int rows = (int)T < FOLIO_K_TMA_MAX_ROWS ? (int)T : FOLIO_K_TMA_MAX_ROWS;
        size_t n = (size_t)(cb->qkv_dim > H ? cb->qkv_dim : H); /* QKV's, O's and down's */
        int small = rows < TMA_SMALL_ROWS ? rows : TMA_SMALL_ROWS;
        size_t bytes = sizeof(float) * TMA_SLICES * rows * n;
        size_t small_bytes = sizeof(float) * cb->tma_split_down_small * small * H;
        bytes = bytes > small_bytes ? bytes : small_bytes;
        if (bytes > splitk_bytes)
            splitk_bytes = bytes;
    }
    if (splitk_bytes > 0)
        CUDA_CHECK(cudaMalloc((void **)&cb->splitk_partials, splitk_bytes));
    for (int i = 0; i < MAX_INFLIGHT; i++) {
        struct inflight *fl = &cb->fl[i];
        CUDA_CHECK(cudaEventCreateWithFlags(&fl->uploaded, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&fl->computed, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&fl->done, cudaEventDisableTiming));
        CUDA_CHECK(cudaMallocHost((void **)&fl->staging, meta));
        CUDA_CHECK(cudaMalloc((void **)&fl->d_step, meta));
        if (cb->paths.keep_logits)
            CUDA_CHECK(cudaMalloc((void **)&fl->d_logits_keep,
                                  sizeof(float) * (size_t)cb->max_sample_rows * cb->vocab));
        fl->seq_row = calloc(S, sizeof(int));
        fl->seq_drafts = calloc(S, sizeof(int));
        if (!fl->seq_row || !fl->seq_drafts) {
            snprintf(err, errlen, "cuda backend: out of host memory");
            return -1;
        }
    }
    return 0;
}

/* The KV pool: what the memory budget leaves after everything else. */
static int alloc_kv_pool(struct cuda_backend *cb, const struct folio_backend_options *opt,
                         char *err, size_t errlen)
{
    size_t block_elems = (size_t)cb->kv_heads * FOLIO_KV_BLOCK_SIZE * cb->head_dim;
    size_t elem_bytes = cb->kv_fp8 ? 1 : sizeof(bf16); /* e4m3: the budget holds twice the blocks */
    size_t block_bytes_all = elem_bytes * block_elems * 2 * cb->layers;
    size_t nblocks;
    if (opt->num_kv_blocks > 0) {
        nblocks = (size_t)opt->num_kv_blocks;
    } else {
        size_t free_b, total_b;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        float util = opt->gpu_memory_utilization > 0.0f ? opt->gpu_memory_utilization : 0.9f;
        double budget = (double)util * (double)total_b - (double)(total_b - free_b);
        /* Room for CUDA graphs, cuBLASLt and the runtime beyond what is allocated now. */
        budget -= 256.0 * (1 << 20);
        if (budget > (double)free_b)
            budget = (double)free_b;
        nblocks = budget > 0 ? (size_t)(budget / (double)block_bytes_all) : 0;
        if (nblocks > (size_t)0x7fffffff)
            nblocks = 0x7fffffff;
    }
    if (nblocks < 1) {
        snprintf(err, errlen,
                 "cuda backend: no memory left for the KV cache at gpu_memory_utilization %.2f",
                 (double)opt->gpu_memory_utilization);
        return -1;
    }
    cb->kv_layer_bytes = elem_bytes * block_elems * nblocks;
    CUDA_CHECK(cudaMalloc((void **)&cb->kv_pool, block_bytes_all * nblocks));
    cb->base.num_kv_blocks = (int)nblocks;
    return 0;
}

static int create(struct cuda_backend *cb, const struct folio_model *m,
                  const struct folio_backend_options *opt, char *err, size_t errlen)
{
    const struct folio_model_config *c = &m->config;
    cb->hidden = c->hidden_size;
    cb->inter = c->intermediate_size;
    cb->layers = c->num_layers;
    cb->heads = c->num_heads;
    cb->kv_heads = c->num_kv_heads;
    cb->head_dim = c->head_dim;
    cb->vocab = c->vocab_size;
    cb->eps = c->rms_norm_eps;
    cb->qkv_dim = (cb->heads + 2 * cb->kv_heads) * cb->head_dim;
    if (cb->hidden % 8 || cb->inter % 8 || (cb->head_dim != 64 && cb->head_dim != 128) ||
        cb->kv_heads <= 0 || cb->heads % cb->kv_heads || cb->heads / cb->kv_heads > 32) {
        snprintf(
            err, errlen,
            "cuda backend: unsupported shape (hidden %d and intermediate %d must be "
            "multiples of 8, head_dim %d must be 64 or 128, heads %d / kv_heads %d at most 32)",
            cb->hidden, cb->inter, cb->head_dim, cb->heads, cb->kv_heads);
        return -1;
    }
    cb->fp8 = folio_backend_quantization(m, opt->quantization) == FOLIO_QUANT_FP8;
    /* A GGUF's blocks stay packed unless fp8 was asked for (it quantizes the widened weights)
     * or a test asks for the bf16 copy to compare with. */
    cb->gguf = !cb->fp8 && !opt->cuda_paths.gguf_bf16 && cuda_gguf_keeps_packed(m);
    cb->kv_fp8 = opt->kv_cache_dtype == FOLIO_KV_FP8;
    int qd = cb->heads * cb->head_dim;
    if (cb->fp8 && (cb->hidden % 16 || cb->inter % 16 || qd % 16)) {
        snprintf(err, errlen,
                 "cuda backend: --quantization fp8 needs hidden %d, intermediate %d and heads x "
                 "head_dim %d to be multiples of 16 (FP8 GEMMs' k)",
                 cb->hidden, cb->inter, qd);
        return -1;
    }
    if (opt->max_seqs <= 0 || opt->max_num_tokens <= 0) {
        snprintf(err, errlen, "cuda backend: max_seqs %d and max_num_tokens %d must be positive",
                 opt->max_seqs, opt->max_num_tokens);
        return -1;
    }
    if (opt->num_speculative_tokens < 0 || opt->num_speculative_tokens > FOLIO_MAX_DRAFT_TOKENS) {
        snprintf(err, errlen, "cuda backend: num_speculative_tokens %d outside 0..%d",
                 opt->num_speculative_tokens, FOLIO_MAX_DRAFT_TOKENS);
        return -1;
    }
    cb->base.ops = &cuda_ops;
    cb->base.caps =
        (struct folio_backend_caps){.pipeline_depth = 2, .grammar = true, .verify_drafts = true};
    cb->base.model = m;
    cb->base.max_seqs = opt->max_seqs;
    cb->base.max_num_tokens = opt->max_num_tokens;
    cb->base.vocab_size = m->config.vocab_size;
    read_tuning(cb, opt);
    CUDA_CHECK(cudaSetDevice(0));
    if (cb->fp8 && cuda_fp8_check_device(err, errlen) != 0)
        return -1;
    CUDA_CHECK(cudaDeviceGetAttribute(&cb->num_sms, cudaDevAttrMultiProcessorCount, 0));
    if (cb->attn_tile_tokens > 0)
        CUDA_CHECK(folio_k_attention_prepare(cb->head_dim));
    CUDA_CHECK(cudaStreamCreateWithFlags(&cb->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&cb->upload, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&cb->download, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasLtCreate(&cb->lt));
    CUDA_CHECK(cudaMalloc(&cb->workspace, WORKSPACE_BYTES));
    cb->plans = calloc(GEMM_CACHE_SIZE, sizeof(*cb->plans));
    cb->lw = calloc((size_t)cb->layers, sizeof(*cb->lw));
    cb->kv_scale = malloc(2 * (size_t)cb->layers * sizeof(*cb->kv_scale));
    if (!cb->plans || !cb->lw || !cb->kv_scale) {
        snprintf(err, errlen, "cuda backend: out of host memory");
        return -1;
    }
    for (int i = 0; i < cb->layers; i++) { /* the checkpoint's, else vLLM's default (model.h) */
        cb->kv_scale[2 * i] = m->layers[i].k_scale;
        cb->kv_scale[2 * i + 1] = m->layers[i].v_scale;
    }
    if (cb->kv_fp8 && cb->attn_tile_tokens > 0)
        CUDA_CHECK(folio_k_attention_fp8_prepare(cb->head_dim));
    if (cuda_load_weights(cb, m, err, errlen) != 0 ||
        alloc_activations(cb, &m->config, opt, err, errlen) != 0 ||
        alloc_step_buffers(cb, (size_t)opt->max_num_tokens, (size_t)opt->max_seqs, err, errlen) !=
            0 ||
        (cb->fp8 && cuda_fp8_setup(cb, opt->max_num_tokens, err, errlen) != 0) ||
        (cb->gguf && cuda_gguf_setup(cb, opt->max_num_tokens, err, errlen) != 0) ||
        alloc_kv_pool(cb, opt, err, errlen) != 0)
        return -1;
    CUDA_CHECK(folio_cuda_mask_init(&cb->mask, opt->max_seqs, cb->vocab));
    CUDA_CHECK(cudaStreamSynchronize(cb->stream));
    return 0;
}

int folio_cuda_backend_create(const struct folio_model *m, const struct folio_backend_options *opt,
                              struct folio_backend **out, char *err, size_t errlen)
{
    if (opt->tensor_parallel_size > 1) {
        snprintf(err, errlen,
                 "cuda backend: tensor_parallel_size %d: one GPU per worker; tensor parallelism "
                 "over NCCL is not built yet",
                 opt->tensor_parallel_size);
        return -1;
    }
    struct cuda_backend *cb = calloc(1, sizeof(*cb));
    if (!cb) {
        snprintf(err, errlen, "cuda backend: out of host memory");
        return -1;
    }
    if (create(cb, m, opt, err, errlen) != 0 || cuda_capture_graphs(cb, err, errlen) != 0 ||
        cuda_warm_up_mixed_steps(cb, err, errlen) != 0) {
        cuda_destroy(&cb->base);
        return -1;
    }
    *out = &cb->base;
    return 0;
}
