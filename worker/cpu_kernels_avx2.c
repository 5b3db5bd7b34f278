/* The kernels for processors with AVX2, FMA and F16C (x86-64 since 2013): compiled for those
 * instructions alone (the target attribute), called only where the processor has them. */
#include "cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "fp8.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* A Q4 block's 16 bytes as its 32 values in order (low nibbles first). */
AVX2 static inline __m256i nibbles(const unsigned char *b)
{
    __m128i raw = _mm_loadu_si128((const __m128i *)b);
    __m128i lo = _mm_and_si128(raw, _mm_set1_epi8(0x0f));
    __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0f));
    return _mm256_set_m128i(hi, lo);
}

/* sum over k of a[k] * b[k] for n floats (the Q4 blocks' min term). */
AVX2 static inline float dot_scales(const float *a, const float *b, int n)
{
    __m256 acc = _mm256_setzero_ps();
    int k = 0;
    for (; k + 8 <= n; k += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    float s = hsum(acc);
    for (; k < n; k++)
        s += a[k] * b[k];
    return s;
}

AVX2 static inline __attribute__((always_inline)) void q4_body(const unsigned char *row, int cols,
                                                               const struct cpu_qact *qa,
                                                               const int nt, float *y, size_t ldy)
{
    int nb = cols / CPU_QBLOCK;
    const float *dw = (const float *)(row + (size_t)nb * 16), *mw = dw + nb;
    __m256 acc[CPU_TOK_TILE];
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int k = 0; k < nb; k++) {
        __m256i w = nibbles(row + (size_t)k * 16);
        for (int t = 0; t < nt; t++) {
            __m256i a = _mm256_loadu_si256(
                (const __m256i *)(qa->q + (size_t)t * cols + (size_t)k * CPU_QBLOCK));
            __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), ones);
            __m256 scale = _mm256_set1_ps(dw[k] * qa->d[(size_t)t * nb + k]);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc[t]);
        }
    }
    for (int t = 0; t < nt; t++)
        y[(size_t)t * ldy] = hsum(acc[t]) + dot_scales(mw, qa->s + (size_t)t * nb, nb);
}

AVX2 static inline __attribute__((always_inline)) void q8_body(const unsigned char *row, int cols,
                                                               const struct cpu_qact *qa,
                                                               const int nt, float *y, size_t ldy)
{
    int nb = cols / CPU_QBLOCK;
    const float *dw = (const float *)(row + (size_t)nb * 32);
    __m256 acc[CPU_TOK_TILE];
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int k = 0; k < nb; k++) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(row + (size_t)k * 32));
        __m256i wabs = _mm256_sign_epi8(w, w);
        for (int t = 0; t < nt; t++) {
            __m256i a = _mm256_loadu_si256(
                (const __m256i *)(qa->q + (size_t)t * cols + (size_t)k * CPU_QBLOCK));
            /* |w| * (a with w's sign): maddubs takes one unsigned operand. */
            __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a, w)), ones);
            __m256 scale = _mm256_set1_ps(dw[k] * qa->d[(size_t)t * nb + k]);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc[t]);
        }
    }
    for (int t = 0; t < nt; t++)
        y[(size_t)t * ldy] = hsum(acc[t]);
}

/* One function per kernel body for each token count, so that the accumulators stay in
 * registers. */
#define BY_TOKEN_COUNT(name, body)                                                                 \
    AVX2 static void name(const unsigned char *row, int cols, const float *x, size_t ldx,          \
                          const struct cpu_qact *qa, int nt, float *y, size_t ldy)                 \
    {                                                                                              \
        (void)x;                                                                                   \
        (void)ldx;                                                                                 \
        switch (nt) {                                                                              \
        case 1:                                                                                    \
            body(row, cols, qa, 1, y, ldy);                                                        \
            return;                                                                                \
        case 2:                                                                                    \
            body(row, cols, qa, 2, y, ldy);                                                        \
            return;                                                                                \
        case 3:                                                                                    \
            body(row, cols, qa, 3, y, ldy);                                                        \
            return;                                                                                \
        default:                                                                                   \
            body(row, cols, qa, 4, y, ldy);                                                        \
            return;                                                                                \
        }                                                                                          \
    }
BY_TOKEN_COUNT(dot_q4, q4_body)
BY_TOKEN_COUNT(dot_q8, q8_body)

/* The f32/f16/bf16 rows: 8 values at a time, widened to f32. */
AVX2 static inline __m256 load8(const unsigned char *row, int i, enum cpu_wtype type)
{
    if (type == CPU_W_F32)
        return _mm256_loadu_ps((const float *)row + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
    if (type == CPU_W_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

AVX2 static inline float widen1(const unsigned char *row, int i, enum cpu_wtype type)
{
    if (type == CPU_W_F32)
        return ((const float *)row)[i];
    uint16_t h = ((const uint16_t *)row)[i];
    if (type == CPU_W_F16)
        return _cvtsh_ss(h);
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)h << 16};
    return v.f;
}

AVX2 static inline __attribute__((always_inline)) void dot_float(const unsigned char *row, int cols,
                                                                 const float *x, size_t ldx, int nt,
                                                                 float *y, size_t ldy,
                                                                 enum cpu_wtype type)
{
    __m256 acc[CPU_TOK_TILE];
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= cols; i += 8) {
        __m256 w = load8(row, i, type);
        for (int t = 0; t < nt; t++)
            acc[t] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + (size_t)t * ldx + i), acc[t]);
    }
    for (int t = 0; t < nt; t++) {
        float s = hsum(acc[t]);
        for (int j = i; j < cols; j++)
            s += widen1(row, j, type) * x[(size_t)t * ldx + j];
        y[(size_t)t * ldy] = s;
    }
}

