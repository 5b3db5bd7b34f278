/* The CPU backend's inner loops, one table per instruction set (scalar, AVX2, AVX-512 VNNI),
 * picked once at run time by what the processor supports, so one binary runs everywhere and
 * uses what it finds.
 *
 * Packed weight rows (cpu_matrix.h) meet activations in the form their type wants: rows of
 * 4- and 8-bit blocks meet activations quantized per 32 values to int8 (llama.cpp's q8_1:
 * a scale d and s = d * the block's sum), with integer dot products per block; rows of
 * f32/f16/bf16 meet the f32 activations. Every kernel computes each token's sums in the same
 * order whatever the number of tokens it is given, so results do not depend on batching. */
#ifndef FOLIO_CPU_KERNELS_H
#define FOLIO_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Values per quantization block, of weights and of activations. */
#define CPU_QBLOCK 32
/* The most tokens one kernel call takes against a weight row (read once for all of them). */
#define CPU_TOK_TILE 4

enum cpu_wtype {
    CPU_W_F32,
    CPU_W_F16,
    CPU_W_BF16,
    CPU_W_Q4,   /* Q4_1's blocks: x = q * d + m, q in [0, 15]; Q4_0 is m = -8 d */
    CPU_W_Q8,   /* Q8_0's blocks: x = q * d, q in [-127, 127] */
    CPU_W_E4M3, /* --quantization fp8: e4m3 codes and the row's f32 scale (common/fp8.h) */
    CPU_W_NUM_TYPES,
};

/* Rows of activations for the packed types: per token, cols int8 values and per block the
 * scale d and s = d * (the sum of its int8 values). For CPU_W_E4M3 rows, the tokens quantized
 * to e4m3 instead (common/fp8.h): the codes' values as floats and each token's scale. */
struct cpu_qact {
    const int8_t *q; /* [ntok][cols] */
    const float *d;  /* [ntok][cols / CPU_QBLOCK] */
    const float *s;  /* [ntok][cols / CPU_QBLOCK] */
    int cols;
    const float *x8;       /* [ntok][cols]: e4m3 values, unscaled */
    const float *x8_scale; /* [ntok] */
};

/* y[t * ldy] = row . token t, for t in [0, nt), nt <= CPU_TOK_TILE: the activations start at
 * token 0 of x (a float row stride of ldx) or of qa. */
typedef void (*cpu_dot_fn)(const unsigned char *row, int cols, const float *x, size_t ldx,
                           const struct cpu_qact *qa, int nt, float *y, size_t ldy);

struct cpu_kernels {
    const char *name;
    cpu_dot_fn dot[CPU_W_NUM_TYPES];
    /* One token's row x[cols] quantized per block (cols % CPU_QBLOCK == 0). */
    void (*quantize)(const float *x, int cols, int8_t *q, float *d, float *s);
    /* q . k for an f16 k of n values. */
    float (*dot_f16)(const float *q, const uint16_t *k, int n);
    /* o += w * v for an f16 v of n values. */
    void (*axpy_f16)(float *o, float w, const uint16_t *v, int n);
    /* dst (f16) = src (f32), rounded to nearest even. */
    void (*to_f16)(uint16_t *dst, const float *src, int n);
};

/* The fastest table this processor runs; FOLIO's own choice of none beyond that. */
const struct cpu_kernels *cpu_kernels_best(void);

/* The tables, for the tests that hold each to the scalar one (NULL where the processor or the
 * compiler lacks the instructions). */
extern const struct cpu_kernels cpu_kernels_scalar;
const struct cpu_kernels *cpu_kernels_avx2(void);
const struct cpu_kernels *cpu_kernels_avx512(void);

/* Row bytes of each packed type (before padding), for cols % CPU_QBLOCK == 0 where packed. */
size_t cpu_row_bytes(enum cpu_wtype t, int cols);

/* Where a CPU_W_E4M3 row keeps its scale: after its codes, 4-byte aligned. */
static inline size_t cpu_e4m3_scale_offset(int cols)
{
    return ((size_t)cols + 3) / 4 * 4;
}

#endif
