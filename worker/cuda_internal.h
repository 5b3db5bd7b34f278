/* What the files of the CUDA backend share: the backend's state, the step
 * buffer's layout and the functions one file calls in another.
 *   cuda_backend.c  create and destroy: tuning, streams, activations, KV pool (bf16 or fp8)
 *   cuda_weights.c  weights: check, upload to bf16, fuse QKV and gate/up, fold norms
 *   cuda_gemm.c     GEMMs: cuBLASLt plans, split-K, the TMA GEMM's tensor maps
 *   cuda_fp8.c      --quantization fp8: the weights' e4m3 form and the FP8 products
 *   cuda_gguf.c     a GGUF's weights kept packed: their products
 *   cuda_forward.c  the forward pass of one step, by regime
 *   cuda_graphs.c   decode and verify graphs; cuda_warmup.c: the start-up runs
 *   cuda_step.c     the launch/collect pipeline: validate, pack, copy, collect
 * Any CUDA or cuBLAS error returns -1 with a message (CUDA_CHECK). */
#ifndef FOLIO_CUDA_INTERNAL_H
#define FOLIO_CUDA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "backend.h"
#include "cuda_logit_bias.h"
#include "cuda_token_mask.h"
#include "folio_fp8.h"
#include "folio_gguf.h"
#include "folio_kernels.h"
#include "folio_kv_fp8.h"

#define MAX_INFLIGHT 2
#define GEMM_CACHE_SIZE 1024 /* open-addressed, power of two */
#define WORKSPACE_BYTES (32u << 20)
#define NUM_GRAPH_BUCKETS 24
/* Verify graphs are captured for up to this many sequences: the scheduler drafts only in steps
 * of at most 8 decoding sequences (scheduler/policy_spec.c's SPEC_MAX_BATCH). */
#define VERIFY_GRAPH_MAX_SEQS 8
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

/* What a GEMM plan multiplies: bf16 (the default), or e4m3 A and B (--quantization fp8),
 * scaled by cuBLASLt's outer-vector scales into bf16, or left as raw f32 sums for
 * folio_k_fp8_scale_out where cuBLASLt does not offer those scales. */
enum gemm_kind { GEMM_BF16, GEMM_FP8_SCALED, GEMM_FP8_RAW };

/* One cached GEMM shape: y[M, N] = x[M, K] * w[N, K]^T, algorithm picked once.
 * splits > 1: a strided-batched matmul over that many slices of K, f32 partial
 * results [splits][M][N]; align: the byte alignment its slices keep. */
struct gemm_plan {
    bool used;
    int m, n, k;
    bool out_f32;
    int splits;
    unsigned align;
    enum gemm_kind kind;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
};

/* A projection's weight under --quantization fp8. */
struct fp8_weight {
    uint8_t *q;   /* [n][k] e4m3 codes */
    float *scale; /* [n]: each output channel's (common/fp8.h) */
};

/* A projection's weight kept in a GGUF's blocks (folio_gguf.h): its tensors' rows one after
 * another (Q, K, V; gate, up), each tensor a part in its own type, parts of one type side by
 * side merged into one. A tensor of a type not kept packed is a bf16 part. */
struct gguf_part {
    const void *q;  /* rows at q + r * stride */
    int type;       /* ggml type number (gguf_blocks.h), FOLIO_GGML_BF16 for a widened tensor */
    int64_t stride; /* bytes a row, a multiple of 16 */
    int row0, rows; /* its output rows within the projection's */
};
#define GGUF_MAX_PARTS 3
struct gguf_weight {
    struct gguf_part part[GGUF_MAX_PARTS];
    int num_parts;
};

/* One layer's weights. The norms' weights are folded into the columns of the
 * projections that read them (wqkv, w_gate_up) at load, and attn_norm and
 * mlp_norm hold ones: the norm kernels then compute x / rms(x), and the
 * fused cuBLASLt path can leave the norm to the kernels after those
 * projections. */
