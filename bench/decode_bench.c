/* decode_bench: in-process timings of the CUDA backend (issue 4's kernel-level
 * figures), each printed with the bytes or FLOPs that set its floor.
 *
 *     decode_bench MODEL_DIR decode BATCH CONTEXT [STEPS]
 *     decode_bench MODEL_DIR mixed BATCH CONTEXT CHUNK [STEPS]
 *     decode_bench MODEL_DIR prefill TOKENS [REPEATS]
 *     decode_bench MODEL_DIR attention BATCH CONTEXT [REPEATS]
 *     decode_bench MODEL_DIR sample ROWS [REPEATS]
 *
 * decode: BATCH sequences are prefilled to CONTEXT tokens, then STEPS decode
 * steps run as the worker runs them (step N+1 launched before N is collected,
 * tokens fed back on the GPU); the figure is wall time per step in steady
 * state. Every step sees CONTEXT tokens of context, as issue 4 defines its
 * figures: the new token goes to position CONTEXT each time, overwriting the
 * previous step's key and value there. --grow: the sequences grow by a token
 * a step instead (contexts CONTEXT + 1 .. CONTEXT + STEPS + 3).
 *
 * mixed: the same decode steps with one more sequence beside the BATCH, a
 * prompt chunk of CHUNK new tokens after CONTEXT cached ones (written again at
 * the same positions each step, so every step is alike): the step of a
 * saturated server, whose decodes share their steps with prefill chunks.
 *
 * prefill: one chunk of TOKENS new tokens, median over REPEATS.
 *
 * attention: the decode attention of one layer alone on a decode batch (the
 * split-KV tensor-core kernel as the worker runs it, then the reference kernel
 * as "attnref"), timed with CUDA events. --loop-seconds S: then the
 * tensor-core kernel runs back to back for S seconds (a graph of 20 launches
 * replayed), for a power reading of it alone (nvidia-smi meanwhile):
 *     LOOP name=attention_bB_ctxC launches=L seconds=T ms=T/L
 *
 * sample: the sampler alone (folio_k_sample as a decode step of ROWS rows
 * runs it, "sample"; and sample.cu's one kernel alone, "sample1") on synthetic
 * f32 logits of the model's vocabulary, timed with CUDA events: "hot" launches back to back (the
 * logits stay in L2 as far as they fit), "fresh" rewrites the logits before each launch and then
 * reads 256 MB through the L2, as the LM head writes its logits while its weights stream through.
 * The tokens and logprobs are checked against the CPU backend's sampler.
 *
 * Each result is one line:
 *     RESULT name=... ms=... bytes=... flops=...
 * (bytes: what must cross device memory; flops: the matrix work), so the
 * caller sets them against its measured bandwidth and GEMM rate.
 * Sampling is greedy; --temperature T samples at temperature T (seed 1, no
 * filter) instead.
 *
 * Options, before MODEL_DIR: --temperature T, --grow, --loop-seconds S,
 * --num-kv-blocks N (a small pool, e.g. under the sanitizer), and
 * --paths gemv_max_rows=N,no_tma_gemm,splitk_o=N,splitk_down=N,gguf_bf16 (the kernel
 * paths forced, as the GPU checks force them; default: the engine's), and
 * --quantization fp8 (the layers' projections in e4m3: their bytes count 1
 * each in the floor, the LM head's 2), --kv-cache-dtype fp8 (K and V in
 * e4m3: 1 byte a value in the floor). A GGUF's projections kept packed on the
 * GPU count their blocks' bytes; --paths gguf_bf16 takes the bf16 copy instead. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include "backend.h"
#include "folio_kernels.h"
#include "gguf_blocks.h"
#include "l2_sweep.h"
#include "model.h"
#include "safetensors.h"
#include "sampler.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The command line's options (see the top of this file). */
static struct {
    float temperature;
    bool grow;
    double loop_seconds;
    int num_kv_blocks;
    struct folio_cuda_paths paths;
    enum folio_quantization quantization;
    enum folio_kv_cache_dtype kv_cache_dtype;
} flags;

/* The layers' projection weights (QKV, O, gate/up, down), all layers. */
static double layer_weights(const struct folio_model_config *c)
{
    double h = c->hidden_size, qd = (double)c->num_heads * c->head_dim,
           kd = (double)c->num_kv_heads * c->head_dim, in = c->intermediate_size;
    return ((qd + 2 * kd) * h + h * qd + 2 * in * h + h * in) * c->num_layers;
}

/* A GGUF's projections as the CUDA backend keeps them: the packed types' blocks, other
 * tensors' bf16 copy (2 bytes a weight). */
