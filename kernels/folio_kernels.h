/* The CUDA kernels of the worker, behind plain C launch functions so that the
 * host code (worker/cuda_backend.c) stays C11. Every function queues its
 * kernel on the given stream and returns the launch's cudaError_t (never
 * synchronizes), so the caller checks each launch and turns an error into a
 * message. Tensors are row-major; bf16 values travel as uint16_t bits. */
#ifndef FOLIO_KERNELS_H
#define FOLIO_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kv_block.h" /* FOLIO_KV_BLOCK_SIZE: tokens per KV cache block */
#include "sampling_params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t folio_bf16_bits;

/* What a kernel drops from the L2 without writing it back (l2_discard in
 * common.cuh), so that dead data does not cost memory traffic when other data
 * evicts it: dead, a buffer that the kernels before the launch read for the
 * last time (128-byte aligned; the lines wholly inside dead_bytes; NULL:
 * none); input, the kernel's own input once it has read it, where the kernel
 * says which. */
struct folio_k_l2_drop {
    const void *dead;
    int64_t dead_bytes;
    int input;
};

/* Per-step metadata of the flattened token batch, all device pointers. */
struct folio_k_batch {
    int num_tokens;
    int num_seqs;
    const int32_t *token_seq;    /* [num_tokens] index of the token's sequence in the batch */
    const int32_t *token_pos;    /* [num_tokens] position in its sequence; -1: padding row */
    const int32_t *seq_ctx_len;  /* [num_seqs] context length after the step (0: padding) */
    const int32_t *block_tables; /* [num_seqs * block_stride] */
    int block_stride;
};

/* dst[n] = bf16(src[n]) for f32 (src_dtype 2) or f16 (1) input; bf16 (0) is copied. */
cudaError_t folio_k_convert_to_bf16(folio_bf16_bits *dst, const void *src, int src_dtype, int64_t n,
                                    cudaStream_t s);

/* w[r][c] = bf16(w[r][c] * g[c]) for r < rows, c < cols: an RMSNorm's weight
 * folded into the projection that reads the norm's output. */
cudaError_t folio_k_scale_columns(folio_bf16_bits *w, int64_t rows, int cols,
                                  const folio_bf16_bits *g, cudaStream_t s);

/* out[t] = embed[id], id = token_ids[t] >= 0 ? token_ids[t] : last_sampled[slot of t]. */
cudaError_t folio_k_embed(folio_bf16_bits *out, const folio_bf16_bits *embed,
                          const int32_t *token_ids, const int32_t *token_slot,
                          const int32_t *last_sampled, int num_tokens, int hidden, int vocab,
                          cudaStream_t s);

/* Row r of the output comes from row rows[r] of the input (rows == NULL: r itself).
 * If add != NULL: residual[row] = bf16(residual[row] + add[row]) first (written
 * back only when rows == NULL). out[r] = bf16(w * bf16(norm(residual[row]))), as
 * Hugging Face's LlamaRMSNorm rounds. pdl: launched with programmatic dependent
 * launch (the norm weight is read before the wait for the previous kernel).
 * drop: drop.dead, and with drop.input the rows of add it read (where hidden
 * is a multiple of 64 and add 128-byte aligned). */
cudaError_t folio_k_add_rmsnorm(folio_bf16_bits *out, folio_bf16_bits *residual,
                                const folio_bf16_bits *add, const folio_bf16_bits *weight,
                                const int32_t *rows, int num_rows, int hidden, float eps,
                                struct folio_k_l2_drop drop, int pdl, cudaStream_t s);

/* folio_k_embed into residual and folio_k_add_rmsnorm of it (no added
 * operand, every row) into out, in one kernel: the step's first on the paths
 * whose first projection does not take the norm itself. Like folio_k_embed it
 * lets folio_k_penalty_update after it start early. */
cudaError_t folio_k_embed_rmsnorm(folio_bf16_bits *out, folio_bf16_bits *residual,
                                  const folio_bf16_bits *embed, const int32_t *token_ids,
                                  const int32_t *token_slot, const int32_t *last_sampled,
                                  const folio_bf16_bits *weight, int num_tokens, int hidden,
                                  int vocab, float eps, int pdl, cudaStream_t s);

