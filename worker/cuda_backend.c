/* The CUDA backend of backend.h: weights in bf16 on the GPU, a paged KV pool,
 * cuBLASLt GEMMs, the kernels of kernels/, GPU sampling and CUDA graphs for
 * decode-only steps.
 *
 * A step is queued on one stream: one host-to-device copy of the step's
 * metadata (packed in pinned memory), the forward pass, sampling, and one
 * device-to-host copy per result array into pinned memory, then an event.
 * collect() waits on the event of the oldest step. Up to two steps are in
 * flight, each with its own pinned staging, so step N+1 is queued before N's
 * results are read; FOLIO_TOKEN_FROM_PREV ids are read on the GPU from the ids
 * each slot sampled last (the embedding kernel does it), never from the host.
 *
 * Any CUDA or cuBLAS error returns -1 with a message and marks the backend
 * failed: the worker exits and the scheduler starts a fresh one. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "backend.h"
#include "cuda_logit_bias.h"
#include "folio_kernels.h"

#define MAX_INFLIGHT 2
#define GEMM_CACHE_SIZE 1024 /* open-addressed, power of two */
#define WORKSPACE_BYTES (32u << 20)
#define NUM_GRAPH_BUCKETS 16
/* Split-K of the O and down projections: batches of at most this many rows (the
 * decode graph buckets) on the cuBLASLt path. */
#define SPLITK_MAX_ROWS 256

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            snprintf(err, errlen, "cuda backend: %s failed: %s (%s:%d)", #call,                    \
                     cudaGetErrorString(e_), __FILE__, __LINE__);                                  \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

#define CUBLAS_CHECK(call)                                                                         \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            snprintf(err, errlen, "cuda backend: %s failed: %s (%s:%d)", #call,                    \
                     cublasLtGetStatusString(s_), __FILE__, __LINE__);                             \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

typedef folio_bf16_bits bf16;

/* One cached GEMM shape: y[M, N] = x[M, K] * w[N, K]^T, algorithm picked once.
 * splits > 1: a strided-batched matmul over that many slices of K, f32 partial
 * results [splits][M][N]; align: the byte alignment its slices keep. */
struct gemm_plan {
    bool used;
    int m, n, k;
    bool out_f32;
    int splits;
    unsigned align;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
};

struct cuda_layer {
    /* The norms' weights are folded into the columns of the projections that
     * read them (wqkv, w_gate_up) at load, and attn_norm and mlp_norm hold ones:
     * the norm kernels then compute x / rms(x), and decode steps of 65-256 rows
     * can leave the norm to the kernels after those projections
     * (norm_in_consumers). */
    bf16 *attn_norm, *wqkv, *wo, *mlp_norm, *w_gate_up, *w_down;
};

/* Byte offsets of the sections of a step's buffer, for T token rows and S
 * sequence rows (a graph bucket uses T = S = bucket): the metadata the host
 * packs (inputs, up to `inputs`), then what the sampler writes for S rows
 * (outputs, up to `total`). Each in-flight slot has the buffer twice, pinned
 * on the host and on the device: one copy in, one copy out a step. */
struct step_layout {
    size_t token_ids, token_slot, token_seq, token_pos, seq_ctx, sample_rows, params, tables,
        attn_tiles, pen_seqs;
    size_t inputs;
    size_t out_tokens, out_logprobs, out_top_ids, out_top_logprobs;
    size_t total;
};

/* The dead buffers of a decode step dropped from the L2 (cuda_backend.l2_drop).
 * Left there, they are written back to memory when the next layers' weights and
 * keys evict them, traffic that lands on the kernels reading memory then. On
 * the H200 (bench/results/2026-12-02-cuda-round31.md), same tokens: b256 1.9585
 * ms against 1.9876 with none dropped, b160 1.7245 against 1.7423; the first
 * three alone b256 1.9769 against 2.0086 (decode attention 36.6 us a layer
 * against 37.4, QKV 7.9 against 8.3). With bits 32 and 64 on the path of
 * 65-128 rows too: b128 1.4636 against 1.4952 (the logits only, as before),
 * bench/results/2026-12-02-cuda-round32.md. Decode steps on the cuBLASLt
 * path drop them (`drops` in forward); others only the logits that one CTA a
 * row samples. */
enum {
    L2_DROP_GATE_UP = 1,   /* gate/up's output, by SiLU once read */
    L2_DROP_ACT = 2,       /* SiLU's output once the down GEMM read it: by decode
                              attention (norms in the consumers), else by the
                              next add_rmsnorm */
    L2_DROP_LOGITS = 4,    /* by the sampler (logits_unread) */
    L2_DROP_QKV = 8,       /* q, k and v, by decode attention once read (norms in
                              the consumers) */
    L2_DROP_ATTN_OUT = 16, /* attention's output once O read it: by SiLU (norms
                              in the consumers), else by the next add_rmsnorm */
    L2_DROP_NORMED = 32,   /* the norm's output once a projection read it: by
                              decode attention (after QKV) and SiLU (after
                              gate/up) */
    L2_DROP_ADD = 64,      /* what add_rmsnorm adds (O's or down's output or
                              its K slices), once added */
    L2_DROP_ALL = 127,
};

/* A step between launch and collect. Its slot's buffers and graphs are its
 * own while it is in flight, so the next step's metadata goes up (upload
 * stream) while this one computes, and this one's results come down
 * (download stream) while the next computes: the compute stream runs step
 * after step with nothing between them. Five copies a step on the compute
 * stream (metadata in, four outputs out) cost batch 1 0.789 ms against 0.770
 * on the H200 (bench/results/2026-12-01-cuda-round19.md). */
struct inflight {
    cudaEvent_t uploaded;   /* upload stream: the metadata is on the device */
    cudaEvent_t computed;   /* compute stream: the step's kernels are done */
    cudaEvent_t done;       /* download stream: the results are on the host */
    unsigned char *staging; /* pinned: the step's buffer (struct step_layout) */
    unsigned char *d_step;  /* the same on the device */
    int32_t *h_tokens;      /* the outputs in staging */
    float *h_logprobs;
    int32_t *h_top_ids;
    float *h_top_logprobs;
    int num_seqs;
    int num_attn_tiles; /* prefill attention tiles of the step; -1: decode-only step */
    int *seq_row;       /* [max_seqs]: sampling row of each sequence, -1 if none */
    int num_sample_rows;
    bool logits_on_device; /* the rows live in d_logits until a later step */
    float *d_logits_keep;  /* FOLIO_CUDA_KEEP_LOGITS: a copy that outlives the next launch */
    bool logits_kept;
};

/* A bucket's decode graph, one per in-flight slot (each reads and writes its
 * slot's step buffer). */
struct graph_entry {
    int bucket;
    bool captured[MAX_INFLIGHT];
    cudaGraphExec_t exec[MAX_INFLIGHT];
};

struct cuda_backend {
    struct folio_backend base;
    bool failed;

    /* model shape */
    int hidden, inter, layers, heads, kv_heads, head_dim, vocab, qkv_dim;
    float eps;

    cudaStream_t stream;           /* compute: every kernel */
    cudaStream_t upload, download; /* the step buffers' copies in and out */
    cublasLtHandle_t lt;
    void *workspace;
    struct gemm_plan *plans;
    int num_plans;

    /* weights */
    bf16 *embed, *final_norm, *lm_head;
    struct cuda_layer *lw;
    float *inv_freq;
    uint32_t *rope_cos_sin; /* folio_k_rope_table: [max context][head_dim / 2] */
    void *weight_blocks[8]; /* allocations to free */
    int num_weight_blocks;

    /* KV pool: [layer][K|V][block][kv_head][16][head_dim] */
    bf16 *kv_pool;
    size_t kv_layer_stride; /* elements of one layer's K (or V) */

    /* activations, [max_num_tokens, ...] */
    bf16 *res, *res2, *normed, *qkv, *attn_out, *proj_out, *gate_up, *act, *final_h;
    float *d_logits;         /* [max_seqs, vocab] */
    int32_t *d_last_sampled; /* [max_seqs], by slot */
    unsigned char *d_meta;   /* the step being queued: its slot's d_step */
    int block_stride;        /* block-table entries per sequence */
    /* Penalties (folio_k_penalty_update): per slot, a state word per token
     * [max_seqs, vocab], the tokens by position [max_seqs, pen_max_ctx], and
     * a rebuild flag [max_seqs]. */
    uint32_t *d_pen_state;
    /* folio_k_sample_split's workspace (the rows that need no filter, penalty
     * or top-N logprobs, sampled over several CTAs a row at up to 8 rows,
     * by folio_k_sample_rows above that); NULL: every row in sample.cu's
     * kernel (FOLIO_SAMPLE_SPLIT=0, the yardstick that check_cuda.py holds
     * both samplers' tokens to). */
    void *d_sample_split;
    int32_t *d_pen_history;
    int32_t *d_pen_rebuild;
    struct folio_cuda_bias bias; /* the logit bias of the step being queued */
    int pen_max_ctx;

    struct inflight fl[MAX_INFLIGHT];
    int fl_head, fl_count;

