#include "fp8.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

int folio_quantization_parse(const char *name, enum folio_quantization *out)
{
    if (!name || !strcmp(name, "none")) {
        *out = FOLIO_QUANT_NONE;
        return 0;
    }
    if (!strcmp(name, "fp8")) {
        *out = FOLIO_QUANT_FP8;
        return 0;
    }
    return -1;
}

const char *folio_quantization_name(enum folio_quantization q)
{
    return q == FOLIO_QUANT_FP8 ? "fp8" : "none";
}

int folio_kv_cache_dtype_parse(const char *name, enum folio_kv_cache_dtype *out)
{
    if (!name || !strcmp(name, "auto")) {
        *out = FOLIO_KV_AUTO;
        return 0;
    }
    if (!strcmp(name, "fp8") || !strcmp(name, "fp8_e4m3")) {
        *out = FOLIO_KV_FP8;
        return 0;
    }
    return -1;
}

const char *folio_kv_cache_dtype_name(enum folio_kv_cache_dtype d)
{
    return d == FOLIO_KV_FP8 ? "fp8" : "auto";
}

uint8_t folio_e4m3_from_f32(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint8_t sign = (uint8_t)((bits >> 24) & 0x80);
    float a = fabsf(f);
    if (isnan(f))
        return sign | 0x7f;
    if (a >= FOLIO_FP8_MAX) /* everything past the largest value saturates to it */
        return sign | 0x7e;
    if (a < 0.015625f) { /* below 2^-6: subnormal codes, multiples of 2^-9 (scaling is exact) */
        /* nearbyintf rounds half to even in the default rounding mode; 8 becomes the smallest
         * normal, code 0x08, which is right. */
        return sign | (uint8_t)nearbyintf(a * 512.0f);
    }
    uint32_t ab = bits & 0x7fffffffu;
    /* Keep 3 of the 23 mantissa bits, rounding the 20 dropped ones to nearest even; a carry
     * moves into the exponent, as it should. */
    uint32_t r = ab + 0x7ffffu + ((ab >> 20) & 1u);
    int exp = (int)(r >> 23) - 127 + 7;
    uint8_t code = (uint8_t)(exp << 3 | ((r >> 20) & 7u));
    return sign | (code > 0x7e ? 0x7e : code);
}

float folio_e4m3_to_f32(uint8_t c)
{
    int e = (c >> 3) & 15, m = c & 7;
    float v;
    if ((c & 0x7f) == 0x7f)
        v = NAN;
    else if (e == 0)
        v = ldexpf((float)m, -9);
    else
        v = ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return c & 0x80 ? -v : v;
}

static float e4m3_values[256];
static pthread_once_t e4m3_once = PTHREAD_ONCE_INIT;

static void e4m3_fill(void)
{
    for (int c = 0; c < 256; c++)
        e4m3_values[c] = folio_e4m3_to_f32((uint8_t)c);
}

const float *folio_e4m3_table(void)
{
    pthread_once(&e4m3_once, e4m3_fill);
    return e4m3_values;
}

float folio_fp8_scale(float amax)
{
    float s = amax / FOLIO_FP8_MAX;
    return s > FOLIO_FP8_MIN_SCALE ? s : FOLIO_FP8_MIN_SCALE;
}

float folio_fp8_quantize_row(const float *x, size_t n, uint8_t *q)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float s = folio_fp8_scale(amax);
    for (size_t i = 0; i < n; i++)
        q[i] = folio_e4m3_from_f32(x[i] / s);
    return s;
}