/* folio_k_add_rmsnorm with the added operand given as the f32 partial sums of
 * a split-K GEMM: partials[s * split_stride + row * hidden + col] for s in
 * 0..splits-1 (2, 4 or 8). add = bf16(sum over s = 0, 1, .. in that order),
 * one rounding as a GEMM writing bf16 does; then as above (rows included: the
 * partials of row rows[r] are read). Deterministic: no atomics. */
cudaError_t folio_k_add_rmsnorm_partials(folio_bf16_bits *out, folio_bf16_bits *residual,
                                         const float *partials, int splits, int64_t split_stride,
                                         const folio_bf16_bits *weight, const int32_t *rows,
                                         int num_rows, int hidden, float eps,
                                         struct folio_k_l2_drop drop, int pdl, cudaStream_t s);

/* x[r][c] = bf16(x[r][c] + bias[c]) for r < rows, c < n: a projection's bias
 * (Qwen2's Q/K/V) on its bf16 output, before RoPE reads it. */
cudaError_t folio_k_add_bias(folio_bf16_bits *x, const folio_bf16_bits *bias, int rows, int n,
                             cudaStream_t s);

/* Rotates q and k of qkv ([T, (H + 2*Hkv) * D], rotate-half convention, the
 * cos/sin of pos * inv_freq[i] from cos_sin, folio_k_rope_table's table over
 * every position a token may have) in place and writes k and v of each token
 * into the paged caches [num_blocks, Hkv, 16, D] at its position. */
cudaError_t folio_k_rope_kv_write(folio_bf16_bits *qkv, folio_bf16_bits *k_cache,
                                  folio_bf16_bits *v_cache, const uint32_t *cos_sin,
                                  struct folio_k_batch b, int num_heads, int num_kv_heads,
                                  int head_dim, int pdl, cudaStream_t s);

/* folio_k_rope_kv_write of a QKV projection left as split-K partial sums
 * (folio_k_gemm_tma's f32 output: partials[s][t][(H + 2*Hkv) * D] for s <
 * splits): each value is the bf16 rounding of its slices added in order, as
 * folio_k_add_rmsnorm_partials rounds them; qkv then holds q and k rotated and
 * v, and the caches k and v. */
cudaError_t folio_k_rope_kv_write_partials(folio_bf16_bits *qkv, const float *partials, int splits,
                                           folio_bf16_bits *k_cache, folio_bf16_bits *v_cache,
                                           const uint32_t *cos_sin, struct folio_k_batch b,
                                           int num_heads, int num_kv_heads, int head_dim, int pdl,
                                           cudaStream_t s);

/* out[t, h*D..] = softmax(q k^T / sqrt(D)) v over positions 0..pos(t) of its
 * sequence, read from the paged cache; grouped-query heads share a CTA. The
 * simple f32 reference kernel (attention.cu), for any group size. */
cudaError_t folio_k_paged_attention_ref(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                        const folio_bf16_bits *k_cache,
                                        const folio_bf16_bits *v_cache, struct folio_k_batch b,
                                        int num_heads, int num_kv_heads, int head_dim,
                                        cudaStream_t s);

/* The same function on the tensor cores (attention_mma.cu), for head_dim 64 or
 * 128 and a group (heads per KV head) of up to 16.
 * folio_k_attention_tile_tokens: query tokens per prefill tile for this shape,
 * 0 if the shape needs the reference kernel. */
int folio_k_attention_tile_tokens(int num_heads, int num_kv_heads, int head_dim);

/* How the decode kernel (attention_decode.cu) cuts a decode batch of
 * num_tokens (the caller passes the graph bucket, so eager and graph runs
 * split alike): warps per CTA (1 or 4; cta_warps 1 or 4 forces it, 0 picks),
 * key-range splits (<= 32) for about warps_per_sm warps per SM in all,
 * whether a second kernel merges the splits (combine; pdl: the step uses
 * programmatic dependent launch), and whether the tiles come by TMA tensor
 * copies (tma: one-warp CTAs of one split, more than 4 an SM, head_dim 64;
 * taken where the kernel does RoPE). */
struct folio_k_decode_plan {
    int splits, warps, combine, tma;
};
/* The warps_per_sm the backend passes.
 * 3 rather than 4: a split costs its partials and their merge, and at 65-128
 * rows 4 would cut the keys in two. Once the keys are split at all, the plan
 * takes one warp an SM more. */