    /* attention: tensor-core kernels unless the shape needs the reference one */
    int attn_tile_tokens; /* query tokens per prefill tile; 0: reference kernel */
    int num_sms;
    void *attn_workspace; /* split-KV partials of the decode kernel */
    size_t attn_workspace_bytes;
    int *attn_counters; /* its per-(token, KV head) counters, zero between launches */
    int gemv_max_rows;  /* GEMMs of at most this many rows run as folio_k_gemv */
    /* Programmatic dependent launch for the kernels that support it (FOLIO_PDL=0: off). */
    int pdl;
    bool pdl_step; /* this step's kernels use it (set by forward) */
    /* On the TMA path, the kernels after each TMA GEMM (which lets its
     * dependents launch early) are launched with PDL: add_rmsnorm, RoPE and
     * attention (FOLIO_PDL_NORM=0: not). */
    bool pdl_norm;
    int gemv_split_k; /* FOLIO_GEMV_SPLITK (1, 2, 4, 8; default 0: from k) */
    int gemv_persist; /* FOLIO_GEMV_PERSIST=0: one GEMV CTA per column group (a yardstick) */
    /* The GEMV path's QKV projection rotates q and k and writes the caches in its
     * epilogue; FOLIO_QKV_ROPE=0: apart (rope_kv_write). */
    bool qkv_rope;
    /* Steps off the GEMV path gather the embeddings inside the first norm
     * (folio_k_embed_rmsnorm; batch 64 1.204 ms against 1.209 on the H200);
     * FOLIO_EMBED_NORM=0: apart. */
    bool embed_norm;
    /* Decode-only steps on the cuBLASLt path rotate q and write the new K/V in
     * the attention kernel (rope_cos_sin); FOLIO_ROPE_IN_ATTENTION=0: in
     * rope_kv_write before it. */
    bool rope_in_attention;
    /* Decode-only steps that rotate in attention (65-256 rows) run no norm
     * kernels: the QKV and gate/up GEMMs read the residual itself (their
     * weights hold the norms' weights), attention and silu_mul scale what they
     * read by each token's 1 / rms, and the O and down GEMMs add into the
     * residual (beta 1). FOLIO_NORM_IN_CONSUMERS=0: the norm kernels. */
    bool norm_in_consumers;
    /* K slices of the O and down projections on the cuBLASLt path (splitk_slices):
     * FOLIO_SPLITK_O / FOLIO_SPLITK_DOWN (1: off, 2, 4, 8; 0: the default rule). The
     * partial sums [S][m][hidden] in f32, summed by the add_rmsnorm that reads them. */
    int splitk_o, splitk_down;
    float *splitk_partials;
    /* The TMA + wgmma GEMM (folio_k_gemm_tma) for the projections of steps of
     * gemv_max_rows < m <= FOLIO_K_TMA_MAX_ROWS rows (FOLIO_TMA_GEMM=0:
     * cuBLASLt, a yardstick): QKV, O, gate/up with SiLU*mul in its epilogue
     * and down. The tensor maps of each layer's four weights and of the
     * activations they read (64 rows: rows past m are read, never written
     * back; zero-filling them made TMA slower). O and down write TMA_SLICES
     * f32 K slices for the next add_rmsnorm (2 slices made batch 64 1.430 ms
     * against 1.357, 8 slices 1.334 against 1.286; down takes 8 at up to
     * TMA_SMALL_ROWS rows), QKV for the RoPE kernel.
     * The path pays from 3 rows since the kernels after each TMA GEMM launch
     * early (PDL): batch 8 1.073 ms against 1.130 on cuBLASLt, batch 4 1.064
     * against 1.104 (bench/results/2026-11-30-cuda-round12.md). */
    bool tma;
    struct folio_k_tmap *tmaps; /* [layers][TMA_WEIGHTS], then [TMA_XS] */
    int tma_split_o, tma_split_down;
    int tma_split_down_small; /* down's K slices at up to TMA_SMALL_ROWS rows */
    /* The LM head on the TMA GEMM too (f32 logits), launched with PDL after the
     * final norm and launching the sampler early (batch 64 1.202 ms against
     * 1.206 on the H200; 3.83 TB/s of its weights); FOLIO_TMA_LM_HEAD=0: cuBLASLt. */
    bool tma_lm_head;
    int tma_split_qkv; /* QKV's K slices on the TMA path */
    /* Decode attention splits the keys until about this many warps per SM run,
     * one more once it splits them at all (folio_k_attention_decode_plan):
     * FOLIO_ATTN_WARPS_PER_SM (default FOLIO_K_ATTN_WARPS_PER_SM). */
    int attn_warps_per_sm;
    /* FOLIO_ATTN_CTA_WARPS: 1 or 4 forces the decode kernel's warps per CTA
     * (see folio_k_attention_decode_plan; 0: by batch). A yardstick. */
    int attn_cta_warps;
    /* Dead intermediate buffers dropped from the L2 without write-back
     * (l2_discard), bits (L2_DROP_*); FOLIO_L2_DISCARD=0 keeps them all, the
     * yardstick. */
    int l2_drop;

    bool graphs_enabled;
    bool keep_logits; /* tests that pipeline steps and still read logits */
    struct graph_entry graphs[NUM_GRAPH_BUCKETS];
    int num_graphs;
};

static size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

static void layout_for(int t_rows, int s_rows, int stride, struct step_layout *l)
{
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
    o = align_up(o + sizeof(int32_t) * s_rows, 16);
    l->params = o;
    o = align_up(o + sizeof(struct folio_k_sample_params) * s_rows, 16);
    l->tables = o;
    o = align_up(o + sizeof(int32_t) * (size_t)s_rows * stride, 16);
    l->attn_tiles = o; /* at most one prefill tile per token */
    o = align_up(o + sizeof(int32_t) * 2 * (size_t)t_rows, 16);
    l->pen_seqs = o;
    o = align_up(o + sizeof(struct folio_k_penalty_seq) * s_rows, 16);
    l->inputs = o;
    l->out_tokens = o;
    o = align_up(o + sizeof(int32_t) * s_rows, 16);
    l->out_logprobs = o;
    o = align_up(o + sizeof(float) * s_rows, 16);
    l->out_top_ids = o;
    o = align_up(o + sizeof(int32_t) * (size_t)s_rows * FOLIO_MAX_LOGPROBS, 16);
    l->out_top_logprobs = o;
    o = align_up(o + sizeof(float) * (size_t)s_rows * FOLIO_MAX_LOGPROBS, 16);
    l->total = o;
}

/* ---------------------------------------------------------------- GEMM */

/* Token counts vary from step to step, so new GEMM shapes keep coming: the
 * table starts over when it is 3/4 full instead of failing (one heuristic
 * query costs tens of microseconds; the shapes in use come back at once).
 * Matmuls already queued or captured in graphs do not need the descriptors. */
static void gemm_plans_clear(struct cuda_backend *cb)
{
    for (int i = 0; i < GEMM_CACHE_SIZE; i++) {
        struct gemm_plan *p = &cb->plans[i];
        if (!p->used)
            continue;
        cublasLtMatrixLayoutDestroy(p->a);
        cublasLtMatrixLayoutDestroy(p->b);
        cublasLtMatrixLayoutDestroy(p->c);
        cublasLtMatmulDescDestroy(p->desc);
        p->used = false;
    }
    cb->num_plans = 0;
}

/* A strided batch of `count` matrices, `stride` elements apart. */
static cublasStatus_t layout_batch(cublasLtMatrixLayout_t l, int32_t count, int64_t stride)
{
    cublasStatus_t st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                         &count, sizeof(count));
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &stride, sizeof(stride));
    return st;
}

/* The heuristic's first choice for plan p. A split-K plan (splits > 1) asks for
 * algorithms without a reduction of their own (a split of the split would add
 * the reduce kernel this one avoids), and falls back to any algorithm if there
 * is none; it also declares its slices' alignment (the default assumes 256 bytes). */
static cublasStatus_t gemm_heuristic(struct cuda_backend *cb, struct gemm_plan *p, int *found,
                                     cublasLtMatmulHeuristicResult_t *res)
{
    *found = 0;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    for (int attempt = 0; attempt < 2 && *found < 1 && st == CUBLAS_STATUS_SUCCESS; attempt++) {
        if (attempt == 1 && p->splits <= 1)
            break;
        cublasLtMatmulPreference_t pref;
        st = cublasLtMatmulPreferenceCreate(&pref);
        if (st != CUBLAS_STATUS_SUCCESS)
            break;
        size_t ws = WORKSPACE_BYTES;
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof(ws));
        if (p->splits > 1) {
            const cublasLtMatmulPreferenceAttributes_t aligns[] = {
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
            uint32_t align = p->align;
            for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
                st = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof(align));
            uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
            if (attempt == 0 && st == CUBLAS_STATUS_SUCCESS)
                st = cublasLtMatmulPreferenceSetAttribute(
                    pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_reduction,
                    sizeof(no_reduction));
        }
        if (st == CUBLAS_STATUS_SUCCESS)
            st = cublasLtMatmulAlgoGetHeuristic(cb->lt, p->desc, p->a, p->b, p->c, p->c, pref, 1,
                                                res, found);
        cublasLtMatmulPreferenceDestroy(pref);
        /* Nothing under the filters may come back as NOT_SUPPORTED: try without. */
        if (attempt == 0 && p->splits > 1 && st == CUBLAS_STATUS_NOT_SUPPORTED) {
            st = CUBLAS_STATUS_SUCCESS;
            *found = 0;
        }
    }
    return st;
}

/* At 65-128 rows (the decode graphs' 128-row bucket on the cuBLASLt path)
 * the heuristic's kernel runs faster in clusters of one CTA with custom option
 * 0 (O and down there are split-K partials, splits 2). On the H200, with all
 * five projections so, b128 steps took 1.5010 ms against 1.5236 (O and down
 * alone: 1.5088; in another call 1.4999 against 1.5183; as landed 1.5007
 * against 1.5287, and b96 1.4365 against 1.4633), the same tokens. At
 * 256 rows neither this nor any other cluster shape or custom option tried
 * was faster. Eager steps of 65-128 rows (prefill chunks among decodes) take
 * it too: GuideLLM's poisson 128, whose steps are mostly such, ran as before
 * (bench/results/2026-12-02-cuda-round30.md). Kept only where cuBLASLt accepts
 * it (the LM head's kernel does not). */
static void plan_single_cta_clusters(struct cuda_backend *cb, struct gemm_plan *p)
{
    cublasLtMatmulAlgo_t a = p->algo;
    const uint32_t custom = 0;
    const uint16_t cluster = CUBLASLT_CLUSTER_SHAPE_1x1x1;
    cublasLtMatmulHeuristicResult_t r;
    if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom,
                                             sizeof(custom)) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                             sizeof(cluster)) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoCheck(cb->lt, p->desc, p->a, p->b, p->c, p->c, &a, &r) ==
            CUBLAS_STATUS_SUCCESS &&
        r.workspaceSize <= WORKSPACE_BYTES)
        p->algo = a;
}

/* The heuristic's first choice for the shape, asked once and cached. (Timing its
 * candidates at first use gained at most 1.3% per decode step on the H200 and
 * stalled the stream for tens of milliseconds whenever a new batch size came.) */