struct cuda_layer {
    bf16 *attn_norm, *wqkv, *wo, *mlp_norm, *w_gate_up, *w_down;
    bf16 *bqkv; /* Q/K/V biases [qkv_dim] (Qwen2); NULL: none */
    /* --quantization fp8: the four projections in e4m3 (the bf16 pointers above NULL) and
     * the norms' own weights, not folded (the norm kernels apply them: the activations are
     * quantized after the norm's weight, as vLLM's are). */
    struct fp8_weight qkv8, o8, gate_up8, down8;
    /* A GGUF kept packed (cuda_backend.gguf): the four projections so, the norms unfolded
     * as under fp8 (blocks cannot take the norm's weight into their columns). */
    struct gguf_weight qkv_g, o_g, gate_up_g, down_g;
};

/* A step's rows on the device: t_rows tokens, s_rows sequences, r_rows LM-head (sampling) rows.
 * stride 0 packs the batch's tokens side by side (eager steps, one LM-head row per sampled
 * position). stride n >= 1 is a graph's fixed shape: sequence i owns the n token rows from
 * i * n, its new tokens last and padding before them (so every attention tile that holds one of
 * its tokens ends on one), and LM-head row r is token row r: n = 1 for decode graphs, 1 + K for
 * verify graphs (K drafts a sequence). */
struct step_shape {
    int t_rows, s_rows, r_rows, stride;
};

/* Byte offsets of the sections of a step's buffer, for a step_shape: the
 * metadata the host packs (inputs, up to `inputs`), then what the sampler
 * writes for its r_rows rows (outputs, up to `total`). Each in-flight slot
 * has the buffer twice, pinned on the host and on the device: one copy in,
 * one copy out a step. */
struct step_layout {
    size_t token_ids, token_slot, token_seq, token_pos, seq_ctx, sample_rows, params, tables,
        attn_tiles, pen_seqs;
    size_t inputs;
    size_t out_tokens, out_logprobs, out_top_ids, out_top_logprobs;
    size_t total;
};

/* The dead buffers that decode steps on the cuBLASLt paths drop from the L2
 * without write-back (l2_discard in kernels/common.cuh): left there, they are
 * written back when the next layers' weights and keys evict them, traffic
 * that lands on the kernels reading memory then. Other steps drop only the
 * logits that one CTA a row samples. */
enum {
    L2_DROP_GATE_UP = 1,   /* gate/up's output, by SiLU once read */
    L2_DROP_ACT = 2,       /* SiLU's output once the down GEMM read it: by decode
                              attention (fused path), else by the next add_rmsnorm */
    L2_DROP_LOGITS = 4,    /* by the sampler (logits_unread) */
    L2_DROP_QKV = 8,       /* q, k and v, by decode attention once read (fused path) */
    L2_DROP_ATTN_OUT = 16, /* attention's output once O read it: by SiLU (fused
                              path), else by the next add_rmsnorm */
    L2_DROP_NORMED = 32,   /* the norm's output once a projection read it: by
                              decode attention (after QKV) and SiLU (after gate/up) */
    L2_DROP_ADD = 64,      /* what add_rmsnorm adds (O's or down's output or its
                              K slices), once added */
    L2_DROP_ALL = 127,
};

/* A step between launch and collect. Its slot's buffers and graphs are its
 * own while it is in flight, so the next step's metadata goes up (upload
 * stream) while this one computes, and this one's results come down
 * (download stream) while the next computes: the compute stream runs step
 * after step with nothing between them. */
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
    int *seq_drafts;    /* [max_seqs]: its drafts, sampled in the rows right after seq_row */
    int num_sample_rows;
    bool logits_on_device; /* the rows live in d_logits until a later step */
    float *d_logits_keep;  /* paths.keep_logits: a copy that outlives the next launch */
    bool logits_kept;
    struct step_layout layout; /* the step's buffer, for its sampling queued after launch */
    bool awaiting_masks;       /* launched with masks_later: sample_masked queues its sampling */
};