#define FOLIO_K_ATTN_WARPS_PER_SM 3
struct folio_k_decode_plan folio_k_attention_decode_plan(int num_tokens, int num_kv_heads,
                                                         int head_dim, int num_sms,
                                                         int warps_per_sm, int cta_warps, int pdl);

/* Device bytes of the decode kernel's partial results (0 for one split). */
size_t folio_k_attention_decode_workspace_bytes(int num_tokens, struct folio_k_decode_plan p,
                                                int num_heads, int head_dim);

/* Raises the kernels' shared-memory limits; once, before any launch or capture.
 * (folio_k_attention_prepare does both files' kernels.) */
cudaError_t folio_k_attention_prepare(int head_dim);
cudaError_t folio_k_attention_prefill_prepare(int head_dim);

/* Prefill and mixed batches: tiles[2i] = first flattened token of tile i,
 * tiles[2i+1] = its token count (<= tile_tokens, one sequence, consecutive
 * positions). Every token of the batch in exactly one tile. */
cudaError_t folio_k_attention_prefill(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                      const folio_bf16_bits *k_cache,
                                      const folio_bf16_bits *v_cache, struct folio_k_batch b,
                                      const int32_t *tiles, int num_tiles, int num_heads,
                                      int num_kv_heads, int head_dim, cudaStream_t s);

/* cos_sin[pos][i] for pos < positions, i < head_dim / 2: the bf16 cos (low
 * half) and sin (high half) of pos * inv_freq[i], as RoPE rounds them. */
cudaError_t folio_k_rope_table(uint32_t *cos_sin, const float *inv_freq, int positions,
                               int head_dim, cudaStream_t s);

/* The RMSNorm in front of a projection whose weights hold the norm's weight
 * (folded in at load): x [token][hidden] are the residual rows the projection
 * read, so its outputs are scaled by each row's 1 / rms(x) afterwards.
 * x NULL: no scaling. */
struct folio_k_row_norm {
    const folio_bf16_bits *x;
    int hidden;
    float eps;
};

/* Decode-only batches (token t is sequence t's one new token; padding rows
 * pos -1 get zeros): plan from folio_k_attention_decode_plan; with
 * plan.splits > 1, workspace holds the partials and (without plan.combine)
 * counters num_tokens * num_kv_heads ints that are zero before the first
 * launch (the kernel leaves them zero). With rope_cos_sin (folio_k_rope_table)
 * q, k and v come unrotated in qkv and the kernel does folio_k_rope_kv_write's
 * work itself, with the same roundings: it rotates q, and writes each token's
 * new key and value into the cache. Without it, q is rotated and the new key
 * and value are in the cache already. With rope_cos_sin, norm.x may be set:
 * q, k and v are first scaled by their token's 1 / rms and rounded to bf16.
 * drop: drop.dead after the wait for the kernels before; drop.input: q, k
 * and v from qkv once read, where one warp reads them (one split of one-warp
 * CTAs, rope_cos_sin given). With plan.tma and rope_cos_sin the tiles come by
 * TMA tensor copies of the caches (each base's map encoded once a process). */
cudaError_t folio_k_attention_decode(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                     folio_bf16_bits *k_cache, folio_bf16_bits *v_cache,
                                     struct folio_k_batch b, struct folio_k_decode_plan p,
                                     void *workspace, int *counters, int num_heads,
                                     int num_kv_heads, int head_dim, const uint32_t *rope_cos_sin,
                                     struct folio_k_row_norm norm, struct folio_k_l2_drop drop,
                                     int pdl, cudaStream_t s);

/* The shared-memory carveout (percent, -1: the driver's) that the GEMV and
 * decode attention kernels ask for (carveout.cu); set before the first launch. */
void folio_k_set_smem_carveout(int percent);
int folio_k_smem_carveout(void);