static int gemm_plan_get(struct cuda_backend *cb, int m, int n, int k, bool out_f32, int splits,
                         unsigned align, struct gemm_plan **out, char *err, size_t errlen)
{
    if (cb->num_plans >= GEMM_CACHE_SIZE * 3 / 4)
        gemm_plans_clear(cb);
    uint64_t h = ((uint64_t)m * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)n * 0xbf58476d1ce4e5b9ull) ^
                 ((uint64_t)k * 0x94d049bb133111ebull) ^ (uint64_t)out_f32 ^
                 ((uint64_t)splits << 1) ^ ((uint64_t)align << 5);
    h ^= h >> 29;
    for (int probe = 0; probe < GEMM_CACHE_SIZE; probe++) {
        struct gemm_plan *p = &cb->plans[(h + probe) & (GEMM_CACHE_SIZE - 1)];
        if (p->used && p->m == m && p->n == n && p->k == k && p->out_f32 == out_f32 &&
            p->splits == splits && p->align == align) {
            *out = p;
            return 0;
        }
        if (p->used)
            continue;
        /* A new shape: describe it and ask the heuristic once. */
        cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        cudaDataType_t ct = out_f32 ? CUDA_R_32F : CUDA_R_16BF;
        CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
        CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
        /* Column-major view: w is K x N (op T gives N x K), x is K x M, y is N x M.
         * Split: slice s of w and x starts k/splits elements after slice s-1 (the
         * same leading dimension k), partial s is M x N after partial s-1. */
        int ks = k / splits;
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, ks, n, k));
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, ks, m, k));
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, ct, n, m, n));
        if (splits > 1) {
            CUBLAS_CHECK(layout_batch(p->a, splits, ks));
            CUBLAS_CHECK(layout_batch(p->b, splits, ks));
            CUBLAS_CHECK(layout_batch(p->c, splits, (int64_t)m * n));
        }
        p->m = m;
        p->n = n;
        p->k = k;
        p->out_f32 = out_f32;
        p->splits = splits;
        p->align = align;
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        CUBLAS_CHECK(gemm_heuristic(cb, p, &found, &res));
        if (found < 1) {
            snprintf(err, errlen,
                     "cuda backend: cuBLASLt has no algorithm for %dx%dx%d (%d splits)", m, n, k,
                     splits);
            return -1;
        }
        p->algo = res.algo;
        if (m > 64 && m <= 128)
            plan_single_cta_clusters(cb, p);
        p->used = true;
        cb->num_plans++;
        *out = p;
        return 0;
    }
    snprintf(err, errlen, "cuda backend: GEMM plan cache full (%d shapes)", GEMM_CACHE_SIZE);
    return -1;
}

/* Folio's GEMV for a few rows, optionally with the residual add + RMSNorm in front. */
static cudaError_t gemv(struct cuda_backend *cb, void *y, const bf16 *x, const bf16 *add,
                        const bf16 *norm_w, const int32_t *rows, bf16 *res_out, const bf16 *w,
                        int m, int n, int k, bool out_f32, bool gate_up_silu)
{
    struct folio_k_gemv_opts o = {cb->gemv_split_k, cb->pdl_step, cb->gemv_persist};
    return folio_k_gemv(y, x, add, norm_w, cb->eps, rows, res_out, w, m, n, k, out_f32,
                        gate_up_silu, o, cb->stream);
}

/* y[m, n] = x[m, k] * w[n, k]^T + beta * y[m, n] on cuBLASLt, bf16 in, f32
 * accumulate, bf16 or f32 out. beta 1 (bf16 y, the sum rounded once): the O
 * and down projections adding into the residual when no norm kernel follows
 * them (norm_in_consumers). */
static int gemm_lt(struct cuda_backend *cb, const bf16 *x, const bf16 *w, void *y, int m, int n,
                   int k, bool out_f32, float beta, char *err, size_t errlen)
{
    struct gemm_plan *p;
    if (gemm_plan_get(cb, m, n, k, out_f32, 1, 0, &p, err, errlen) != 0)
        return -1;
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasLtMatmul(cb->lt, p->desc, &alpha, w, p->a, x, p->b, &beta, y, p->c, y, p->c,
                                &p->algo, cb->workspace, WORKSPACE_BYTES, cb->stream));
    return 0;
}

/* y[m, n] = x[m, k] * w[n, k]^T, bf16 in, f32 accumulate, bf16 or f32 out.
 * A few rows (small-batch decode) go through Folio's GEMV, which streams the
 * weights near the bandwidth where cuBLASLt pays ~5 us per call. */
static int gemm(struct cuda_backend *cb, const bf16 *x, const bf16 *w, void *y, int m, int n, int k,
                bool out_f32, char *err, size_t errlen)
{
    if (m <= 0)
        return 0;
    if (m <= cb->gemv_max_rows) {
        CUDA_CHECK(gemv(cb, y, x, NULL, NULL, NULL, NULL, w, m, n, k, out_f32, false));
        return 0;
    }
    return gemm_lt(cb, x, w, y, m, n, k, out_f32, 0.0f, err, errlen);
}

/* The largest power of two (at most 256) that divides v: the byte alignment of
 * pointers and strides that cuBLASLt's heuristic is told. */
static unsigned byte_alignment(uintptr_t v)
{
    unsigned a = 1;
    while (a < 256 && !(v & a))
        a <<= 1;
    return a;
}

/* partials[s][m][n] = x[m, slice s of k] * w[n, slice s of k]^T in f32, s in
 * 0..splits-1 (k / splits a multiple of 8): one strided-batched cuBLASLt matmul,
 * its plan cached per (m, n, k, splits). The sum is left to the reader
 * (folio_k_add_rmsnorm_partials). */
static int gemm_splitk(struct cuda_backend *cb, const bf16 *x, const bf16 *w, float *partials,
                       int m, int n, int k, int splits, char *err, size_t errlen)
{
    int ks = k / splits;
    unsigned align =
        byte_alignment((uintptr_t)x | (uintptr_t)w | (uintptr_t)partials |
                       (uintptr_t)(sizeof(bf16) * ks) | (uintptr_t)(sizeof(float) * (size_t)m * n));
    struct gemm_plan *p;
    if (gemm_plan_get(cb, m, n, k, true, splits, align, &p, err, errlen) != 0)
        return -1;
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(cb->lt, p->desc, &alpha, w, p->a, x, p->b, &beta, partials, p->c,
                                partials, p->c, &p->algo, cb->workspace, WORKSPACE_BYTES,
                                cb->stream));
    return 0;
}

/* ---------------------------------------------------------------- forward */

static int graph_bucket(int n)
{
    int b = 1;
    while (b < n)
        b <<= 1;
    return b;
}

/* The decode kernel's plan for a decode step of n rows: from the graph
 * bucket, so an eager step splits as its graph would. */
static struct folio_k_decode_plan decode_plan(const struct cuda_backend *cb, int n)
{
    /* One-warp CTAs and the combine kernel on the GEMV path (pdl_step, as
     * forward sets it); TMA steps keep their plan whether or not attention is
     * launched with PDL there. */
    bool pdl = cb->pdl && graph_bucket(n) <= cb->gemv_max_rows;
    return folio_k_attention_decode_plan(graph_bucket(n), cb->kv_heads, cb->head_dim, cb->num_sms,
                                         cb->attn_warps_per_sm, cb->attn_cta_warps, pdl);
}

/* K slices for a projection y[m, n] = x[m, k] * w[n, k]^T on the cuBLASLt path
 * whose output only the next add_rmsnorm reads (O and down); 1: no split.
 * forced: FOLIO_SPLITK_O / FOLIO_SPLITK_DOWN, used as given for every m up to
 * SPLITK_MAX_ROWS (1 if k / forced is not a whole multiple of 8). Prefill-sized
 * m (above SPLITK_MAX_ROWS) never splits.
 * Default, from the graph bucket of m (an eager step splits as its graph
 * would, so the two give the same bits): 2 slices up to 128 rows, none above.
 * Measured on the H200 (TinyLlama shape, bench/results/2026-11-29-cuda-round9.md):
 * 2 beat 1 and 4 at batch 64 and 128 (1.443 / 1.461 / 1.513 ms at 64) and tied
 * 4 at batch 8; at batch 256 any split lost (cuBLASLt's tiles already fill the
 * chip: 2.456 unsplit vs 2.499 with 2). */
static int splitk_slices(int forced, int m, int k)
{
    if (m > SPLITK_MAX_ROWS)
        return 1;
    int s = forced > 0 ? forced : graph_bucket(m) <= 128 ? 2 : 1;
    return k % s == 0 && (k / s) % 8 == 0 ? s : 1;
}

/* The TMA GEMM's tensor maps: the weights of layer li, and the activations. */
enum { TMA_QKV, TMA_O, TMA_GATE_UP, TMA_DOWN, TMA_WEIGHTS };
#define TMA_SLICES 4
/* Steps of up to TMA_SMALL_ROWS rows run the down projection (whose k, 5632
 * in TinyLlama, is 2.75 times the others') in TMA_SLICES_SMALL K slices: twice
 * the CTAs, all resident, twice the weight bytes in flight, while the
 * partials the next add_rmsnorm reads are still few. On the H200 (round 16)
 * 8 slices made batch 4 0.993 ms against 1.037 and batch 8 0.982 against
 * 1.002; batch 16 1.070 against 1.072 (even, so it keeps 4). 8 slices at
 * every batch made batch 32 1.181 against 1.169, batch 64 1.270 against 1.239. */
#define TMA_SLICES_SMALL 8
#define TMA_SMALL_ROWS 8
enum { TMA_X_NORMED, TMA_X_ATTN_OUT, TMA_X_ACT, TMA_X_FINAL, TMA_XS };

static const struct folio_k_tmap *tma_wmap(const struct cuda_backend *cb, int li, int which)
{
    return &cb->tmaps[li * TMA_WEIGHTS + which];
}

static const struct folio_k_tmap *tma_xmap(const struct cuda_backend *cb, int which)
{
    return &cb->tmaps[cb->layers * TMA_WEIGHTS + which];
}