/* A bucket's decode or verify graphs, one per in-flight slot (each reads and
 * writes its slot's step buffer): the whole step, and the forward alone up to
 * the logits for steps whose sampling runs eagerly (a logit bias or grammar
 * masks). */
struct graph_entry {
    int bucket; /* sequences */
    int stride; /* token rows a sequence (step_shape): 1 decode, 1 + K verify */
    bool captured[2][MAX_INFLIGHT];
    cudaGraphExec_t exec[2][MAX_INFLIGHT]; /* [forward_only][slot] */
};

struct cuda_backend {
    struct folio_backend base;
    bool failed;
    struct folio_cuda_paths paths; /* the options' forced paths, gemv_max_rows filled in */
    bool use_graphs;               /* decode steps replayed as CUDA graphs (not --enforce-eager) */
    int verify_stride;             /* 1 + num_speculative_tokens where verify graphs are
                                      captured, else 0 */
    int max_sample_rows;           /* LM-head rows of a step: a row per sequence and a row per
                                      draft, at most one per token */

    /* model shape */
    int hidden, inter, layers, heads, kv_heads, head_dim, vocab, qkv_dim;
    float eps;
    bool qkv_bias; /* the QKV projection has a bias (Qwen2): cuda_layer.bqkv */

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

    /* KV pool: [layer][K|V][block][kv_head][16][head_dim], bf16 values or (kv_fp8) e4m3 codes */
    unsigned char *kv_pool;
    size_t kv_layer_bytes; /* one layer's K (or V) */
    /* --kv-cache-dtype fp8 (folio_kv_fp8.h): the caches hold e4m3(x / scale), each layer's K
     * and V with a scale of their own (kv_scale[2 layer], [2 layer + 1]), and every step takes
     * the paths whose cache write is the RoPE kernel's (no fused GEMV+RoPE, no RoPE inside
     * attention, QKV whole on the TMA path). */
    bool kv_fp8;
    float *kv_scale; /* host, [layers][2] */

    /* activations, [max_num_tokens, ...] */
    bf16 *res, *res2, *normed, *qkv, *attn_out, *proj_out, *gate_up, *act, *final_h;
    float *d_logits;         /* [max_seqs, vocab] */
    int32_t *d_last_sampled; /* [max_seqs + 1], by slot; the last entry takes what the draft
                                rows of a verify step sample (no FOLIO_TOKEN_FROM_PREV reads it) */
    unsigned char *d_meta;   /* the step being queued: its slot's d_step */
    int block_stride;        /* block-table entries per sequence */
    /* Penalties (folio_k_penalty_update): per slot, a state word per token
     * [max_seqs, vocab], the tokens by position [max_seqs, pen_max_ctx], and
     * a rebuild flag [max_seqs]. */
    uint32_t *d_pen_state;
    int32_t *d_pen_history;
    int32_t *d_pen_rebuild;
    int pen_max_ctx;
    struct folio_cuda_bias bias; /* the logit bias of the step being queued */
    struct folio_cuda_mask mask; /* the structured-output masks of the step being queued */
    bool defer_sample;           /* the forward being queued stops at the logits */
    /* folio_k_sample_split's workspace; NULL (paths.one_cta_sampler): every row
     * in sample.cu's one-CTA-a-row kernel. */
    void *d_sample_split;

    struct inflight fl[MAX_INFLIGHT];
    int fl_head, fl_count;

