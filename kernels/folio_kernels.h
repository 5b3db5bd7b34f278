/* The CUDA kernels of the worker, behind plain C launch functions so that the
 * host code (worker/cuda_backend.c) stays C11. Every function queues its
 * kernel on the given stream and returns the launch's cudaError_t (never
 * synchronizes), so the caller checks each launch and turns an error into a
 * message. Tensors are row-major; bf16 values travel as uint16_t bits. */
#ifndef FOLIO_KERNELS_H
#define FOLIO_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t folio_bf16_bits;

#define FOLIO_K_BLOCK 16 /* tokens per KV cache block (FOLIO_KV_BLOCK_SIZE) */

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
cudaError_t folio_k_convert_to_bf16(folio_bf16_bits *dst, const void *src, int src_dtype,
                                    int64_t n, cudaStream_t s);

/* out[t] = embed[id], id = token_ids[t] >= 0 ? token_ids[t] : last_sampled[slot of t]. */
cudaError_t folio_k_embed(folio_bf16_bits *out, const folio_bf16_bits *embed,
                          const int32_t *token_ids, const int32_t *token_slot,
                          const int32_t *last_sampled, int num_tokens, int hidden, int vocab,
                          cudaStream_t s);

/* Row r of the output comes from row rows[r] of the input (rows == NULL: r itself).
 * If add != NULL: residual[row] = bf16(residual[row] + add[row]) first (written
 * back only when rows == NULL). out[r] = bf16(w * bf16(norm(residual[row]))), as
 * Hugging Face's LlamaRMSNorm rounds. */
cudaError_t folio_k_add_rmsnorm(folio_bf16_bits *out, folio_bf16_bits *residual,
                                const folio_bf16_bits *add, const folio_bf16_bits *weight,
                                const int32_t *rows, int num_rows, int hidden, float eps,
                                cudaStream_t s);

/* Rotates q and k of qkv ([T, (H + 2*Hkv) * D], rotate-half convention, cos/sin
 * of pos * inv_freq[i]) in place and writes k and v of each token into the
 * paged caches [num_blocks, Hkv, 16, D] at its position. */
cudaError_t folio_k_rope_kv_write(folio_bf16_bits *qkv, folio_bf16_bits *k_cache,
                                  folio_bf16_bits *v_cache, const float *inv_freq,
                                  struct folio_k_batch b, int num_heads, int num_kv_heads,
                                  int head_dim, cudaStream_t s);

/* out[t, h*D..] = softmax(q k^T / sqrt(D)) v over positions 0..pos(t) of its
 * sequence, read from the paged cache; grouped-query heads share a CTA. */
cudaError_t folio_k_paged_attention(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                    const folio_bf16_bits *k_cache,
                                    const folio_bf16_bits *v_cache, struct folio_k_batch b,
                                    int num_heads, int num_kv_heads, int head_dim,
                                    cudaStream_t s);

/* out[t, j] = bf16(bf16(silu(gu[t, j])) * gu[t, inter + j]). */
cudaError_t folio_k_silu_mul(folio_bf16_bits *out, const folio_bf16_bits *gate_up, int num_tokens,
                             int inter, cudaStream_t s);

/* One sampling row's parameters, laid out for the device. */
struct folio_k_sample_params {
    float temperature; /* <= 0: greedy */
    int32_t top_k;     /* <= 0: off */
    float top_p;       /* >= 1: off */
    float min_p;       /* <= 0: off */
    uint64_t seed;
    int32_t output_index;
    int32_t slot;         /* -1: padding row, nothing written */
    int32_t num_logprobs; /* 0..max_logprobs */
    int32_t pad_;
};

/* One CTA per row of logits [rows, vocab] (f32). Writes token, logprob of the
 * token under the raw distribution, the top num_logprobs (ids, logprobs; -1 /
 * -inf padded to max_logprobs), and last_sampled[slot] = token. Sampling is the
 * exponential race of common/rng.h over the filtered, tempered distribution. */
cudaError_t folio_k_sample(const float *logits, int rows, int vocab,
                           const struct folio_k_sample_params *params, int32_t *out_tokens,
                           float *out_logprobs, int32_t *out_top_ids, float *out_top_logprobs,
                           int max_logprobs, int32_t *last_sampled, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