/* The decode GEMM on Hopper's TMA + wgmma path (gemm_tma.cu), for
 * 1 <= m <= FOLIO_K_TMA_MAX_ROWS rows. A tensor map (CUtensorMap: 128 bytes,
 * 64-byte aligned) describes a bf16 matrix [rows, k] for it: activations with
 * box_rows FOLIO_K_TMA_MAX_ROWS (rows: the step's bucket; rows past m are
 * read but their outputs never written), weights with box_rows FOLIO_K_TMA_NT.
 * folio_k_tmap_encode returns 0, or -1 for a shape it does not take (k a
 * multiple of 64) or a driver without cuTensorMapEncodeTiled.
 * folio_k_gemm_tma: y = x . w^T for w [n, k] (n a multiple of FOLIO_K_TMA_NT),
 * by `out`: FOLIO_K_TMA_BF16 bf16 [m, n], FOLIO_K_TMA_F32 f32 [m, n]; with
 * splits > 1 (either) the f32 sums of K slices [splits][m][n] (what
 * folio_k_add_rmsnorm_partials reads); k a multiple of 64 * splits.
 * FOLIO_K_TMA_GLU: w is the fused [gate; up] weight [2n, k] (its map with
 * box_rows FOLIO_K_TMA_NT / 2, n a multiple of that) and y = bf16(bf16(silu(
 * bf16(x.gate))) * bf16(x.up)) [m, n], as GEMM + folio_k_silu_mul round it.
 * pdl: the first ring of weight copies goes out before the wait for the
 * previous kernel. */
#ifdef __cplusplus
#define FOLIO_K_ALIGN64 alignas(64)
#else
#define FOLIO_K_ALIGN64 _Alignas(64)
#endif
struct folio_k_tmap {
    FOLIO_K_ALIGN64 uint64_t opaque[16];
};
#define FOLIO_K_TMA_MAX_ROWS 64
#define FOLIO_K_TMA_BF16 0
#define FOLIO_K_TMA_GLU 1
#define FOLIO_K_TMA_F32 2
#define FOLIO_K_TMA_NT 64
int folio_k_tmap_encode(struct folio_k_tmap *map, const folio_bf16_bits *base, int rows, int k,
                        int box_rows);
cudaError_t folio_k_gemm_tma(const struct folio_k_tmap *xmap, const struct folio_k_tmap *wmap,
                             void *y, int m, int n, int k, int splits, int out, int pdl,
                             cudaStream_t s);

#define FOLIO_K_GEMV_MAX_ROWS 8
/* The most rows folio_k_gemv takes on quantized weights (where the tensor cores win above). */
#define FOLIO_K_GEMV_QUANT_MAX_ROWS 4

/* The weight rows of folio_k_gemv, in one of three formats:
 * - BF16: bf16 [n][k], k a multiple of 8.
 * - E4M3 (--quantization fp8): e4m3 codes [n][k] with row j's scale scale[j], k a multiple of
 *   16. The input rows are quantized per token by common/fp8.h's rule (W8A8, the codes of
 *   folio_k_fp8_quantize_rows) and each output is bf16(sum * scale[j] * x_scale[t]) before any
 *   epilogue.
 * - Q4_0X8 (a GGUF's Q4_0 kept packed): rows of gguf_blocks.h's FOLIO_GGML_Q4_0X8, k / 256 *
 *   144 bytes each, k a multiple of 256; each block's 32 products summed in f32, then times
 *   the block's scale. */
enum folio_k_wformat { FOLIO_K_W_BF16, FOLIO_K_W_E4M3, FOLIO_K_W_Q4_0X8 };
struct folio_k_weight {
    const void *w;
    const float *scale; /* E4M3: a scale a row */
    int format;         /* enum folio_k_wformat */
};

/* y[m, n] = x[m, k] . w[n, k]^T for m <= FOLIO_K_GEMV_MAX_ROWS (quantized w:
 * FOLIO_K_GEMV_QUANT_MAX_ROWS) (bf16 in, f32 sums, bf16 or f32 out).
 * gate_up_silu: w is [gate; up] of 2n rows and y is
 * bf16(bf16(silu(bf16(x.gate))) * bf16(x.up)), as the GEMM + folio_k_silu_mul
 * path rounds it. k must suit w's format.
 * With norm_w != NULL the input rows are RMSNorm(x + add) computed in the
 * prologue (k == hidden; add may be NULL), rounded as folio_k_add_rmsnorm
 * rounds them: input row r is row rows[r] of x/add (rows NULL: r). If res_out
 * != NULL (and rows NULL), bf16(x + add) is written there (a buffer other than
 * x: the other CTAs still read x). Without norm_w, x is read as is (add, rows,
 * res_out ignored). The grid is at most the CTAs that fit resident at once.
 * w is in one of the formats of struct folio_k_weight (gate_up_silu: 2n rows).
 * pdl (here and in the other kernels that take it): launch with programmatic
 * dependent launch; the kernel issues what no earlier kernel of the step
 * writes (the weight loads) before it waits for the previous kernel, so that
 * work overlaps the previous kernel's tail. */