static double gguf_layer_bytes(const struct folio_model *m)
{
    double bytes = 0;
    for (int i = 0; i < m->config.num_layers; i++) {
        const struct folio_layer_weights *L = &m->layers[i];
        const struct folio_tensor *ts[7] = {L->wq,     L->wk,   L->wv,    L->wo,
                                            L->w_gate, L->w_up, L->w_down};
        for (int j = 0; j < 7; j++) {
            uint32_t type = 0;
            bool packed =
                ts[j]->gguf && folio_tensor_gguf_row(ts[j], 0, &type) && gguf_packed_type(type);
            bytes += packed ? (double)ts[j]->shape[0] * gguf_row_bytes(type, ts[j]->shape[1])
                            : 2.0 * (double)ts[j]->shape[0] * (double)ts[j]->shape[1];
        }
    }
    return bytes;
}

/* Bytes of the linear weights one forward pass reads: the layers' projections (1 a weight
 * under fp8, with a 4-byte scale a row; a GGUF's blocks), the LM head (bf16). */
static double linear_weight_bytes(const struct folio_model *m)
{
    const struct folio_model_config *c = &m->config;
    double h = c->hidden_size, qd = (double)c->num_heads * c->head_dim,
           kd = (double)c->num_kv_heads * c->head_dim, in = c->intermediate_size;
    double head = 2.0 * (double)c->vocab_size * h;
    if (flags.quantization == FOLIO_QUANT_FP8)
        return layer_weights(c) + 4.0 * (qd + 2 * kd + h + 2 * in + h) * c->num_layers + head;
    if (m->layers[0].wq->gguf && !flags.paths.gguf_bf16)
        return gguf_layer_bytes(m) + head;
    return 2.0 * layer_weights(c) + head;
}

static double kv_bytes_per_token(const struct folio_model_config *c)
{
    double value_bytes = flags.kv_cache_dtype == FOLIO_KV_FP8 ? 1.0 : 2.0;
    return 2.0 * value_bytes * c->num_layers * c->num_kv_heads * c->head_dim;
}

struct bench {
    struct folio_model *model;
    struct folio_backend *be;
    struct folio_step_result res;
    uint32_t rng;
};

static int next_token(struct bench *b)
{
    b->rng = b->rng * 1664525u + 1013904223u;
    return 3 + (int)((b->rng >> 8) % (uint32_t)(b->model->config.vocab_size - 3));
}

static int step(struct bench *b, const struct folio_step_batch *batch)
{
    char err[512];
    if (folio_backend_step(b->be, batch, &b->res, err, sizeof err) != 0) {
        fprintf(stderr, "decode_bench: %s\n", err);
        return -1;
    }
    return 0;
}

/* The sampling parameters of every sequence: greedy, or tempered
 * (--temperature), no filter, no penalty, no logprobs. */
static struct folio_sampling_params bench_sampling(void)
{
    struct folio_sampling_params p = {.top_p = 1.0f, .repetition_penalty = 1.0f, .seed = 1};
    p.temperature = flags.temperature;
    return p;
}

/* Prefills nseq sequences (slot i, blocks i*nb..) to ctx tokens, chunked to
 * the backend's max_num_tokens. */
static int prefill_all(struct bench *b, int nseq, int ctx, int nb, int32_t *tables)
{
    int max_t = b->be->max_num_tokens;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)max_t);
    struct folio_step_seq *seqs = calloc((size_t)nseq, sizeof(*seqs));
    if (!ids || !seqs)
        return -1;
    int *done = calloc((size_t)nseq, sizeof(int));
    int rc = 0, remaining = nseq;
    while (remaining > 0 && rc == 0) {
        int ns = 0, nt = 0;
        for (int i = 0; i < nseq && nt < max_t && ns < b->be->max_seqs; i++) {
            if (done[i] == ctx)
                continue;
            int take = ctx - done[i] < max_t - nt ? ctx - done[i] : max_t - nt;
            for (int j = 0; j < take; j++)
                ids[nt + j] = next_token(b);
            done[i] += take;
            seqs[ns] = (struct folio_step_seq){
                .slot = i,
                .num_new_tokens = take,
                .context_len = done[i],
                .num_blocks = nb,
                .block_table = tables + (size_t)i * nb,
                .sample = done[i] == ctx,
                .sampling = bench_sampling(),
            };
            if (done[i] == ctx)
                remaining--;
            ns++;
            nt += take;
        }
        struct folio_step_batch batch = {
            .num_seqs = ns, .num_tokens = nt, .token_ids = ids, .seqs = seqs};
        rc = step(b, &batch);
    }
    free(done);
    free(ids);
    free(seqs);
    return rc;
}

/* Decode steps of batch_size sequences; with chunk > 0, beside a prompt chunk
 * of that many tokens (sequence batch_size, not sampled). */
