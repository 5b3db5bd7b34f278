/* FP8 (float8 e4m3, the "fn" variant of the OCP spec that NVIDIA's tensor cores take) and the
 * one rule of `--quantization fp8` that every backend follows, as vLLM's W8A8 FP8 with dynamic
 * per-token activations and per-channel weights: a row x of n values (a weight matrix's output
 * channel, or one token's activations) is stored as
 *     s = max(amax(x) / 448, FOLIO_FP8_MIN_SCALE),   q[i] = e4m3(x[i] / s)
 * rounded to nearest even and saturated at +-448, and read back as q[i] * s. The division and
 * the rounding are IEEE single precision, so the CUDA kernels (kernels/fp8.cuh) compute the same
 * codes from the same floats. */
#ifndef FOLIO_FP8_H
#define FOLIO_FP8_H

#include <stddef.h>
#include <stdint.h>

/* The largest finite e4m3 value; codes 0x7f and 0xff are NaN, there is no infinity. */
#define FOLIO_FP8_MAX 448.0f
/* vLLM's floor on a dynamic scale (1 / (448 * 512)), so that a row of zeros or denormals
 * divides by a finite scale. */
#define FOLIO_FP8_MIN_SCALE (1.0f / (448.0f * 512.0f))

/* The quantizations `--quantization` names. */
enum folio_quantization {
    FOLIO_QUANT_NONE,
    FOLIO_QUANT_FP8, /* linear weights e4m3 per output channel, activations per token */
};

/* "none" (or NULL) and "fp8"; -1 for anything else. */
int folio_quantization_parse(const char *name, enum folio_quantization *out);
const char *folio_quantization_name(enum folio_quantization q);

/* The KV cache's element types `--kv-cache-dtype` names (vLLM's flag): auto keeps the backend's
 * own (bf16 on CUDA, f16 or f32 on the CPU), fp8 stores K and V as e4m3 codes of x / scale with
 * a per-layer scale for K and one for V (FOLIO_KV_FP8_SCALE). */
enum folio_kv_cache_dtype {
    FOLIO_KV_AUTO,
    FOLIO_KV_FP8,
};
/* The scale of every layer's K and V under fp8: vLLM's default where a checkpoint brings no
 * k_scale/v_scale (values past 448 saturate). */
#define FOLIO_KV_FP8_SCALE 1.0f

/* "auto" (or NULL), "fp8" and "fp8_e4m3"; -1 for anything else. */
int folio_kv_cache_dtype_parse(const char *name, enum folio_kv_cache_dtype *out);
const char *folio_kv_cache_dtype_name(enum folio_kv_cache_dtype d);

/* f32 to e4m3: round to nearest even, saturated at +-448 (infinities included); NaN stays NaN. */
uint8_t folio_e4m3_from_f32(float f);
/* e4m3 to f32, exactly. */
float folio_e4m3_to_f32(uint8_t c);
/* The same for all 256 codes, a table (for inner loops). */
const float *folio_e4m3_table(void);

/* The scale of a row whose largest magnitude is amax. */
float folio_fp8_scale(float amax);

/* q[0..n) = the codes of x[0..n) by the rule above; returns the row's scale s. */
float folio_fp8_quantize_row(const float *x, size_t n, uint8_t *q);

#endif