cudaError_t folio_k_gemv(void *y, const folio_bf16_bits *x, const folio_bf16_bits *add,
                         const folio_bf16_bits *norm_w, float eps, const int32_t *rows,
                         folio_bf16_bits *res_out, struct folio_k_weight w, int m, int n, int k,
                         int out_f32, int gate_up_silu, int pdl, cudaStream_t s);

/* The QKV projection of b.num_tokens <= FOLIO_K_GEMV_MAX_ROWS tokens as
 * folio_k_gemv with norm_w computes it (rows NULL), with
 * folio_k_rope_kv_write's work in the epilogue: q and k rotated in qkv
 * [T, (H + 2*Hkv) * D], k and v written to the paged caches. One launch where
 * the small-batch decode step took two. No split-K: the two columns of a pair
 * are computed by two warps of one CTA. */
cudaError_t folio_k_gemv_qkv_rope(folio_bf16_bits *qkv, const folio_bf16_bits *x,
                                  const folio_bf16_bits *add, const folio_bf16_bits *norm_w,
                                  float eps, folio_bf16_bits *res_out, struct folio_k_weight w,
                                  int k, folio_bf16_bits *k_cache, folio_bf16_bits *v_cache,
                                  const float *inv_freq, struct folio_k_batch b, int num_heads,
                                  int num_kv_heads, int head_dim, int pdl, cudaStream_t s);

/* out[t, j] = bf16(bf16(silu(gu[t, j])) * gu[t, inter + j]); with norm.x,
 * gu[t, *] first scaled by token t's 1 / rms(norm.x[t]) and rounded to bf16.
 * drop: drop.dead; drop.input: gate_up once read (inter a multiple of 64). */
cudaError_t folio_k_silu_mul(folio_bf16_bits *out, const folio_bf16_bits *gate_up, int num_tokens,
                             int inter, struct folio_k_row_norm norm, struct folio_k_l2_drop drop,
                             cudaStream_t s);

/* One sampling row's parameters, laid out for the device. */
struct folio_k_sample_params {
    struct folio_sampling_params s; /* the sequence's, as the API gave them */
    int32_t output_index;           /* tokens it sampled before: the RNG's counter */
    int32_t slot;                   /* -1: padding row, nothing written */
};

/* Penalty state of a slot, one word per vocabulary entry (penalties.cu): the
 * top bit says the token is in the sequence (prompt or output), the low 31
 * bits count its occurrences in the output. */
#define FOLIO_K_PEN_SEEN 0x80000000u
#define FOLIO_K_PEN_COUNT_MASK 0x7fffffffu

#define FOLIO_K_PEN_TRACK 1   /* the sequence has penalties: keep its slot's state */
#define FOLIO_K_PEN_SAMPLES 2 /* and it samples in this step */

/* One batch sequence's view for the penalty bookkeeping of a step. */
struct folio_k_penalty_seq {
    int32_t flags; /* FOLIO_K_PEN_*; 0 for sequences without penalties and padding rows */
    int32_t slot;
    int32_t first_token;  /* its first new token in the flattened batch */
    int32_t num_new;      /* its new tokens */
    int32_t context_len;  /* after the step */
    int32_t output_index; /* tokens sampled so far: the last output_index positions are output */
};

/* Keeps the penalty state of the slots of penalized sequences, one CTA per
 * row of seqs (rows without FOLIO_K_PEN_TRACK return at once). Every new
 * token goes into history[slot * max_ctx + position] (a token id < 0 is
 * read from last_sampled[slot]). A step that starts at position 0 (a new
 * sequence, or a recompute after preemption) marks the slot for a rebuild;
 * the state is rebuilt from the history at the slot's next sampling step,
 * when the output is known to be the last output_index positions (a
 * non-final prefill chunk of a recompute cannot tell prompt from output).
 * Other sampling steps add their tokens to the state. Launch it before
 * folio_k_sample, which overwrites last_sampled. rebuild: [max_seqs] ints,
 * zero at first. pdl: launched with programmatic dependent launch right after
 * folio_k_embed (its CTAs wait for the gather before they exit, so the kernel
 * after this one may wait on this one alone), or after folio_k_embed_rmsnorm
 * in the same way. */