static int bench_decode(struct bench *b, int batch_size, int ctx, int steps, int chunk)
{
    const bool grow = flags.grow;
    int nb = ((grow ? ctx + steps + 2 : ctx) + 1 + 15) / 16; /* blocks a sequence needs */
    if (chunk > 0 && (ctx + chunk + 15) / 16 > nb)
        nb = (ctx + chunk + 15) / 16;
    const int nseq = batch_size + (chunk > 0);
    int32_t *tables = malloc(sizeof(int32_t) * (size_t)nseq * nb);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(batch_size + chunk));
    struct folio_step_seq *seqs = calloc((size_t)nseq, sizeof(*seqs));
    double *t = malloc(sizeof(double) * (size_t)steps);
    if (!tables || !ids || !seqs || !t)
        return -1;
    for (int i = 0; i < nseq * nb; i++)
        tables[i] = i;
    if (nseq * nb > b->be->num_kv_blocks) {
        fprintf(stderr, "decode_bench: the pool has %d blocks, %d needed\n", b->be->num_kv_blocks,
                nseq * nb);
        return -1;
    }
    if (prefill_all(b, nseq, ctx, nb, tables) != 0)
        return -1;
    for (int j = 0; j < chunk; j++) /* the same chunk every step */
        ids[batch_size + j] = next_token(b);
    char err[512];
    int launched = 0, collected = 0;
    double t_prev = now_ms(), t_start = 0;
    int warm = 3;
    uint32_t hash = 2166136261u;
    struct folio_step_batch batch[2];
    while (collected < steps + warm) {
        while (launched < steps + warm && launched - collected < 2) {
            if (launched == warm) /* a profiler started with --profile-from-start off sees
                                     the steady-state steps only */
                cudaProfilerStart();
            for (int i = 0; i < batch_size; i++) {
                ids[i] = FOLIO_TOKEN_FROM_PREV;
                seqs[i] = (struct folio_step_seq){
                    .slot = i,
                    .num_new_tokens = 1,
                    .context_len = grow ? ctx + launched + 1 : ctx + 1,
                    .num_blocks = nb,
                    .block_table = tables + (size_t)i * nb,
                    .sample = true,
                    .output_index = launched + 1,
                    .sampling = bench_sampling(),
                };
            }
            if (chunk > 0)
                seqs[batch_size] = (struct folio_step_seq){
                    .slot = batch_size,
                    .num_new_tokens = chunk,
                    .context_len = ctx + chunk,
                    .num_blocks = nb,
                    .block_table = tables + (size_t)batch_size * nb,
                    .sampling = bench_sampling(),
                };
            batch[launched % 2] = (struct folio_step_batch){
                .num_seqs = nseq, .num_tokens = batch_size + chunk, .token_ids = ids, .seqs = seqs};
            if (b->be->ops->launch(b->be, &batch[launched % 2], err, sizeof err) != 0) {
                fprintf(stderr, "decode_bench: %s\n", err);
                return -1;
            }
            launched++;
        }
        if (b->be->ops->collect(b->be, &b->res, err, sizeof err) != 0) {
            fprintf(stderr, "decode_bench: %s\n", err);
            return -1;
        }
        for (int i = 0; i < batch_size; i++) /* greedy: equal hashes mean equal tokens */
            hash = (hash ^ (uint32_t)b->res.token_ids[i]) * 16777619u;
        double tn = now_ms();
        if (collected == warm - 1)
            t_start = tn;
        if (collected >= warm)
            t[collected - warm] = tn - t_prev;
        t_prev = tn;
        collected++;
    }
    double total = now_ms() - t_start;
    cudaProfilerStop();
    const struct folio_model_config *c = &b->model->config;
    double bytes = linear_weight_bytes(b->model) +
                   kv_bytes_per_token(c) * batch_size * (grow ? ctx + steps / 2 : ctx + 1);
    double flops = 0;
    char name[96];
    snprintf(name, sizeof name, "decode_b%d_ctx%d", batch_size, ctx);
    if (chunk > 0) { /* the chunk's matrix work and its attention over ctx + its own tokens */
        double lin = layer_weights(c);
        bytes += kv_bytes_per_token(c) * (ctx + chunk);
        flops = 2.0 * lin * (batch_size + chunk) + 4.0 * c->num_layers * c->num_heads *
                                                       c->head_dim * (double)chunk *
                                                       (ctx + chunk / 2.0);
        snprintf(name, sizeof name, "mixed_b%d_ctx%d_chunk%d", batch_size, ctx, chunk);
    }
    printf("RESULT name=%s ms=%.4f median_ms=%.4f bytes=%.0f flops=%.0f "
           "tokens_hash=%08x contexts=%s\n",
           name, total / steps, median(t, steps), bytes, flops, hash, grow ? "growing" : "fixed");
    free(tables);
    free(ids);
    free(seqs);
    free(t);
    return 0;
}

