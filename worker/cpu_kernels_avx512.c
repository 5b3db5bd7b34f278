/* The kernels for processors with AVX-512 VNNI (BW, VL): the packed types' integer dot products
 * two blocks at a time in 512-bit registers with vpdpbusd; everything else is AVX2's table. */
#include "cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <pthread.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

AVX512 static inline float dot_scales(const float *a, const float *b, int n)
{
    __m512 acc = _mm512_setzero_ps();
    int k = 0;
    for (; k + 16 <= n; k += 16)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), acc);
    __mmask16 m = (__mmask16)((1u << (n - k)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + k), _mm512_maskz_loadu_ps(m, b + k), acc);
    return _mm512_reduce_add_ps(acc);
}

/* Blocks k and k + 1's scales as [s[k] x 8, s[k + 1] x 8]. */
AVX512 static inline __m512 pair_scales(const float *s, int k)
{
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m128 two = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(s + k)));
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(two));
}

/* Two Q4 blocks' 32 bytes as their 64 values in order. */
AVX512 static inline __m512i nibbles2(const unsigned char *b)
{
    __m256i raw = _mm256_loadu_si256((const __m256i *)b);
    __m256i lo = _mm256_and_si256(raw, _mm256_set1_epi8(0x0f));
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0f));
    __m512i c = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    return _mm512_shuffle_i64x2(c, c, _MM_SHUFFLE(3, 1, 2, 0));
}

/* One Q4 block's 16 bytes as its 32 values. */
AVX512 static inline __m256i nibbles1(const unsigned char *b)
{
    __m128i raw = _mm_loadu_si128((const __m128i *)b);
    __m128i lo = _mm_and_si128(raw, _mm_set1_epi8(0x0f));
    __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0f));
    return _mm256_set_m128i(hi, lo);
}

/* The integer sums of one row's unsigned weights against the tokens' int8 activations, scaled
 * per block and accumulated; u8_bias: the weights were stored signed and offset by 128
 * (Q8), which the sum against 128 takes back out exactly. */
#define DOT_BLOCKS(LOAD2, LOAD1, U8_BIAS)                                                          \
    __m512 acc[CPU_TOK_TILE];                                                                      \
    __m256 acc1[CPU_TOK_TILE];                                                                     \
    for (int t = 0; t < nt; t++) {                                                                 \
        acc[t] = _mm512_setzero_ps();                                                              \
        acc1[t] = _mm256_setzero_ps();                                                             \
    }                                                                                              \
    int k = 0;                                                                                     \
    for (; k + 2 <= nb; k += 2) {                                                                  \
        __m512i w = LOAD2;                                                                         \
        __m512 sw = pair_scales(dw, k);                                                            \
        for (int t = 0; t < nt; t++) {                                                             \
            __m512i a = _mm512_loadu_si512(qa->q + (size_t)t * cols + (size_t)k * CPU_QBLOCK);     \
            __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, a);                         \
            if (U8_BIAS)                                                                           \
                p = _mm512_sub_epi32(                                                              \
                    p, _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(-128), a));    \
            __m512 sc = _mm512_mul_ps(sw, pair_scales(qa->d + (size_t)t * nb, k));                 \
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), sc, acc[t]);                           \
        }                                                                                          \
    }                                                                                              \
    for (; k < nb; k++) {                                                                          \
        __m256i w = LOAD1;                                                                         \
        for (int t = 0; t < nt; t++) {                                                             \
            __m256i a = _mm256_loadu_si256(                                                        \
                (const __m256i *)(qa->q + (size_t)t * cols + (size_t)k * CPU_QBLOCK));             \
            __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, a);                         \
            if (U8_BIAS)                                                                           \
                p = _mm256_sub_epi32(                                                              \
                    p, _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(-128), a));    \
            __m256 sc = _mm256_set1_ps(dw[k] * qa->d[(size_t)t * nb + k]);                         \
            acc1[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sc, acc1[t]);                         \
        }                                                                                          \
    }

AVX512 static inline float reduce(__m512 a, __m256 b)
{
    return _mm512_reduce_add_ps(_mm512_add_ps(a, _mm512_castps256_ps512(b)));
}

/* The kernels' bodies for a fixed token count, so that the accumulators stay in registers. */
AVX512 static inline __attribute__((always_inline)) void q4_body(const unsigned char *row, int cols,
                                                                 const struct cpu_qact *qa,
                                                                 const int nt, float *y, size_t ldy)
{
    int nb = cols / CPU_QBLOCK;
    const float *dw = (const float *)(row + (size_t)nb * 16), *mw = dw + nb;
    DOT_BLOCKS(nibbles2(row + (size_t)k * 16), nibbles1(row + (size_t)k * 16), 0)
    for (int t = 0; t < nt; t++)
        y[(size_t)t * ldy] = reduce(acc[t], acc1[t]) + dot_scales(mw, qa->s + (size_t)t * nb, nb);
}

AVX512 static inline __attribute__((always_inline)) void q8_body(const unsigned char *row, int cols,
                                                                 const struct cpu_qact *qa,
                                                                 const int nt, float *y, size_t ldy)
{
    int nb = cols / CPU_QBLOCK;
    const float *dw = (const float *)(row + (size_t)nb * 32);
    const __m512i flip = _mm512_set1_epi8(-128);
    DOT_BLOCKS(_mm512_xor_si512(_mm512_loadu_si512(row + (size_t)k * 32), flip),
               _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(row + (size_t)k * 32)),
                                _mm512_castsi512_si256(flip)),
               1)
    for (int t = 0; t < nt; t++)
        y[(size_t)t * ldy] = reduce(acc[t], acc1[t]);
}

AVX512 static void dot_q4(const unsigned char *row, int cols, const float *x, size_t ldx,
                          const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)x;
    (void)ldx;
    switch (nt) {
    case 1:
        q4_body(row, cols, qa, 1, y, ldy);
        return;
    case 2:
        q4_body(row, cols, qa, 2, y, ldy);
        return;
    case 3:
        q4_body(row, cols, qa, 3, y, ldy);
        return;
    default:
        q4_body(row, cols, qa, 4, y, ldy);
        return;
    }
}

AVX512 static void dot_q8(const unsigned char *row, int cols, const float *x, size_t ldx,
                          const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)x;
    (void)ldx;
    switch (nt) {
    case 1:
        q8_body(row, cols, qa, 1, y, ldy);
        return;
    case 2:
        q8_body(row, cols, qa, 2, y, ldy);
        return;
    case 3:
        q8_body(row, cols, qa, 3, y, ldy);
        return;
    default:
        q8_body(row, cols, qa, 4, y, ldy);
        return;
    }
}

static struct cpu_kernels table;
static const struct cpu_kernels *chosen;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    __builtin_cpu_init();
    const struct cpu_kernels *base = cpu_kernels_avx2();
    if (!base || !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512vnni"))
        return;
    table = *base;
    table.name = "avx512vnni";
    table.dot[CPU_W_Q4] = dot_q4;
    table.dot[CPU_W_Q8] = dot_q8;
    chosen = &table;
}

const struct cpu_kernels *cpu_kernels_avx512(void)
{
    pthread_once(&once, choose);
    return chosen;
}

#else
const struct cpu_kernels *cpu_kernels_avx512(void)
{
    return NULL;
}
#endif