    /* attention: tensor-core kernels unless the shape needs the reference one */
    int attn_tile_tokens; /* query tokens per prefill tile; 0: reference kernel */
    int num_sms;
    void *attn_workspace; /* split-KV partials of the decode kernel */
    size_t attn_workspace_bytes;
    int *attn_counters; /* its per-(token, KV head) counters, zero between launches */
    bool pdl_step;      /* this step's GEMVs use PDL (set by the forward) */
    /* The f32 K-slice partial sums of a split projection ([S][m][n]), summed by
     * the kernel that reads them (add_rmsnorm, or RoPE for QKV). */
    float *splitk_partials;
    /* The TMA + wgmma GEMM (folio_k_gemm_tma) for the projections of steps of
     * gemv_max_rows < m <= FOLIO_K_TMA_MAX_ROWS rows, where the shapes and the
     * driver allow it: the tensor maps of each layer's four weights and of the
     * activations they read. O, down and QKV write K slices (more for down's
     * long k at up to TMA_SMALL_ROWS rows) so that more CTAs stream weights. */
    bool tma;
    struct folio_k_tmap *tmaps; /* [layers][TMA_WEIGHTS], then [TMA_XS], then the LM head */
    int tma_split_qkv, tma_split_o, tma_split_down;
    int tma_split_down_small; /* down's K slices at up to TMA_SMALL_ROWS rows */
    bool tma_lm_head;         /* the LM head on the TMA GEMM too (vocab fills whole CTAs) */
    /* Dead intermediate buffers dropped from the L2 without write-back, bits
     * L2_DROP_* (all but the logits when a caller reads them). */
    int l2_drop;

    struct graph_entry graphs[NUM_GRAPH_BUCKETS];
    int num_graphs;

    /* --quantization fp8 (cuda_fp8.c): steps of up to gemv_max_rows rows take forward_gemv
     * on the e4m3 weights, the others forward_quant. */
    bool fp8;
    enum gemm_kind fp8_kind; /* GEMM_FP8_SCALED where cuBLASLt takes outer-vector scales */
    uint8_t *x8;             /* [max_num_tokens][max k]: activations' codes for cuBLASLt */
    float *x8_scale;         /* [max_num_tokens] */
    float *fp8_acc;          /* GEMM_FP8_RAW: the raw sums [max_num_tokens][max n] */

    /* A GGUF's linear weights kept in their blocks (cuda_gguf.c): steps take forward_quant,
     * as under fp8, with the GGUF products; but where every projection is Q4_0 regrouped
     * (gguf_q4_gemv), steps of up to gemv_max_rows rows take forward_gemv on the blocks. */
    bool gguf;
    bool gguf_q4_gemv;
    int gguf_gemv_rows; /* the most rows the packed GEMV takes; above, the dequantized copy */
    bf16 *gguf_scratch; /* [largest projection]: a layer's matrix widened for a bf16 GEMM */
};

/* The TMA GEMM's tensor maps: the weights of each layer, and the activations. */
enum { TMA_QKV, TMA_O, TMA_GATE_UP, TMA_DOWN, TMA_WEIGHTS };
#define TMA_SLICES 4
/* Steps of up to TMA_SMALL_ROWS rows run the down projection (whose k is
 * several times the others') in TMA_SLICES_SMALL K slices: twice the CTAs,
 * all resident, twice the weight bytes in flight, while the partials the next
 * add_rmsnorm reads are still few. Above that the extra partials cost more
 * than the extra CTAs bring. */
#define TMA_SLICES_SMALL 8
#define TMA_SMALL_ROWS 8
enum { TMA_X_NORMED, TMA_X_ATTN_OUT, TMA_X_ACT, TMA_X_FINAL, TMA_XS };

/* cuda_step.c */
void cuda_layout_for(const struct step_shape *sh, int block_stride, struct step_layout *l);
int cuda_pack_step(struct cuda_backend *cb, const struct folio_step_batch *batch,
                   const struct step_shape *sh, const struct step_layout *l, struct inflight *fl);
int cuda_launch(struct folio_backend *b, const struct folio_step_batch *batch, char *err,
                size_t errlen);
int cuda_collect(struct folio_backend *b, struct folio_step_result *res, char *err, size_t errlen);
int cuda_ready(struct folio_backend *b);
int cuda_sample_masked(struct folio_backend *b, const struct folio_step_batch *batch, char *err,
                       size_t errlen);

/* cuda_gemm.c */
void cuda_gemm_plans_clear(struct cuda_backend *cb);
cudaError_t cuda_gemv(struct cuda_backend *cb, void *y, const bf16 *x, const bf16 *add,
                      const bf16 *norm_w, const int32_t *rows, bf16 *res_out,
                      struct folio_k_weight w, int m, int n, int k, bool out_f32,
                      bool gate_up_silu);