static int bench_prefill(struct bench *b, int n, int repeats)
{
    int nb = (n + 15) / 16;
    int32_t *tables = malloc(sizeof(int32_t) * (size_t)nb);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    double *t = malloc(sizeof(double) * (size_t)repeats);
    if (!tables || !ids || !t)
        return -1;
    for (int i = 0; i < nb; i++)
        tables[i] = i;
    for (int i = 0; i < n; i++)
        ids[i] = next_token(b);
    struct folio_step_seq seq = {
        .slot = 0,
        .num_new_tokens = n,
        .context_len = n,
        .num_blocks = nb,
        .block_table = tables,
        .sample = true,
        .sampling = bench_sampling(),
    };
    struct folio_step_batch batch = {
        .num_seqs = 1, .num_tokens = n, .token_ids = ids, .seqs = &seq};
    for (int r = 0; r < repeats + 2; r++) {
        double t0 = now_ms();
        if (step(b, &batch) != 0)
            return -1;
        if (r >= 2)
            t[r - 2] = now_ms() - t0;
    }
    const struct folio_model_config *c = &b->model->config;
    double lin = layer_weights(c);
    double flops = 2.0 * lin * n + 2.0 * c->vocab_size * c->hidden_size +
                   /* causal attention: QK^T and PV over n(n+1)/2 pairs per head */
                   4.0 * c->num_layers * c->num_heads * c->head_dim * (double)n * (n + 1) / 2;
    printf("RESULT name=prefill_%d ms=%.4f median_ms=%.4f bytes=%.0f flops=%.0f\n", n,
           median(t, repeats), median(t, repeats), linear_weight_bytes(b->model), flops);
    free(tables);
    free(ids);
    free(t);
    return 0;
}