cudaError_t folio_k_penalty_update(uint32_t *state, int32_t *history, int32_t *rebuild,
                                   const struct folio_k_penalty_seq *seqs, int num_seqs,
                                   const int32_t *token_ids, const int32_t *last_sampled, int vocab,
                                   int max_ctx, int pdl, cudaStream_t s);

/* One CTA per row of logits [rows, vocab] (f32). Writes token, logprob of the
 * token under the raw distribution, the top num_logprobs (ids, logprobs; -1 /
 * -inf padded to max_logprobs), and last_sampled[slot] = token. Sampling is the
 * exponential race of common/rng.h over the filtered, tempered distribution.
 * A row with penalties first has them applied, as worker/sampler.c does, from
 * pen_state[slot * vocab ..] (kept by folio_k_penalty_update): a seen token's
 * logit l becomes l / rep (l > 0) or l * rep, then l - (count * freq + pres)
 * where count > 0. pdl: launched with programmatic dependent launch (after a
 * kernel that lets it start early, such as the LM head GEMV); the logits are
 * read after the wait. drop_logits: the rows that one CTA samples (above 8
 * rows, all of them) are dropped from the L2 once sampled (l2_discard), for
 * logits that nothing reads afterwards. */
cudaError_t folio_k_sample(const float *logits, int rows, int vocab,
                           const struct folio_k_sample_params *params, int32_t *out_tokens,
                           float *out_logprobs, int32_t *out_top_ids, float *out_top_logprobs,
                           int max_logprobs, int32_t *last_sampled, const uint32_t *pen_state,
                           void *split_ws, int drop_logits, int pdl, cudaStream_t s);

/* One logit bias entry of a step: logits[row * vocab + token] += value
 * (value may be -inf: a ban). */
struct folio_k_logit_bias {
    int32_t row; /* the sampling row (LM-head row) */
    int32_t token;
    float value;
};

/* Adds n entries (logit_bias.cu) to logits [rows, vocab]; launch it between
 * the LM head and folio_k_sample, without PDL. */
cudaError_t folio_k_logit_bias(float *logits, int vocab, const struct folio_k_logit_bias *bias,
                               int n, cudaStream_t s);

/* Structured outputs (token_mask.cu): for each of n masked rows, rows[m]'s
 * logits [vocab] set to -inf where bit v % 32 of masks[m][v / 32] is clear
 * ((vocab + 31) / 32 words a mask); launch it after the logit bias, before
 * folio_k_sample. */
cudaError_t folio_k_token_mask(float *logits, int vocab, const uint32_t *masks, const int32_t *rows,
                               int n, cudaStream_t s);

/* folio_k_sample's rows that need no filter, penalty or top-N logprobs
 * (greedy, or tempered over the whole row) over several CTAs a row
 * (sample_split.cu); folio_k_sample does it first when given split_ws (a
 * workspace of folio_k_sample_split_bytes(n) for the n <= 8 rows of any step
 * that splits, zeroed once before its first use) and rows <=
 * FOLIO_K_SAMPLE_SPLIT_MAX_ROWS: 16 CTAs a row fill an H200's SMs at 8
 * rows; at more rows they cost more than they save. Steps of more rows take those
 * rows through folio_k_sample_rows instead, given split_ws too. */
#define FOLIO_K_SAMPLE_SPLIT_MAX_ROWS 8
size_t folio_k_sample_split_bytes(int rows);

/* The same rows in one CTA a row and one read of it (sample_rows.cu), for
 * steps of more than FOLIO_K_SAMPLE_SPLIT_MAX_ROWS rows; vocab a multiple of 4
 * and logits 16-byte aligned (cudaErrorInvalidValue otherwise). drop_logits as
 * folio_k_sample decides it (rows that start on 128-byte lines). */
cudaError_t folio_k_sample_rows(const float *logits, int rows, int vocab,
                                const struct folio_k_sample_params *params, int32_t *out_tokens,
                                float *out_logprobs, int32_t *out_top_ids, float *out_top_logprobs,
                                int max_logprobs, int32_t *last_sampled, const uint32_t *pen_state,
                                int drop_logits, int pdl, cudaStream_t s);
cudaError_t folio_k_sample_split(const float *logits, int rows, int vocab,
                                 const struct folio_k_sample_params *params, int32_t *out_tokens,
                                 float *out_logprobs, int32_t *out_top_ids, float *out_top_logprobs,
                                 int max_logprobs, int32_t *last_sampled, const uint32_t *pen_state,
                                 void *workspace, int pdl, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