int cuda_gemm_lt(struct cuda_backend *cb, const bf16 *x, const bf16 *w, void *y, int m, int n,
                 int k, bool out_f32, float beta, char *err, size_t errlen);
int cuda_gemm(struct cuda_backend *cb, const bf16 *x, const bf16 *w, void *y, int m, int n, int k,
              bool out_f32, char *err, size_t errlen);
int cuda_gemm_splitk(struct cuda_backend *cb, const bf16 *x, const bf16 *w, float *partials, int m,
                     int n, int k, int splits, char *err, size_t errlen);
int cuda_splitk_slices(int forced, int m, int k);
int cuda_gemm_lt_fp8(struct cuda_backend *cb, enum gemm_kind kind, const uint8_t *xq,
                     const float *x_scale, const uint8_t *w, const float *w_scale, void *y, int m,
                     int n, int k, char *err, size_t errlen);
void cuda_tma_setup(struct cuda_backend *cb, size_t max_rows, size_t max_seqs);
const struct folio_k_tmap *cuda_tma_wmap(const struct cuda_backend *cb, int li, int which);
const struct folio_k_tmap *cuda_tma_xmap(const struct cuda_backend *cb, int which);
const struct folio_k_tmap *cuda_tma_lm_head_map(const struct cuda_backend *cb);

/* cuda_forward.c */
struct folio_k_decode_plan cuda_decode_plan(const struct cuda_backend *cb, int n);
int cuda_forward(struct cuda_backend *cb, const struct step_layout *l, int t_rows, int s_rows,
                 int n_sample, int num_tiles, char *err, size_t errlen);
int cuda_sample(struct cuda_backend *cb, const struct step_layout *l, int n_sample, bool pdl,
                char *err, size_t errlen);

/* cuda_graphs.c */
int cuda_run_graph(struct cuda_backend *cb, const struct step_shape *sh, int num_tiles, int slot,
                   bool forward_only, const struct step_layout *l, char *err, size_t errlen);
bool cuda_verify_graph_fits(const struct cuda_backend *cb, int bucket);
int cuda_capture_graphs(struct cuda_backend *cb, char *err, size_t errlen);
int cuda_warm_up_mixed_steps(struct cuda_backend *cb, char *err, size_t errlen);

/* cuda_weights.c */
bool cuda_gguf_keeps_packed(const struct folio_model *m);
int cuda_load_weights(struct cuda_backend *cb, const struct folio_model *m, char *err,
                      size_t errlen);

/* cuda_fp8.c */
int cuda_fp8_check_device(char *err, size_t errlen);
int cuda_fp8_quantize_weight(struct cuda_backend *cb, struct fp8_weight *dst, uint8_t *q,
                             float *scale, const bf16 *w, int n, int k, char *err, size_t errlen);
int cuda_fp8_setup(struct cuda_backend *cb, int max_rows, char *err, size_t errlen);
int cuda_gemm_fp8(struct cuda_backend *cb, const bf16 *x, const struct fp8_weight *w, bf16 *y,
                  int m, int n, int k, char *err, size_t errlen);

/* cuda_gguf.c */
int cuda_gguf_setup(struct cuda_backend *cb, int max_rows, char *err, size_t errlen);
int cuda_gemm_gguf(struct cuda_backend *cb, const bf16 *x, const struct gguf_weight *w, bf16 *y,
                   int m, int n, int k, char *err, size_t errlen);

/* The decode graph bucket of n rows: the next power of two. */
static inline int cuda_graph_bucket(int n)
{
    int b = 1;
    while (b < n)
        b <<= 1;
    return b;
}

/* The graph shape of a bucket of sequences of `stride` token rows each. */
static inline struct step_shape cuda_graph_shape(int bucket, int stride)
{
    return (struct step_shape){bucket * stride, bucket, bucket * stride, stride};
}

#endif