/* The attention kernel of one layer alone, on synthetic data. */
static int bench_attention(const struct folio_model_config *c, int batch_size, int ctx, int repeats)
{
    int H = c->num_heads, Hkv = c->num_kv_heads, D = c->head_dim;
    int nb = (ctx + 15) / 16;
    size_t nblocks = (size_t)batch_size * nb;
    size_t cache_elems = nblocks * Hkv * 16 * D;
    size_t qkv_elems = (size_t)batch_size * (H + 2 * Hkv) * D;
    uint16_t *h_cache = malloc(sizeof(uint16_t) * cache_elems);
    int32_t *h_meta = malloc(sizeof(int32_t) * (3 * batch_size + nblocks));
    if (!h_cache || !h_meta)
        return -1;
    uint32_t r = 12345;
    for (size_t i = 0; i < cache_elems; i++) {
        r = r * 1664525u + 1013904223u;
        h_cache[i] = (uint16_t)(0x3f80 + ((r >> 16) & 0x7f)) ^ ((r >> 8) & 0x8000); /* +-[1, 2) */
    }
    int32_t *seq = h_meta, *pos = seq + batch_size, *ctxl = pos + batch_size,
            *tables = ctxl + batch_size;
    for (int i = 0; i < batch_size; i++) {
        seq[i] = i;
        pos[i] = ctx - 1;
        ctxl[i] = ctx;
    }
    for (size_t i = 0; i < nblocks; i++)
        tables[i] = (int32_t)((i * 7919) % nblocks); /* scattered blocks */
    uint16_t *k, *v, *qkv, *out;
    int32_t *meta;
    cudaEvent_t e0, e1;
    cudaStream_t s;
#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "decode_bench: %s: %s\n", #x, cudaGetErrorString(e_));                 \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
    CK(cudaStreamCreate(&s));
    CK(cudaMalloc((void **)&k, sizeof(uint16_t) * cache_elems));
    CK(cudaMalloc((void **)&v, sizeof(uint16_t) * cache_elems));
    CK(cudaMalloc((void **)&qkv, sizeof(uint16_t) * qkv_elems));
    CK(cudaMalloc((void **)&out, sizeof(uint16_t) * (size_t)batch_size * H * D));
    CK(cudaMalloc((void **)&meta, sizeof(int32_t) * (3 * batch_size + nblocks)));
    CK(cudaMemcpy(k, h_cache, sizeof(uint16_t) * cache_elems, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(v, h_cache, sizeof(uint16_t) * cache_elems, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(qkv, h_cache, sizeof(uint16_t) * qkv_elems, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(meta, h_meta, sizeof(int32_t) * (3 * batch_size + nblocks),
                  cudaMemcpyHostToDevice));
    struct folio_k_batch kb = {batch_size,
                               batch_size,
                               meta,
                               meta + batch_size,
                               meta + 2 * batch_size,
                               meta + 3 * batch_size,
                               nb};
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    int num_sms, bucket = 1;
    CK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0));
    while (bucket < batch_size)
        bucket <<= 1;
    struct folio_k_decode_plan plan = folio_k_attention_decode_plan(
        bucket, Hkv, D, num_sms, FOLIO_K_ATTN_WARPS_PER_SM, 0, 0); /* the backend's choice */
    size_t ws_bytes = folio_k_attention_decode_workspace_bytes(batch_size, plan, H, D);
    void *ws = NULL;
    int *counters;
    if (ws_bytes)
        CK(cudaMalloc(&ws, ws_bytes));
    CK(cudaMalloc((void **)&counters, sizeof(int) * (size_t)batch_size * Hkv));
    CK(cudaMemset(counters, 0, sizeof(int) * (size_t)batch_size * Hkv));
    int mma = folio_k_attention_tile_tokens(H, Hkv, D) > 0;
    if (mma)
        CK(folio_k_attention_prepare(D));
    double *t = malloc(sizeof(double) * (size_t)repeats);
    double bytes = 2.0 * 2.0 * Hkv * D * (double)batch_size * ctx;
    for (int variant = mma ? 0 : 1; variant < 2; variant++) {
        for (int i = 0; i < repeats + 3; i++) {
            CK(cudaEventRecord(e0, s));
            if (variant == 0)
                CK(folio_k_attention_decode(out, qkv, k, v, kb, plan, ws, counters, H, Hkv, D, NULL,
                                            (struct folio_k_row_norm){0},
                                            (struct folio_k_l2_drop){0}, 0, s));
            else
                CK(folio_k_paged_attention_ref(out, qkv, k, v, kb, H, Hkv, D, s));
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (i >= 3)
                t[i - 3] = ms;
        }
        printf("RESULT name=%s_b%d_ctx%d ms=%.4f median_ms=%.4f bytes=%.0f flops=0 splits=%d "
               "warps=%d\n",
               variant == 0 ? "attention" : "attnref", batch_size, ctx, median(t, repeats),
               median(t, repeats), bytes, variant == 0 ? plan.splits : 1,
               variant == 0 ? plan.warps : 1);
    }
    if (mma) { /* the kernel's output against the reference kernel's */
        size_t n_out = (size_t)batch_size * H * D;
        uint16_t *h_out = malloc(sizeof(uint16_t) * 2 * n_out);
        if (!h_out)
            return -1;
        CK(folio_k_attention_decode(out, qkv, k, v, kb, plan, ws, counters, H, Hkv, D, NULL,
                                    (struct folio_k_row_norm){0}, (struct folio_k_l2_drop){0}, 0,
                                    s));
        CK(cudaMemcpyAsync(h_out, out, sizeof(uint16_t) * n_out, cudaMemcpyDeviceToHost, s));
        CK(folio_k_paged_attention_ref(out, qkv, k, v, kb, H, Hkv, D, s));
        CK(cudaMemcpyAsync(h_out + n_out, out, sizeof(uint16_t) * n_out, cudaMemcpyDeviceToHost,
                           s));
        CK(cudaStreamSynchronize(s));
        double max_diff = 0.0, max_ref = 0.0;
        for (size_t i = 0; i < n_out; i++) {
            float a = folio_bf16_to_f32(h_out[i]), r = folio_bf16_to_f32(h_out[n_out + i]);
            double d = fabs((double)a - r);
            max_diff = d > max_diff || d != d ? d : max_diff;
            max_ref = fabs(r) > max_ref ? fabs(r) : max_ref;
        }
        printf("CHECK attention_b%d_ctx%d max_abs_diff=%.3e max_abs_ref=%.3e %s\n", batch_size, ctx,
               max_diff, max_ref, max_diff <= 2e-2 * max_ref ? "PASS" : "FAIL");
        free(h_out);
    }
    const double loop_s = flags.loop_seconds;
    if (mma && loop_s > 0.0 && loop_s <= 60.0) {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < 20; i++)
            CK(folio_k_attention_decode(out, qkv, k, v, kb, plan, ws, counters, H, Hkv, D, NULL,
                                        (struct folio_k_row_norm){0}, (struct folio_k_l2_drop){0},
                                        0, s));
        CK(cudaStreamEndCapture(s, &graph));
        CK(cudaGraphInstantiate(&exec, graph, 0));
        long replays = 0;
        const double t0 = now_ms();
        double t1 = t0;
        while (t1 - t0 < 1e3 * loop_s) { /* 50 replays between synchronizations */
            for (int i = 0; i < 50; i++)
                CK(cudaGraphLaunch(exec, s));
            replays += 50;
            CK(cudaStreamSynchronize(s));
            t1 = now_ms();
        }
        printf("LOOP name=attention_b%d_ctx%d launches=%ld seconds=%.3f ms=%.5f\n", batch_size, ctx,
               20 * replays, (t1 - t0) / 1e3, (t1 - t0) / (double)(20 * replays));
        CK(cudaGraphExecDestroy(exec));
        CK(cudaGraphDestroy(graph));
    }
    cudaFree(ws);
    cudaFree(counters);
    cudaFree(k);
    cudaFree(v);
    cudaFree(qkv);
    cudaFree(out);
    cudaFree(meta);
    cudaStreamDestroy(s);
    free(t);
    free(h_cache);
    free(h_meta);
    return 0;
}