/* The LM head's map, after the activations' (cb->tma_lm_head). */
static const struct folio_k_tmap *tma_lm_head_map(const struct cuda_backend *cb)
{
    return &cb->tmaps[cb->layers * TMA_WEIGHTS + TMA_XS];
}

/* Whether a step of m rows runs its projections as folio_k_gemm_tma. */
static bool use_tma(const struct cuda_backend *cb, int m)
{
    return cb->tma && m > cb->gemv_max_rows && m <= FOLIO_K_TMA_MAX_ROWS;
}

/* The most K slices, up to want, that k takes (whole 64-wide stages each). */
static int tma_slices(int k, int want)
{
    int s = want;
    while (s > 1 && k % (s * 64) != 0)
        s /= 2;
    return s;
}

/* Encodes the tensor maps (create, after the weights and activations are on
 * the GPU). The TMA path stays off when the shapes or the driver do not
 * allow it: every k a multiple of 64, every n of FOLIO_K_TMA_NT. */
static void tma_setup(struct cuda_backend *cb, size_t max_rows, size_t max_seqs)
{
    int H = cb->hidden, QD = cb->heads * cb->head_dim, I = cb->inter;
    if (!cb->tma || H % FOLIO_K_TMA_NT != 0 || QD % 64 != 0 || I % FOLIO_K_TMA_NT != 0 ||
        cb->qkv_dim % FOLIO_K_TMA_NT != 0) {
        cb->tma = false;
        return;
    }
    size_t n = (size_t)cb->layers * TMA_WEIGHTS + TMA_XS + 1;
    cb->tmaps = aligned_alloc(64, sizeof(struct folio_k_tmap) * n);
    if (!cb->tmaps) {
        cb->tma = false;
        return;
    }
    int bad = 0;
    for (int li = 0; li < cb->layers; li++) {
        const struct cuda_layer *L = &cb->lw[li];
        struct folio_k_tmap *w = &cb->tmaps[li * TMA_WEIGHTS];
        bad |= folio_k_tmap_encode(&w[TMA_QKV], L->wqkv, cb->qkv_dim, H, FOLIO_K_TMA_NT);
        bad |= folio_k_tmap_encode(&w[TMA_O], L->wo, H, QD, FOLIO_K_TMA_NT);
        bad |= folio_k_tmap_encode(&w[TMA_GATE_UP], L->w_gate_up, 2 * I, H, FOLIO_K_TMA_NT / 2);
        bad |= folio_k_tmap_encode(&w[TMA_DOWN], L->w_down, H, I, FOLIO_K_TMA_NT);
    }
    const bf16 *xs[TMA_XS] = {cb->normed, cb->attn_out, cb->act, cb->final_h};
    const int ks[TMA_XS] = {H, QD, I, H};
    const size_t xrows[TMA_XS] = {max_rows, max_rows, max_rows, max_seqs};
    for (int x = 0; x < TMA_XS; x++) {
        int rows = xrows[x] < FOLIO_K_TMA_MAX_ROWS ? (int)xrows[x] : FOLIO_K_TMA_MAX_ROWS;
        bad |= folio_k_tmap_encode(&cb->tmaps[cb->layers * TMA_WEIGHTS + x], xs[x], rows, ks[x],
                                   FOLIO_K_TMA_MAX_ROWS);
    }
    /* The LM head too, where its rows fill whole CTAs. */
    cb->tma_lm_head = cb->tma_lm_head && cb->vocab % FOLIO_K_TMA_NT == 0 &&
                      folio_k_tmap_encode(&cb->tmaps[cb->layers * TMA_WEIGHTS + TMA_XS],
                                          cb->lm_head, cb->vocab, H, FOLIO_K_TMA_NT) == 0;
    if (bad) {
        free(cb->tmaps);
        cb->tmaps = NULL;
        cb->tma = false;
        return;
    }
    cb->tma_split_qkv = tma_slices(H, TMA_SLICES);
    cb->tma_split_o = tma_slices(QD, TMA_SLICES);
    cb->tma_split_down = tma_slices(I, TMA_SLICES);
    cb->tma_split_down_small = tma_slices(I, TMA_SLICES_SMALL);
}

/* The O or down projection: into proj_out as any GEMM (splits 1), or as
 * `splits` f32 partials that the next add_rmsnorm sums. */
