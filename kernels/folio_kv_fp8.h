/* The kernels of `--kv-cache-dtype fp8`, behind C launch functions like folio_kernels.h's: the
 * paged caches [num_blocks, Hkv, 16, D] hold e4m3 codes of x / scale (common/fp8.h's rounding,
 * saturated at 448), a scale for the layer's K (k_scale) and one for its V (v_scale), and the
 * attention kernels read code x scale. Each is the bf16 kernel of the same name in an fp8
 * variant (kv_fp8.cuh: the codes widened to bf16 in shared memory, the scales applied outside
 * the products), with the same contract otherwise. */
#ifndef FOLIO_KV_FP8_KERNELS_H
#define FOLIO_KV_FP8_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "folio_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* folio_k_rope_kv_write, the caches getting e4m3(k / k_scale) and e4m3(v / v_scale) of the
 * bf16 values it writes to qkv. */
cudaError_t folio_k_rope_kv_write_fp8(folio_bf16_bits *qkv, uint8_t *k_cache, uint8_t *v_cache,
                                      const uint32_t *cos_sin, struct folio_k_batch b,
                                      int num_heads, int num_kv_heads, int head_dim, float k_scale,
                                      float v_scale, int pdl, cudaStream_t s);

/* folio_k_paged_attention_ref over the e4m3 caches. */
cudaError_t folio_k_paged_attention_ref_fp8(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                            const uint8_t *k_cache, const uint8_t *v_cache,
                                            struct folio_k_batch b, int num_heads, int num_kv_heads,
                                            int head_dim, float k_scale, float v_scale,
                                            cudaStream_t s);

/* Raises the fp8 variants' shared-memory limits; once, before any launch or capture.
 * (folio_k_attention_fp8_prepare does both files' kernels.) */
cudaError_t folio_k_attention_fp8_prepare(int head_dim);
cudaError_t folio_k_attention_prefill_fp8_prepare(int head_dim);

/* folio_k_attention_prefill over the e4m3 caches. */
cudaError_t folio_k_attention_prefill_fp8(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                          const uint8_t *k_cache, const uint8_t *v_cache,
                                          struct folio_k_batch b, const int32_t *tiles,
                                          int num_tiles, int num_heads, int num_kv_heads,
                                          int head_dim, float k_scale, float v_scale,
                                          cudaStream_t s);

/* folio_k_attention_decode over the e4m3 caches, q rotated and the new key and value in the
 * cache already (no RoPE, norm or drops in the kernel; plan.tma ignored): every tile is copied
 * after the wait for the previous kernel. */
cudaError_t folio_k_attention_decode_fp8(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                         const uint8_t *k_cache, const uint8_t *v_cache,
                                         struct folio_k_batch b, struct folio_k_decode_plan p,
                                         void *workspace, int *counters, int num_heads,
                                         int num_kv_heads, int head_dim, float k_scale,
                                         float v_scale, int pdl, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