/* The sampler alone on synthetic logits (see the top of the file), by the
 * backend's path ("sample": the common rows through folio_k_sample_rows, or the
 * split kernels at up to 8 rows) and by sample.cu's kernel alone ("sample1",
 * the one_cta_sampler path), each checked against the CPU backend's sampler. */
static int bench_sample(const struct folio_model_config *c, int rows, int repeats)
{
    const int V = c->vocab_size, L = FOLIO_MAX_LOGPROBS;
    if (rows <= 0 || V <= 0 || repeats <= 0)
        return -1;
    const struct folio_sampling_params sp = bench_sampling();
    const size_t n = (size_t)rows * V;
    float *h_logits = malloc(sizeof(float) * n);
    struct folio_k_sample_params *h_params = malloc(sizeof(*h_params) * (size_t)rows);
    int32_t *h_tokens = malloc(sizeof(int32_t) * (size_t)rows);
    float *h_logprobs = malloc(sizeof(float) * (size_t)rows);
    double *t = malloc(sizeof(double) * (size_t)repeats);
    struct folio_sampler *ref = folio_sampler_new(V);
    if (!h_logits || !h_params || !h_tokens || !h_logprobs || !t || !ref)
        return -1;
    /* Values in [-8, 8) with a few ties at the top, so that the lowest index
     * must win them. */
    uint32_t r = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        r ^= r << 13;
        r ^= r >> 17;
        r ^= r << 5;
        h_logits[i] = ((float)(r >> 8) / 16777216.0f) * 16.0f - 8.0f;
    }
    for (int i = 0; i < rows; i++) {
        float *row = h_logits + (size_t)i * V;
        row[(i * 7919) % V] = 9.0f;
        row[(i * 104729 + 1) % V] = 9.0f;
        h_params[i] = (struct folio_k_sample_params){.s = sp, .output_index = 1, .slot = i};
    }
    float *logits, *logits_src, *logprobs, *top_lp;
    int32_t *tokens, *top_ids, *last;
    struct folio_k_sample_params *params;
    void *sweep, *split_ws;
    unsigned *sink;
    const size_t sweep_bytes = (size_t)256 << 20;
    const size_t split_bytes = folio_k_sample_split_bytes(
        rows < FOLIO_K_SAMPLE_SPLIT_MAX_ROWS ? rows : FOLIO_K_SAMPLE_SPLIT_MAX_ROWS);
    cudaEvent_t e0, e1;
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CK(cudaMalloc((void **)&logits, sizeof(float) * n));
    CK(cudaMalloc((void **)&logits_src, sizeof(float) * n));
    CK(cudaMalloc((void **)&params, sizeof(*params) * (size_t)rows));
    CK(cudaMalloc((void **)&tokens, sizeof(int32_t) * (size_t)rows));
    CK(cudaMalloc((void **)&logprobs, sizeof(float) * (size_t)rows));
    CK(cudaMalloc((void **)&top_ids, sizeof(int32_t) * (size_t)rows * L));
    CK(cudaMalloc((void **)&top_lp, sizeof(float) * (size_t)rows * L));
    CK(cudaMalloc((void **)&last, sizeof(int32_t) * (size_t)rows));
    CK(cudaMalloc(&sweep, sweep_bytes));
    CK(cudaMalloc(&split_ws, split_bytes));
    CK(cudaMalloc((void **)&sink, sizeof(unsigned)));
    CK(cudaMemset(sweep, 0, sweep_bytes));
    CK(cudaMemset(split_ws, 0, split_bytes));
    CK(cudaMemcpy(logits_src, h_logits, sizeof(float) * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(logits, h_logits, sizeof(float) * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(params, h_params, sizeof(*params) * (size_t)rows, cudaMemcpyHostToDevice));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    int pass = 1;
    for (int path = 0; path < 2; path++) {
        const char *name = path == 0 ? "sample" : "sample1";
        void *ws = path == 0 ? split_ws : NULL;
        for (int fresh = 0; fresh < 2; fresh++) {
            for (int i = 0; i < repeats + 3; i++) {
                if (fresh) { /* written anew, then a stream of reads through the L2 */
                    CK(cudaMemcpyAsync(logits, logits_src, sizeof(float) * n,
                                       cudaMemcpyDeviceToDevice, s));
                    CK(bench_l2_sweep(sweep, sweep_bytes, sink, s));
                }
                CK(cudaEventRecord(e0, s));
                CK(folio_k_sample(logits, rows, V, params, tokens, logprobs, top_ids, top_lp, L,
                                  last, NULL, ws, 0, 0, s));
                CK(cudaEventRecord(e1, s));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                if (i >= 3)
                    t[i - 3] = ms;
            }
            printf("RESULT name=%s_%s_b%d ms=%.4f median_ms=%.4f bytes=%.0f flops=0\n", name,
                   fresh ? "fresh" : "hot", rows, median(t, repeats), median(t, repeats),
                   (double)sizeof(float) * n);
        }
        CK(cudaMemcpy(h_tokens, tokens, sizeof(int32_t) * (size_t)rows, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h_logprobs, logprobs, sizeof(float) * (size_t)rows, cudaMemcpyDeviceToHost));
        /* The CPU backend's sampler is the reference. */
        int wrong_token = 0;
        double max_lp_diff = 0.0;
        for (int i = 0; i < rows; i++) {
            struct folio_sample_result want;
            char err[256];
            if (folio_sample(ref, h_logits + (size_t)i * V, &sp, 1, NULL, &want, err, sizeof err) !=
                0) {
                fprintf(stderr, "decode_bench: %s\n", err);
                return -1;
            }
            if (h_tokens[i] != want.token)
                wrong_token++;
            double d = fabs((double)h_logprobs[i] - want.logprob);
            max_lp_diff = d > max_lp_diff || d != d ? d : max_lp_diff;
        }
        const int ok = wrong_token == 0 && max_lp_diff <= 1e-3;
        printf("CHECK %s_b%d temperature=%g wrong_tokens=%d max_logprob_diff=%.3e %s\n", name, rows,
               (double)sp.temperature, wrong_token, max_lp_diff, ok ? "PASS" : "FAIL");
        pass = pass && ok;
    }
    folio_sampler_free(ref);
    cudaFree(logits);
    cudaFree(logits_src);
    cudaFree(params);
    cudaFree(tokens);
    cudaFree(logprobs);
    cudaFree(top_ids);
    cudaFree(top_lp);
    cudaFree(last);
    cudaFree(sweep);
    cudaFree(split_ws);
    cudaFree(sink);
    cudaStreamDestroy(s);
    free(t);
    free(h_logits);
    free(h_params);
    free(h_tokens);
    free(h_logprobs);
    return pass ? 0 : -1;
}

/* --paths' list: gemv_max_rows=N, no_tma_gemm, splitk_o=N, splitk_down=N, gguf_bf16. */
static int parse_paths(char *list, struct folio_cuda_paths *p)
{
    for (char *save = NULL, *item = strtok_r(list, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        int v = eq ? atoi(eq + 1) : 0;
        if (eq)
            *eq = 0;
        if (!strcmp(item, "no_tma_gemm") && !eq)
            p->no_tma_gemm = true;
        else if (!strcmp(item, "gguf_bf16") && !eq)
            p->gguf_bf16 = true;
        else if (!strcmp(item, "gemv_max_rows") && eq && v >= 0 && v <= 8)
            p->gemv_max_rows = v == 0 ? -1 : v; /* -1: no step takes the GEMV path */
        else if (!strcmp(item, "splitk_o") && eq && v >= 1 && v <= 8 && !(v & (v - 1)))
            p->splitk_o = v;
        else if (!strcmp(item, "splitk_down") && eq && v >= 1 && v <= 8 && !(v & (v - 1)))
            p->splitk_down = v;
        else
            return -1;
    }
    return 0;
}

/* Takes the options before MODEL_DIR; returns how many arguments they were, or -1. */
static int parse_flags(int argc, char **argv)
{
    int i = 1;
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        const char *o = argv[i];
        char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--grow")) {
            flags.grow = true;
            continue;
        }
        if (!v)
            return -1;
        i++;
        if (!strcmp(o, "--temperature"))
            flags.temperature = (float)atof(v);
        else if (!strcmp(o, "--loop-seconds"))
            flags.loop_seconds = atof(v);
        else if (!strcmp(o, "--num-kv-blocks"))
            flags.num_kv_blocks = atoi(v);
        else if (!strcmp(o, "--quantization")) {
            if (folio_quantization_parse(v, &flags.quantization) != 0)
                return -1;
        } else if (!strcmp(o, "--kv-cache-dtype")) {
            if (folio_kv_cache_dtype_parse(v, &flags.kv_cache_dtype) != 0)
                return -1;
        } else if (!strcmp(o, "--paths")) {
            if (parse_paths(v, &flags.paths) != 0)
                return -1;
        } else
            return -1;
    }
    return i - 1;
}