static int project(struct cuda_backend *cb, const bf16 *x, const bf16 *w, int m, int k, int splits,
                   char *err, size_t errlen)
{
    if (splits <= 1)
        return gemm(cb, x, w, cb->proj_out, m, cb->hidden, k, false, err, errlen);
    return gemm_splitk(cb, x, w, cb->splitk_partials, m, cb->hidden, k, splits, err, errlen);
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
        CUDA_CHECK(folio_k_attention_decode(cb->attn_out, cb->qkv, kc, vc, *kb,
                                            decode_plan(cb, kb->num_tokens), cb->attn_workspace,
                                            cb->attn_counters, cb->heads, cb->kv_heads,
                                            cb->head_dim, rope_cos_sin, norm, drop, pdl, s));
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
static int forward(struct cuda_backend *cb, const struct step_layout *l, int t_rows, int s_rows,
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
    int split_o = fuse_norm ? 1 : splitk_slices(cb->splitk_o, t_rows, qd);
    int split_down = fuse_norm ? 1 : splitk_slices(cb->splitk_down, t_rows, cb->inter);
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
                CUDA_CHECK(gemv(cb, cb->qkv, cur, add, L->attn_norm, NULL, next, L->wqkv, t_rows,
                                cb->qkv_dim, cb->hidden, false, false));
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
                    tma_xmap(cb, TMA_X_NORMED), tma_wmap(cb, li, TMA_QKV),
                    split_qkv > 1 ? (void *)cb->splitk_partials : (void *)cb->qkv, t_rows,
                    cb->qkv_dim, cb->hidden, split_qkv, FOLIO_K_TMA_BF16, cb->pdl, s));
            } else if (gemm(cb, norm_in_consumers ? cur : cb->normed, L->wqkv, cb->qkv, t_rows,
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
            CUDA_CHECK(folio_k_gemm_tma(tma_xmap(cb, TMA_X_ATTN_OUT), tma_wmap(cb, li, TMA_O),
                                        tma_o_out, t_rows, cb->hidden, qd, split_o,
                                        FOLIO_K_TMA_BF16, cb->pdl, s));
        else if (norm_in_consumers) {
            if (gemm_lt(cb, cb->attn_out, L->wo, cur, t_rows, cb->hidden, qd, false, 1.0f, err,
                        errlen) != 0)
                return -1;
        } else if (project(cb, cb->attn_out, L->wo, t_rows, qd, split_o, err, errlen) != 0)
            return -1;
        if (fuse_norm) { /* RMSNorm + gate/up + SiLU*mul in one launch */
            bf16 *next = cur == cb->res ? cb->res2 : cb->res;
            CUDA_CHECK(gemv(cb, cb->act, cur, cb->proj_out, L->mlp_norm, NULL, next, L->w_gate_up,
                            t_rows, cb->inter, cb->hidden, false, true));
            cur = next;
        } else {
            if (!norm_in_consumers)
                CUDA_CHECK(add_rmsnorm(cb, cb->normed, cur, split_o, L->mlp_norm, NULL, t_rows,
                                       t_rows, pdl_tma, drops, L2_DROP_ATTN_OUT, cb->attn_out,
                                       (int64_t)sizeof(bf16) * t_rows * qd));
            if (tma) { /* SiLU*mul in the GEMM's epilogue */
                CUDA_CHECK(folio_k_gemm_tma(tma_xmap(cb, TMA_X_NORMED),
                                            tma_wmap(cb, li, TMA_GATE_UP), cb->act, t_rows,
                                            cb->inter, cb->hidden, 1, FOLIO_K_TMA_GLU, cb->pdl, s));
            } else {
                if (gemm(cb, norm_in_consumers ? cur : cb->normed, L->w_gate_up, cb->gate_up,
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
            CUDA_CHECK(folio_k_gemm_tma(tma_xmap(cb, TMA_X_ACT), tma_wmap(cb, li, TMA_DOWN),
                                        tma_down_out, t_rows, cb->hidden, cb->inter, split_down,
                                        FOLIO_K_TMA_BF16, cb->pdl, s));
        else if (norm_in_consumers) {
            if (gemm_lt(cb, cb->act, L->w_down, cur, t_rows, cb->hidden, cb->inter, false, 1.0f,
                        err, errlen) != 0)
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
        CUDA_CHECK(gemv(cb, cb->d_logits, cur, cb->proj_out, cb->final_norm, sample_rows, NULL,
                        cb->lm_head, n_sample, cb->vocab, cb->hidden, true, false));
    } else {
        CUDA_CHECK(add_rmsnorm(cb, cb->final_h, cur, pending_add, cb->final_norm, sample_rows,
                               n_sample, t_rows, pdl_tma, drops, L2_DROP_ACT, cb->act, act_bytes));
        if (lm_tma)
            CUDA_CHECK(folio_k_gemm_tma(tma_xmap(cb, TMA_X_FINAL), tma_lm_head_map(cb),
                                        cb->d_logits, n_sample, cb->vocab, cb->hidden, 1,
                                        FOLIO_K_TMA_F32, cb->pdl, s));
        else if (gemm(cb, cb->final_h, cb->lm_head, cb->d_logits, n_sample, cb->vocab, cb->hidden,
                      true, err, errlen) != 0)
            return -1;
    }
    CUDA_CHECK(folio_cuda_bias_apply(&cb->bias, cb->d_logits, cb->vocab, s));
    CUDA_CHECK(folio_k_sample(
        cb->d_logits, n_sample, cb->vocab, params, (int32_t *)(cb->d_meta + l->out_tokens),
        (float *)(cb->d_meta + l->out_logprobs), (int32_t *)(cb->d_meta + l->out_top_ids),
        (float *)(cb->d_meta + l->out_top_logprobs), FOLIO_MAX_LOGPROBS, cb->d_last_sampled,
        cb->d_pen_state, cb->d_sample_split, (cb->l2_drop & L2_DROP_LOGITS) != 0,
        cb->pdl_step || (lm_tma && pdl_tma), s));
    return 0;
}

/* Replays the decode graph of one bucket for in-flight slot `slot` (cb->d_meta
 * is that slot's buffer): the bucket's first call runs the step eagerly, the
 * first call of each slot after that captures it (capture_decode_graphs makes
 * these calls for every bucket at start-up). */
static int run_decode_graph(struct cuda_backend *cb, int bucket, int slot,
                            const struct step_layout *l, char *err, size_t errlen)
{
    struct graph_entry *g = NULL;
    for (int i = 0; i < cb->num_graphs; i++)
        if (cb->graphs[i].bucket == bucket)
            g = &cb->graphs[i];
    if (!g) {
        if (cb->num_graphs == NUM_GRAPH_BUCKETS) {
            snprintf(err, errlen, "cuda backend: too many graph buckets");
            return -1;
        }
        /* The first step of a bucket runs eagerly with the same padded shapes:
         * modules load, cuBLASLt picks its algorithms, and nothing of that
         * happens inside the capture. */
        g = &cb->graphs[cb->num_graphs++];
        g->bucket = bucket;
        for (int i = 0; i < MAX_INFLIGHT; i++)
            g->captured[i] = false;
        return forward(cb, l, bucket, bucket, bucket, -1, err, errlen);
    }
    if (!g->captured[slot]) {
        cudaGraph_t graph;
        CUDA_CHECK(cudaStreamBeginCapture(cb->stream, cudaStreamCaptureModeThreadLocal));
        int rc = forward(cb, l, bucket, bucket, bucket, -1, err, errlen);
        cudaError_t e = cudaStreamEndCapture(cb->stream, &graph);
        if (rc != 0)
            return -1;
        if (e != cudaSuccess) {
            snprintf(err, errlen, "cuda backend: capturing the decode graph of batch %d: %s",
                     bucket, cudaGetErrorString(e));
            return -1;
        }
        e = cudaGraphInstantiate(&g->exec[slot], graph, 0);
        cudaGraphDestroy(graph);
        CUDA_CHECK(e);
        g->captured[slot] = true;
    }
    CUDA_CHECK(cudaGraphLaunch(g->exec[slot], cb->stream));
    return 0;
}

/* ---------------------------------------------------------------- steps */

static int validate_batch(const struct cuda_backend *cb, const struct folio_step_batch *batch,
                          char *err, size_t errlen)
{
    const struct folio_backend *b = &cb->base;
    if (batch->num_seqs <= 0 || batch->num_seqs > b->max_seqs) {
        snprintf(err, errlen, "step: num_seqs %d outside 1..%d", batch->num_seqs, b->max_seqs);
        return -1;
    }
    if (batch->num_tokens <= 0 || batch->num_tokens > b->max_num_tokens) {
        snprintf(err, errlen, "step: num_tokens %d outside 1..%d", batch->num_tokens,
                 b->max_num_tokens);
        return -1;
    }
    int sum = 0;
    for (int i = 0; i < batch->num_seqs; i++) {
        const struct folio_step_seq *q = &batch->seqs[i];
        if (q->slot < 0 || q->slot >= b->max_seqs) {
            snprintf(err, errlen, "step: seq %d: slot %d outside 0..%d", i, q->slot,
                     b->max_seqs - 1);
            return -1;
        }
        if (q->num_new_tokens < 1 || q->context_len < q->num_new_tokens) {
            snprintf(err, errlen, "step: seq %d: num_new_tokens %d, context_len %d", i,
                     q->num_new_tokens, q->context_len);
            return -1;
        }
        int need = (q->context_len + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE;
        if (need > cb->block_stride || q->num_blocks < need || !q->block_table) {
            snprintf(err, errlen,
                     "step: seq %d: context_len %d needs %d blocks (has %d, at most %d)", i,
                     q->context_len, need, q->num_blocks, cb->block_stride);
            return -1;
        }
        for (int j = 0; j < need; j++)
            if (q->block_table[j] < 0 || q->block_table[j] >= b->num_kv_blocks) {
                snprintf(err, errlen, "step: seq %d: block_table[%d] = %d outside 0..%d", i, j,
                         q->block_table[j], b->num_kv_blocks - 1);
                return -1;
            }
        if (q->sampling.num_logprobs < 0 || q->sampling.num_logprobs > FOLIO_MAX_LOGPROBS) {
            snprintf(err, errlen, "step: seq %d: num_logprobs %d outside 0..%d", i,
                     q->sampling.num_logprobs, FOLIO_MAX_LOGPROBS);
            return -1;
        }
        sum += q->num_new_tokens;
    }
    if (folio_cuda_bias_check(batch, cb->vocab, err, errlen) != 0)
        return -1;
    if (sum != batch->num_tokens) {
        snprintf(err, errlen, "step: num_tokens %d but the sequences bring %d", batch->num_tokens,
                 sum);
        return -1;
    }
    for (int t = 0; t < batch->num_tokens; t++) {
        int id = batch->token_ids[t];
        if (id != FOLIO_TOKEN_FROM_PREV && (id < 0 || id >= cb->vocab)) {
            snprintf(err, errlen, "step: token_ids[%d] = %d outside 0..%d", t, id, cb->vocab - 1);
            return -1;
        }
    }
    return 0;
}

/* Writes the step's metadata into fl->staging; rows beyond the batch (a graph
 * bucket's padding) read as padding. Returns the number of LM-head rows. */
static int pack_step(struct cuda_backend *cb, const struct folio_step_batch *batch, int t_rows,
                     int s_rows, bool row_per_seq, const struct step_layout *l, struct inflight *fl)
{
    unsigned char *st = fl->staging;
    int32_t *ids = (int32_t *)(st + l->token_ids), *slot = (int32_t *)(st + l->token_slot);
    int32_t *tseq = (int32_t *)(st + l->token_seq), *tpos = (int32_t *)(st + l->token_pos);
    int32_t *ctx = (int32_t *)(st + l->seq_ctx), *srows = (int32_t *)(st + l->sample_rows);
    struct folio_k_sample_params *prm = (struct folio_k_sample_params *)(st + l->params);
    int32_t *tables = (int32_t *)(st + l->tables);

    int32_t *tiles = (int32_t *)(st + l->attn_tiles);
    struct folio_k_penalty_seq *pen = (struct folio_k_penalty_seq *)(st + l->pen_seqs);
    int t = 0, n_sample = 0, n_tiles = 0, per_tile = cb->attn_tile_tokens;
    for (int i = 0; i < batch->num_seqs; i++) {
        const struct folio_step_seq *q = &batch->seqs[i];
        int start = q->context_len - q->num_new_tokens;
        for (int j = 0; per_tile > 0 && j < q->num_new_tokens; j += per_tile, n_tiles++) {
            tiles[2 * n_tiles] = t + j;
            tiles[2 * n_tiles + 1] =
                q->num_new_tokens - j < per_tile ? q->num_new_tokens - j : per_tile;
        }
        for (int j = 0; j < q->num_new_tokens; j++, t++) {
            ids[t] = batch->token_ids[t];
            slot[t] = q->slot;
            tseq[t] = i;
            tpos[t] = start + j;
        }
        ctx[i] = q->context_len;
        const struct folio_sampling_params *sp = &q->sampling;
        bool penalized = sp->repetition_penalty != 1.0f || sp->frequency_penalty != 0.0f ||
                         sp->presence_penalty != 0.0f;
        pen[i] = (struct folio_k_penalty_seq){
            .flags = penalized ? FOLIO_K_PEN_TRACK | (q->sample ? FOLIO_K_PEN_SAMPLES : 0) : 0,
            .slot = q->slot,
            .first_token = t - q->num_new_tokens,
            .num_new = q->num_new_tokens,
            .context_len = q->context_len,
            .output_index = q->output_index,
        };
        int need = (q->context_len + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE;
        memcpy(tables + (size_t)i * cb->block_stride, q->block_table, sizeof(int32_t) * need);
        fl->seq_row[i] = -1;
        int row = row_per_seq ? i : n_sample;
        if (q->sample || row_per_seq) {
            srows[row] = t - 1;
            struct folio_k_sample_params *p = &prm[row];
            memset(p, 0, sizeof(*p));
            p->temperature = q->sampling.temperature;
            p->top_k = q->sampling.top_k;
            p->top_p = q->sampling.top_p;
            p->min_p = q->sampling.min_p;
            p->seed = q->sampling.seed;
            p->output_index = q->output_index;
            p->num_logprobs = q->sampling.num_logprobs;
            p->repetition_penalty = sp->repetition_penalty;
            p->frequency_penalty = sp->frequency_penalty;
            p->presence_penalty = sp->presence_penalty;
            p->slot = q->sample ? q->slot : -1;
            if (q->sample)
                fl->seq_row[i] = row;
            n_sample = row + 1;
        }
    }
    for (; t < t_rows; t++) { /* padding tokens: one per padding sequence */
        ids[t] = 0;
        slot[t] = -1;
        tseq[t] = t < s_rows ? t : 0;
        tpos[t] = -1;
    }
    for (int i = batch->num_seqs; i < s_rows; i++) {
        ctx[i] = 0;
        memset(&pen[i], 0, sizeof(pen[i]));
        memset(tables + (size_t)i * cb->block_stride, 0, sizeof(int32_t) * cb->block_stride);
        if (row_per_seq) {
            srows[i] = 0;
            memset(&prm[i], 0, sizeof(prm[i]));
            prm[i].slot = -1;
            n_sample = i + 1;
        }
    }
    fl->num_attn_tiles = n_tiles;
    return n_sample;
}

static int cuda_launch(struct folio_backend *b, const struct folio_step_batch *batch, char *err,
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
    if (validate_batch(cb, batch, err, errlen) != 0)
        return -1;
    /* An earlier step's logits stay readable only until the next launch,
     * unless FOLIO_CUDA_KEEP_LOGITS asks for a copy (off the hot path). */
    for (int i = 0; i < cb->fl_count; i++) {
        struct inflight *prev = &cb->fl[(cb->fl_head + i) % MAX_INFLIGHT];
        if (prev->logits_on_device && cb->keep_logits && prev->num_sample_rows > 0) {
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
    int bucket = graph_bucket(batch->num_seqs);
    bool use_graph = cb->graphs_enabled && decode_only && bucket <= cb->base.max_seqs &&
                     bucket <= cb->base.max_num_tokens && !folio_cuda_bias_in_batch(batch);
    int t_rows = use_graph ? bucket : batch->num_tokens;
    int s_rows = use_graph ? bucket : batch->num_seqs;
    struct step_layout l;
    layout_for(t_rows, s_rows, cb->block_stride, &l);
    int n_sample = pack_step(cb, batch, t_rows, s_rows, use_graph, &l, fl);
    fl->num_seqs = batch->num_seqs;
    fl->num_sample_rows = n_sample;
    fl->logits_on_device = true;
    fl->logits_kept = false;

    cb->failed = true; /* until the step is queued */
    /* The slot's buffer is free: its last step was collected before this launch. */
    CUDA_CHECK(
        cudaMemcpyAsync(fl->d_step, fl->staging, l.inputs, cudaMemcpyHostToDevice, cb->upload));
    CUDA_CHECK(cudaEventRecord(fl->uploaded, cb->upload));
    CUDA_CHECK(cudaStreamWaitEvent(cb->stream, fl->uploaded, 0));
    cb->d_meta = fl->d_step;
    if (folio_cuda_bias_upload(&cb->bias, batch, fl->seq_row, cb->stream, err, errlen) != 0)
        return -1;
    if (use_graph) {
        if (run_decode_graph(cb, bucket, slot, &l, err, errlen) != 0)
            return -1;
    } else if (forward(cb, &l, t_rows, s_rows, n_sample, decode_only ? -1 : fl->num_attn_tiles, err,
                       errlen) != 0) {
        return -1;
    }
    CUDA_CHECK(cudaEventRecord(fl->computed, cb->stream));
    CUDA_CHECK(cudaStreamWaitEvent(cb->download, fl->computed, 0));
    fl->h_tokens = (int32_t *)(fl->staging + l.out_tokens);
    fl->h_logprobs = (float *)(fl->staging + l.out_logprobs);
    fl->h_top_ids = (int32_t *)(fl->staging + l.out_top_ids);
    fl->h_top_logprobs = (float *)(fl->staging + l.out_top_logprobs);
    if (n_sample > 0)
        CUDA_CHECK(cudaMemcpyAsync(fl->staging + l.inputs, fl->d_step + l.inputs,
                                   l.total - l.inputs, cudaMemcpyDeviceToHost, cb->download));
    CUDA_CHECK(cudaEventRecord(fl->done, cb->download));
    cb->failed = false;
    cb->fl_count++;
    return 0;
}

static int cuda_collect(struct folio_backend *b, struct folio_step_result *res, char *err,
                        size_t errlen)
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
        if (row >= 0 && isnan(fl->h_logprobs[row])) {
            snprintf(err, errlen,
                     "step: seq %d: sampling: the logits are not finite (a NaN, +inf, or all "
                     "-inf)",
                     i);
            return -1;
        }
    }
    int out = 0;
    for (int i = 0; i < fl->num_seqs; i++) {
        int row = fl->seq_row[i];
        if (res->token_ids)
            res->token_ids[i] = row < 0 ? -1 : fl->h_tokens[row];
        if (res->logprobs)
            res->logprobs[i] = row < 0 ? 0.0f : fl->h_logprobs[row];
        for (int n = 0; n < FOLIO_MAX_LOGPROBS; n++) {
            size_t o = (size_t)i * FOLIO_MAX_LOGPROBS + n,
                   ro = (size_t)row * FOLIO_MAX_LOGPROBS + n;
            if (res->top_ids)
                res->top_ids[o] = row < 0 ? -1 : fl->h_top_ids[ro];
            if (res->top_logprobs)
                res->top_logprobs[o] = row < 0 ? -INFINITY : fl->h_top_logprobs[ro];
        }
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
            cb->failed = true;
            /* Stream-ordered: a kept copy is queued behind this step's event. */
            CUDA_CHECK(cudaMemcpyAsync(res->logits + (size_t)out * cb->vocab,
                                       src + (size_t)row * cb->vocab, sizeof(float) * cb->vocab,
                                       cudaMemcpyDeviceToHost, cb->stream));
            CUDA_CHECK(cudaStreamSynchronize(cb->stream));
            cb->failed = false;
            out++;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- setup */

static void cuda_destroy(struct folio_backend *b)
{
    struct cuda_backend *cb = (struct cuda_backend *)b;
    if (!cb)
        return;
    if (cb->stream)
        cudaStreamSynchronize(cb->stream);
    if (cb->download)
        cudaStreamSynchronize(cb->download);
    for (int i = 0; i < cb->num_graphs; i++)
        for (int j = 0; j < MAX_INFLIGHT; j++)
            if (cb->graphs[i].captured[j])
                cudaGraphExecDestroy(cb->graphs[i].exec[j]);
    if (cb->plans) {
        gemm_plans_clear(cb);
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
        cudaFree(fl->d_logits_keep);
    }
    for (int i = 0; i < cb->num_weight_blocks; i++)
        cudaFree(cb->weight_blocks[i]);
    folio_cuda_bias_free(&cb->bias);
    void *bufs[] = {cb->kv_pool,        cb->res,
                    cb->normed,         cb->qkv,
                    cb->attn_out,       cb->proj_out,
                    cb->gate_up,        cb->act,
                    cb->final_h,        cb->d_logits,
                    cb->d_last_sampled, cb->inv_freq,
                    cb->workspace,      cb->attn_workspace,
                    cb->attn_counters,  cb->res2,
                    cb->d_pen_state,    cb->d_pen_history,
                    cb->d_pen_rebuild,  cb->splitk_partials,
                    cb->d_sample_split, cb->rope_cos_sin};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        cudaFree(bufs[i]);
    free(cb->lw);
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
    .destroy = cuda_destroy,
};

static int check_shape(const struct folio_tensor *t, const char *what, int64_t rows, int64_t cols,
                       char *err, size_t errlen)
{
    if (!t) {
        snprintf(err, errlen, "cuda backend: tensor %s missing", what);
        return -1;
    }
    int64_t r = t->ndim >= 1 ? t->shape[0] : 0, c = t->ndim == 2 ? t->shape[1] : 1;
    if (t->ndim < 1 || t->ndim > 2 || r != rows || c != cols) {
        snprintf(err, errlen,
                 "cuda backend: tensor %s (%s) has shape [%lld, %lld], want [%lld, %lld]", t->name,
                 what, (long long)r, (long long)c, (long long)rows, (long long)cols);
        return -1;
    }
    return 0;
}

/* Copies a checkpoint tensor into dst as bf16, through a device staging buffer. */
static int upload(struct cuda_backend *cb, bf16 *dst, const struct folio_tensor *t, void *staging,
                  char *err, size_t errlen)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    /* On the step stream: a plain cudaMemcpy from pageable memory may return before its
     * DMA lands, and the non-blocking stream would not wait for it. */
    CUDA_CHECK(cudaMemcpyAsync(staging, t->data, t->nbytes, cudaMemcpyHostToDevice, cb->stream));
    int code = t->dtype == FOLIO_DTYPE_F32 ? 2 : t->dtype == FOLIO_DTYPE_F16 ? 1 : 0;
    CUDA_CHECK(folio_k_convert_to_bf16(dst, staging, code, n, cb->stream));
    CUDA_CHECK(cudaStreamSynchronize(cb->stream));
    return 0;
}

/* Folds the RMSNorm weight norm_w (hidden) into the columns of w [rows][hidden],
 * then sets norm_w to ones (see struct cuda_layer). */
static int fold_norm(struct cuda_backend *cb, bf16 *w, int rows, bf16 *norm_w, char *err,
                     size_t errlen)
{
    CUDA_CHECK(folio_k_scale_columns(w, rows, cb->hidden, norm_w, cb->stream));
    bf16 *ones = malloc(sizeof(bf16) * cb->hidden);
    if (!ones) {
        snprintf(err, errlen, "cuda backend: out of host memory");
        return -1;
    }
    for (int i = 0; i < cb->hidden; i++)
        ones[i] = 0x3f80; /* 1.0 in bf16 */
    cudaError_t e = cudaMemcpyAsync(norm_w, ones, sizeof(bf16) * cb->hidden, cudaMemcpyHostToDevice,
                                    cb->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cb->stream);
    free(ones);
    CUDA_CHECK(e);
    return 0;
}

static int alloc_weights(struct cuda_backend *cb, void **out, size_t bytes, char *err,
                         size_t errlen)
{
    CUDA_CHECK(cudaMalloc(out, bytes));
    cb->weight_blocks[cb->num_weight_blocks++] = *out;
    return 0;
}

/* inv_freq[i] = theta^(-2i/D), with Llama-3 or linear scaling as Hugging Face
 * computes it (f32 arithmetic). */
static void rope_inv_freq(const struct folio_model_config *c, float *inv)
{
    int half = c->head_dim / 2;
    for (int i = 0; i < half; i++) {
        float expo = (float)(2 * i) / (float)c->head_dim;
        inv[i] = 1.0f / powf(c->rope_theta, expo);
    }
    const struct folio_rope_scaling *s = &c->rope_scaling;
    if (s->type == FOLIO_ROPE_LINEAR && s->factor > 0.0f) {
        for (int i = 0; i < half; i++)
            inv[i] /= s->factor;
    } else if (s->type == FOLIO_ROPE_LLAMA3) {
        float old_ctx = (float)s->original_max_position_embeddings;
        float low_wavelen = old_ctx / s->low_freq_factor;
        float high_wavelen = old_ctx / s->high_freq_factor;
        for (int i = 0; i < half; i++) {
            float wavelen = 2.0f * (float)M_PI / inv[i];
            float f = wavelen > low_wavelen ? inv[i] / s->factor : inv[i];
            if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
                float smooth = (old_ctx / wavelen - s->low_freq_factor) /
                               (s->high_freq_factor - s->low_freq_factor);
                f = (1.0f - smooth) * f / s->factor + smooth * f;
            }
            inv[i] = f;
        }
    }
}

/* A split count from the environment: 1, 2, 4 or 8, else 0 (the default rule). */
static int env_splitk(const char *name)
{
    const char *v = getenv(name);
    int s = v ? atoi(v) : 0;
    return s == 1 || s == 2 || s == 4 || s == 8 ? s : 0;
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
    if (opt->max_seqs <= 0 || opt->max_num_tokens <= 0) {
        snprintf(err, errlen, "cuda backend: max_seqs %d and max_num_tokens %d must be positive",
                 opt->max_seqs, opt->max_num_tokens);
        return -1;
    }
    cb->base.ops = &cuda_ops;
    cb->base.model = m;
    cb->base.max_seqs = opt->max_seqs;
    cb->base.max_num_tokens = opt->max_num_tokens;
    const char *g = getenv("FOLIO_CUDA_GRAPHS");
    cb->graphs_enabled = !(g && strcmp(g, "0") == 0);
    const char *k = getenv("FOLIO_CUDA_KEEP_LOGITS");
    cb->keep_logits = k && strcmp(k, "1") == 0;
    /* FOLIO_ATTENTION=ref: the reference attention kernel everywhere (a yardstick). */
    const char *a = getenv("FOLIO_ATTENTION");
    cb->attn_tile_tokens =
        a && strcmp(a, "ref") == 0
            ? 0
            : folio_k_attention_tile_tokens(cb->heads, cb->kv_heads, cb->head_dim);
    /* FOLIO_GEMV_MAX_ROWS: GEMMs of up to this many rows (0..8) run as GEMVs. Default 2:
     * on the H200 a decode step with the GEMV took 1.18 / 1.28 / 1.42 / 2.11 ms at batch
     * 1 / 2 / 4 / 8 against cuBLASLt's 1.28 / 1.30 / 1.30 / 1.30 (every warp re-reads the m
     * input rows through L1), see bench/results/2026-11-29-cuda-attention-gemv.md. */
    const char *gv = getenv("FOLIO_GEMV_MAX_ROWS");
    cb->gemv_max_rows = gv ? atoi(gv) : 2;
    if (cb->gemv_max_rows < 0 || cb->gemv_max_rows > FOLIO_K_GEMV_MAX_ROWS)
        cb->gemv_max_rows = FOLIO_K_GEMV_MAX_ROWS;
    const char *qr = getenv("FOLIO_QKV_ROPE");
    cb->qkv_rope = !(qr && strcmp(qr, "0") == 0);
    const char *en = getenv("FOLIO_EMBED_NORM");
    cb->embed_norm = !(en && strcmp(en, "0") == 0);
    const char *ra = getenv("FOLIO_ROPE_IN_ATTENTION");
    cb->rope_in_attention = !(ra && strcmp(ra, "0") == 0);
    const char *nc = getenv("FOLIO_NORM_IN_CONSUMERS");
    cb->norm_in_consumers = !(nc && strcmp(nc, "0") == 0);
    const char *gs = getenv("FOLIO_GEMV_SPLITK");
    cb->gemv_split_k = gs ? atoi(gs) : 0;
    if (cb->gemv_split_k != 1 && cb->gemv_split_k != 2 && cb->gemv_split_k != 4 &&
        cb->gemv_split_k != 8)
        cb->gemv_split_k = 0;
    /* FOLIO_SPLITK_O / FOLIO_SPLITK_DOWN: K slices of the O / down projection of
     * batches of up to SPLITK_MAX_ROWS rows on the cuBLASLt path: 1 (no split), 2, 4
     * or 8; unset or anything else: the default rule of splitk_slices. */
    cb->splitk_o = env_splitk("FOLIO_SPLITK_O");
    cb->splitk_down = env_splitk("FOLIO_SPLITK_DOWN");
    /* FOLIO_GEMV_PERSIST=0: the GEMV's grid is one CTA per column group instead of the
     * CTAs that fit resident at once (each looping over its groups). */
    const char *gp = getenv("FOLIO_GEMV_PERSIST");
    cb->gemv_persist = !(gp && strcmp(gp, "0") == 0);
    /* FOLIO_PDL=0: no programmatic dependent launch (a yardstick). */
    const char *pd = getenv("FOLIO_PDL");
    cb->pdl = !(pd && strcmp(pd, "0") == 0);
    const char *pn = getenv("FOLIO_PDL_NORM");
    cb->pdl_norm = !(pn && strcmp(pn, "0") == 0);
    const char *tg = getenv("FOLIO_TMA_GEMM");
    cb->tma = !(tg && strcmp(tg, "0") == 0);
    const char *tl = getenv("FOLIO_TMA_LM_HEAD");
    cb->tma_lm_head = !(tl && strcmp(tl, "0") == 0);

    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaDeviceGetAttribute(&cb->num_sms, cudaDevAttrMultiProcessorCount, 0));
    const char *ac = getenv("FOLIO_ATTN_WARPS_PER_SM");
    cb->attn_warps_per_sm = ac && atoi(ac) > 0 ? atoi(ac) : FOLIO_K_ATTN_WARPS_PER_SM;
    const char *aw = getenv("FOLIO_ATTN_CTA_WARPS");
    cb->attn_cta_warps = aw ? atoi(aw) : 0;
    const char *ld = getenv("FOLIO_L2_DISCARD");
    cb->l2_drop = ld ? atoi(ld) : L2_DROP_ALL;
    if (!opt->logits_unread || cb->keep_logits)
        cb->l2_drop &= ~L2_DROP_LOGITS;
    /* The GEMV and decode attention kernels ask for the whole carveout as shared
     * memory, so that their CTAs can share SMs and PDL overlaps them: batch 1
     * 0.971 -> 0.877 ms, batch 2 1.131 -> 1.072 on the H200 (round 9).
     * FOLIO_SMEM_CARVEOUT: another percent, -1 the driver's choice (a yardstick). */
    const char *sc = getenv("FOLIO_SMEM_CARVEOUT");
    folio_k_set_smem_carveout(sc ? atoi(sc) : 100);
    if (cb->attn_tile_tokens > 0)
        CUDA_CHECK(folio_k_attention_prepare(cb->head_dim));
    CUDA_CHECK(cudaStreamCreateWithFlags(&cb->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&cb->upload, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&cb->download, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasLtCreate(&cb->lt));
    CUDA_CHECK(cudaMalloc(&cb->workspace, WORKSPACE_BYTES));
    cb->plans = calloc(GEMM_CACHE_SIZE, sizeof(*cb->plans));
    cb->lw = calloc((size_t)cb->layers, sizeof(*cb->lw));
    if (!cb->plans || !cb->lw) {
        snprintf(err, errlen, "cuda backend: out of host memory");
        return -1;
    }

    /* Check every tensor's shape before any upload. */
    int64_t H = cb->hidden, I = cb->inter, QD = (int64_t)cb->heads * cb->head_dim,
            KD = (int64_t)cb->kv_heads * cb->head_dim;
    if (check_shape(m->embed, "embed_tokens", cb->vocab, H, err, errlen) ||
        check_shape(m->final_norm, "norm", H, 1, err, errlen) ||
        check_shape(m->lm_head, "lm_head", cb->vocab, H, err, errlen))
        return -1;
    size_t max_bytes =
        m->embed->nbytes > m->lm_head->nbytes ? m->embed->nbytes : m->lm_head->nbytes;
    for (int i = 0; i < cb->layers; i++) {
        const struct folio_layer_weights *L = &m->layers[i];
        const struct folio_tensor *ts[] = {L->attn_norm, L->wq,     L->wk,   L->wv,    L->wo,
                                           L->mlp_norm,  L->w_gate, L->w_up, L->w_down};
        int64_t rows[] = {H, QD, KD, KD, H, H, I, I, H}, cols[] = {1, H, H, H, QD, 1, H, H, I};
        for (int j = 0; j < 9; j++) {
            char what[64];
            snprintf(what, sizeof(what), "layer %d weight %d", i, j);
            if (check_shape(ts[j], what, rows[j], cols[j], err, errlen))
                return -1;
            if (ts[j]->nbytes > max_bytes)
                max_bytes = ts[j]->nbytes;
        }
    }

    /* Weights: one allocation per kind, QKV and gate/up fused row-wise. */
    size_t lin = (size_t)(cb->qkv_dim * H + H * QD + 2 * I * H + H * I + 2 * H);
    bool tied = m->lm_head == m->embed || m->lm_head->data == m->embed->data;
    size_t glob = (size_t)(cb->vocab * H * (tied ? 1 : 2) + H);
    void *wl, *wg, *staging;
    if (alloc_weights(cb, &wl, sizeof(bf16) * lin * cb->layers, err, errlen) ||
        alloc_weights(cb, &wg, sizeof(bf16) * glob, err, errlen))
        return -1;
    CUDA_CHECK(cudaMalloc(&staging, max_bytes));
    int rc = 0;
    bf16 *p = wg;
    cb->embed = p;
    p += (size_t)cb->vocab * H;
    cb->lm_head = tied ? cb->embed : p;
    if (!tied)
        p += (size_t)cb->vocab * H;
    cb->final_norm = p;
    rc |= upload(cb, cb->embed, m->embed, staging, err, errlen);
    if (!rc && !tied)
        rc |= upload(cb, cb->lm_head, m->lm_head, staging, err, errlen);
    if (!rc)
        rc |= upload(cb, cb->final_norm, m->final_norm, staging, err, errlen);
    p = wl;
    for (int i = 0; i < cb->layers && !rc; i++) {
        const struct folio_layer_weights *L = &m->layers[i];
        struct cuda_layer *D = &cb->lw[i];
        D->wqkv = p;
        p += (size_t)cb->qkv_dim * H;
        D->wo = p;
        p += (size_t)H * QD;
        D->w_gate_up = p;
        p += (size_t)2 * I * H;
        D->w_down = p;
        p += (size_t)H * I;
        D->attn_norm = p;
        p += H;
        D->mlp_norm = p;
        p += H;
        rc |= upload(cb, D->wqkv, L->wq, staging, err, errlen) ||
              upload(cb, D->wqkv + QD * H, L->wk, staging, err, errlen) ||
              upload(cb, D->wqkv + (QD + KD) * H, L->wv, staging, err, errlen) ||
              upload(cb, D->wo, L->wo, staging, err, errlen) ||
              upload(cb, D->w_gate_up, L->w_gate, staging, err, errlen) ||
              upload(cb, D->w_gate_up + I * H, L->w_up, staging, err, errlen) ||
              upload(cb, D->w_down, L->w_down, staging, err, errlen) ||
              upload(cb, D->attn_norm, L->attn_norm, staging, err, errlen) ||
              upload(cb, D->mlp_norm, L->mlp_norm, staging, err, errlen) ||
              fold_norm(cb, D->wqkv, cb->qkv_dim, D->attn_norm, err, errlen) ||
              fold_norm(cb, D->w_gate_up, 2 * I, D->mlp_norm, err, errlen);
    }
    cudaFree(staging);
    if (rc)
        return -1;

    float *inv = malloc(sizeof(float) * cb->head_dim / 2);
    if (!inv) {
        snprintf(err, errlen, "cuda backend: out of host memory");
        return -1;
    }
    rope_inv_freq(c, inv);
    cudaError_t e = cudaMalloc((void **)&cb->inv_freq, sizeof(float) * cb->head_dim / 2);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(cb->inv_freq, inv, sizeof(float) * cb->head_dim / 2,
                            cudaMemcpyHostToDevice, cb->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cb->stream);
    free(inv);
    CUDA_CHECK(e);

    /* Activations for max_num_tokens rows, logits and outputs for max_seqs rows. */
    size_t T = (size_t)opt->max_num_tokens, S = (size_t)opt->max_seqs;
    int max_ctx = c->max_position_embeddings > opt->max_num_tokens ? c->max_position_embeddings
                                                                   : opt->max_num_tokens;
    cb->block_stride = (max_ctx + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE;
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
    CUDA_CHECK(cudaMalloc((void **)&cb->final_h, sizeof(bf16) * S * H));
    CUDA_CHECK(cudaMalloc((void **)&cb->d_logits, sizeof(float) * S * cb->vocab));
    CUDA_CHECK(cudaMalloc((void **)&cb->d_last_sampled, sizeof(int32_t) * S));
    CUDA_CHECK(cudaMemsetAsync(cb->d_last_sampled, 0, sizeof(int32_t) * S, cb->stream));
    const char *ss = getenv("FOLIO_SAMPLE_SPLIT");
    if (!(ss && strcmp(ss, "0") == 0)) { /* for the steps that split: up to 8 rows */
        const size_t bytes = folio_k_sample_split_bytes(
            S < FOLIO_K_SAMPLE_SPLIT_MAX_ROWS ? (int)S : FOLIO_K_SAMPLE_SPLIT_MAX_ROWS);
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
    /* The largest layout: the eager maximum, or a graph bucket of max_seqs rows. */
    struct step_layout l1, l2;
    layout_for((int)T, (int)S, cb->block_stride, &l1);
    layout_for(graph_bucket((int)S), graph_bucket((int)S), cb->block_stride, &l2);
    size_t meta = l1.total > l2.total ? l1.total : l2.total;
    /* Split-KV partials: the largest over the decode batch sizes (their buckets). */
    for (int n = 1; n <= (int)S; n++) {
        struct folio_k_decode_plan p = decode_plan(cb, n);
        size_t bytes = folio_k_attention_decode_workspace_bytes(n, p, cb->heads, cb->head_dim);
        size_t gbytes = graph_bucket(n) <= (int)S && graph_bucket(n) <= (int)T
                            ? folio_k_attention_decode_workspace_bytes(graph_bucket(n), p,
                                                                       cb->heads, cb->head_dim)
                            : 0;
        bytes = bytes > gbytes ? bytes : gbytes;
        if (bytes > cb->attn_workspace_bytes)
            cb->attn_workspace_bytes = bytes;
    }
    if (cb->attn_workspace_bytes > 0)
        CUDA_CHECK(cudaMalloc(&cb->attn_workspace, cb->attn_workspace_bytes));
    /* The counters of the last-CTA merge: one per (row, KV head) of the largest bucket. */
    size_t counters = sizeof(int) * (size_t)graph_bucket((int)S) * cb->kv_heads;
    CUDA_CHECK(cudaMalloc((void **)&cb->attn_counters, counters));
    CUDA_CHECK(cudaMemsetAsync(cb->attn_counters, 0, counters, cb->stream));
    /* Split-K partials of the O and down projections (both n = hidden): the most
     * S * m over the row counts on the cuBLASLt path that split (forward runs at
     * most T rows, graph buckets included). Allocated before the KV pool takes
     * what the budget leaves, like the other activations. */
    size_t splitk_bytes = 0;
    for (int rows = cb->gemv_max_rows + 1; rows <= (int)T && rows <= SPLITK_MAX_ROWS; rows++) {
        int so = splitk_slices(cb->splitk_o, rows, (int)QD);
        int sd = splitk_slices(cb->splitk_down, rows, cb->inter);
        int sp = so > sd ? so : sd;
        size_t bytes = sp > 1 ? sizeof(float) * sp * rows * H : 0;
        if (bytes > splitk_bytes)
            splitk_bytes = bytes;
    }
    tma_setup(cb, T, S);
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
        if (cb->keep_logits)
            CUDA_CHECK(cudaMalloc((void **)&fl->d_logits_keep, sizeof(float) * S * cb->vocab));
        fl->seq_row = calloc(S, sizeof(int));
        if (!fl->seq_row) {
            snprintf(err, errlen, "cuda backend: out of host memory");
            return -1;
        }
    }

    /* KV pool: what the memory budget leaves after everything above. */
    size_t block_elems = (size_t)cb->kv_heads * FOLIO_KV_BLOCK_SIZE * cb->head_dim;
    size_t block_bytes_all = sizeof(bf16) * block_elems * 2 * cb->layers;
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
    cb->kv_layer_stride = block_elems * nblocks;
    CUDA_CHECK(cudaMalloc((void **)&cb->kv_pool, block_bytes_all * nblocks));
    cb->base.num_kv_blocks = (int)nblocks;
    CUDA_CHECK(cudaStreamSynchronize(cb->stream));
    return 0;
}

/* Captures the decode graph of every bucket up front, as vLLM does at start-up,
 * so that the first step of each batch size while serving does not pay for
 * an eager run and a capture (tens of milliseconds of inter-token latency).
 * Each bucket runs a step whose rows are all padding (no keys, no cache
 * writes, no sampling), then captures and replays it. */
static int capture_decode_graphs(struct cuda_backend *cb, char *err, size_t errlen)
{
    if (!cb->graphs_enabled)
        return 0;
    const struct folio_step_batch none = {0};
    for (int bucket = 1; bucket <= cb->base.max_seqs && bucket <= cb->base.max_num_tokens;
         bucket <<= 1) {
        struct step_layout l;
        layout_for(bucket, bucket, cb->block_stride, &l);
        for (int slot = 0; slot < MAX_INFLIGHT; slot++) {
            struct inflight *fl = &cb->fl[slot];
            pack_step(cb, &none, bucket, bucket, true, &l, fl);
            CUDA_CHECK(cudaMemcpyAsync(fl->d_step, fl->staging, l.inputs, cudaMemcpyHostToDevice,
                                       cb->stream));
            cb->d_meta = fl->d_step;
            /* Slot 0: the eager run, then capture + replay; slot 1: capture + replay. */
            for (int pass = slot == 0 ? 0 : 1; pass < 2; pass++)
                if (run_decode_graph(cb, bucket, slot, &l, err, errlen) != 0)
                    return -1;
            CUDA_CHECK(cudaStreamSynchronize(cb->stream));
        }
    }
    return 0;
}

/* A worker's first mixed steps of a size would load their kernels (CUDA loads
 * a kernel at its first launch) and have cuBLASLt pick algorithms for their
 * row counts while requests wait. So start-up runs one step of each size
 * below through the step path, as vLLM's profile run does: a prefill chunk in
 * slot 0 plus one-token sequences in the next slots, all sampling
 * (temperature 1, the server's default), on KV blocks the scheduler has not
 * handed out yet; the results are thrown away. The decode-only sizes are warm
 * already (capture_decode_graphs). On the H200 (GuideLLM poisson, round 17)
 * r128's TTFT p99 was 22.2 ms against 26.6-41.3 in the five runs before: its
 * bursts bring the largest steps, which earlier ran cold there. The burst
 * 1.2 s into a fresh server's r8 run was not changed (up to 44.3 ms against
 * 32.9-50.5 before). */
static int warm_up_mixed_steps(struct cuda_backend *cb, char *err, size_t errlen)
{
    static const int sizes[] = {80, 200, 500, 1200, 3000, 8192};
    const int max_t = cb->base.max_num_tokens;
    const int seqs = cb->base.max_seqs < 8 ? cb->base.max_seqs : 8;
    int32_t *ids = calloc((size_t)max_t, sizeof(int32_t));
    int32_t *blocks = calloc((size_t)cb->block_stride + seqs, sizeof(int32_t));
    struct folio_step_seq q[8];
    int32_t out_ids[8], top_ids[8 * FOLIO_MAX_LOGPROBS];
    float out_lp[8], top_lp[8 * FOLIO_MAX_LOGPROBS];
    struct folio_step_result res = {out_ids, out_lp, top_ids, top_lp, NULL};
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
        const struct folio_step_batch batch = {seqs, t, ids, q};
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

int folio_cuda_backend_create(const struct folio_model *m, const struct folio_backend_options *opt,
                              struct folio_backend **out, char *err, size_t errlen)
{
    struct cuda_backend *cb = calloc(1, sizeof(*cb));
    if (!cb) {
        snprintf(err, errlen, "cuda backend: out of host memory");
        return -1;
    }
    if (create(cb, m, opt, err, errlen) != 0 || capture_decode_graphs(cb, err, errlen) != 0 ||
        warm_up_mixed_steps(cb, err, errlen) != 0) {
        cuda_destroy(&cb->base);
        return -1;
    }
    *out = &cb->base;
    return 0;
}