AVX2 static void dot_f32(const unsigned char *row, int cols, const float *x, size_t ldx,
                         const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)qa;
    dot_float(row, cols, x, ldx, nt, y, ldy, CPU_W_F32);
}

AVX2 static void dot_f16w(const unsigned char *row, int cols, const float *x, size_t ldx,
                          const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)qa;
    dot_float(row, cols, x, ldx, nt, y, ldy, CPU_W_F16);
}

AVX2 static void dot_bf16w(const unsigned char *row, int cols, const float *x, size_t ldx,
                           const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)qa;
    dot_float(row, cols, x, ldx, nt, y, ldy, CPU_W_BF16);
}

/* The same blocks as the scalar quantize: d and 1/d from the block's largest magnitude, each
 * value rounded to nearest even. */
AVX2 static void quantize(const float *x, int cols, int8_t *q, float *d, float *s)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int k = 0; k < cols / CPU_QBLOCK; k++) {
        const float *xb = x + (size_t)k * CPU_QBLOCK;
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(xb + 8 * j);
            m = _mm256_max_ps(m, _mm256_and_ps(v[j], absmask));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        float dk = amax / 127.0f, id = dk > 0.0f ? 127.0f / amax : 0.0f;
        __m256 vid = _mm256_set1_ps(id);
        __m256i i32[4];
        for (int j = 0; j < 4; j++)
            i32[j] = _mm256_cvtps_epi32(_mm256_round_ps(
                _mm256_mul_ps(v[j], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i sum =
            _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3]));
        /* Pack to int8 in order: packs interleaves 128-bit lanes, the permute puts them back. */
        __m256i p16a = _mm256_packs_epi32(i32[0], i32[1]);
        __m256i p16b = _mm256_packs_epi32(i32[2], i32[3]);
        __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + (size_t)k * CPU_QBLOCK), p8);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        d[k] = dk;
        s[k] = dk * (float)_mm_cvtsi128_si32(s4);
    }
}

AVX2 static float dot_f16(const float *q, const uint16_t *k, int n)
{
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i),
                              _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + i))), acc);
    float s = hsum(acc);
    for (; i < n; i++)
        s += q[i] * _cvtsh_ss(k[i]);
    return s;
}

/* 8 e4m3 codes as floats divided by 256: each code's bits moved into an f16's (sign, then
 * exponent and mantissa 7 places up) make that f16 equal to the value / 2^8, subnormals
 * included, and F16C widens 8 at once. (NaN codes come out finite; quantizing never makes
 * them.) */
AVX2 static inline __m256 e4m3x8(const unsigned char *c)
{
    __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)c));
    __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8),
                             _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7f)), 7));
    return _mm256_cvtph_ps(h);
}

/* dot_e4m3 of cpu_kernels.c: the sums of values / 256 scaled back by 256 (exact). */
AVX2 static void dot_e4m3(const unsigned char *row, int cols, const float *x, size_t ldx,
                          const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)x;
    (void)ldx;
    const float *lut = folio_e4m3_table();
    float ws;
    memcpy(&ws, row + cpu_e4m3_scale_offset(cols), sizeof ws);
    __m256 acc[CPU_TOK_TILE];
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= cols; i += 8) {
        __m256 w = e4m3x8(row + i);
        for (int t = 0; t < nt; t++)
            acc[t] = _mm256_fmadd_ps(w, _mm256_loadu_ps(qa->x8 + (size_t)t * cols + i), acc[t]);
    }
    for (int t = 0; t < nt; t++) {
        float s = hsum(acc[t]) * 256.0f;
        for (int j = i; j < cols; j++)
            s += lut[row[j]] * qa->x8[(size_t)t * cols + j];
        y[(size_t)t * ldy] = s * ws * qa->x8_scale[t];
    }
}

AVX2 static void axpy_f16(float *o, float w, const uint16_t *v, int n)
{
    __m256 vw = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(
            o + i, _mm256_fmadd_ps(vw, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i))),
                                   _mm256_loadu_ps(o + i)));
    for (; i < n; i++)
        o[i] += w * _cvtsh_ss(v[i]);
}

AVX2 static void to_f16(uint16_t *dst, const float *src, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

static const struct cpu_kernels table = {
    .name = "avx2",
    .dot = {[CPU_W_F32] = dot_f32,
            [CPU_W_F16] = dot_f16w,
            [CPU_W_BF16] = dot_bf16w,
            [CPU_W_Q4] = dot_q4,
            [CPU_W_Q8] = dot_q8,
            [CPU_W_E4M3] = dot_e4m3},
    .quantize = quantize,
    .dot_f16 = dot_f16,
    .axpy_f16 = axpy_f16,
    .to_f16 = to_f16,
};

const struct cpu_kernels *cpu_kernels_avx2(void)
{
    __builtin_cpu_init();
    /* F16C by CPUID (leaf 1, ECX bit 29): clang's __builtin_cpu_supports does not know it. */
    unsigned a, b, c, d;
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
        return &table;
    return NULL;
}

#else
const struct cpu_kernels *cpu_kernels_avx2(void)
{
    return NULL;
}
#endif