int main(int argc, char **argv)
{
    int nflags = parse_flags(argc, argv);
    if (nflags > 0) {
        argv[nflags] = argv[0];
        argv += nflags;
        argc -= nflags;
    }
    if (nflags < 0 || argc < 4) {
        fprintf(stderr, "usage: decode_bench [OPTIONS] MODEL_DIR decode BATCH CONTEXT [STEPS]\n"
                        "       decode_bench MODEL_DIR mixed BATCH CONTEXT CHUNK [STEPS]\n"
                        "       decode_bench MODEL_DIR prefill TOKENS [REPEATS]\n"
                        "       decode_bench MODEL_DIR attention BATCH CONTEXT [REPEATS]\n"
                        "       decode_bench MODEL_DIR sample ROWS [REPEATS]\n");
        return 2;
    }
    char err[512];
    struct bench b = {.rng = 1};
    if (folio_model_open(argv[1], &b.model, err, sizeof err) != 0) {
        fprintf(stderr, "decode_bench: %s\n", err);
        return 1;
    }
    /* An FP8 checkpoint runs as fp8 whatever the flag (backend_quant.c): its bytes count so. */
    if (folio_model_is_fp8(b.model))
        flags.quantization = FOLIO_QUANT_FP8;
    const char *mode = argv[2];
    int a = atoi(argv[3]), a2 = argc > 4 ? atoi(argv[4]) : 0, a3 = argc > 5 ? atoi(argv[5]) : 0;
    int a4 = argc > 6 ? atoi(argv[6]) : 0;
    const bool mixed = !strcmp(mode, "mixed");
    if (mixed && a3 <= 0) {
        fprintf(stderr, "decode_bench: mixed needs BATCH CONTEXT CHUNK\n");
        folio_model_close(b.model);
        return 2;
    }
    int rc;
    if (!strcmp(mode, "attention")) {
        rc = bench_attention(&b.model->config, a, a2, a3 > 0 ? a3 : 20);
        folio_model_close(b.model);
        return rc ? 1 : 0;
    }
    if (!strcmp(mode, "sample")) {
        rc = bench_sample(&b.model->config, a, a2 > 0 ? a2 : 20);
        folio_model_close(b.model);
        return rc ? 1 : 0;
    }
    /* Decode: room for the batch's graph bucket (the next power of two), so
     * that every batch size replays a graph as it does in the server; sized to
     * the batch alone, 40 or 48 sequences ran eagerly. */
    int max_seqs = 8;
    while ((!strcmp(mode, "decode") || mixed) && max_seqs < a + mixed)
        max_seqs *= 2;
    struct folio_backend_options opt = {
        .max_seqs = max_seqs,
        .max_num_tokens = !strcmp(mode, "prefill") ? a
                          : mixed && a + a3 > 4096 ? a + a3
                                                   : 4096,
        .gpu_memory_utilization = 0.5f,
        .logits_unread = true,
        .num_kv_blocks = flags.num_kv_blocks,
        .cuda_paths = flags.paths,
        .quantization = flags.quantization,
        .kv_cache_dtype = flags.kv_cache_dtype,
    };
    if (folio_cuda_backend_create(b.model, &opt, &b.be, err, sizeof err) != 0) {
        fprintf(stderr, "decode_bench: %s\n", err);
        folio_model_close(b.model);
        return 1;
    }
    size_t S = (size_t)b.be->max_seqs;
    b.res.token_ids = malloc(S * sizeof(int32_t));
    b.res.logprobs = malloc(S * sizeof(float));
    b.res.top_ids = malloc(S * FOLIO_MAX_LOGPROBS * sizeof(int32_t));
    b.res.top_logprobs = malloc(S * FOLIO_MAX_LOGPROBS * sizeof(float));
    if (!strcmp(mode, "decode"))
        rc = bench_decode(&b, a, a2 > 0 ? a2 : 512, a3 > 0 ? a3 : 64, 0);
    else if (mixed)
        rc = bench_decode(&b, a, a2 > 0 ? a2 : 512, a4 > 0 ? a4 : 64, a3);
    else if (!strcmp(mode, "prefill"))
        rc = bench_prefill(&b, a, a2 > 0 ? a2 : 10);
    else {
        fprintf(stderr, "decode_bench: unknown mode %s\n", mode);
        rc = -1;
    }
    free(b.res.token_ids);
    free(b.res.logprobs);
    free(b.res.top_ids);
    free(b.res.top_logprobs);
    b.be->ops->destroy(b.be);
    folio_model_close(b.model);
    return rc ? 1 : 0;
}
