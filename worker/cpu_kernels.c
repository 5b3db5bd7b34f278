/* The portable kernels (any processor) and the choice of a table at run time. */
#include "cpu_kernels.h"

#include <math.h>
#include <string.h>

#include "fp8.h"
#include "safetensors.h" /* folio_f16_to_f32 and friends */

size_t cpu_row_bytes(enum cpu_wtype t, int cols)
{
    size_t nb = (size_t)cols / CPU_QBLOCK;
    switch (t) {
    case CPU_W_F32:
        return (size_t)cols * 4;
    case CPU_W_F16:
    case CPU_W_BF16:
        return (size_t)cols * 2;
    case CPU_W_Q4:
        return nb * (16 + 2 * sizeof(float));
    case CPU_W_Q8:
        return nb * (32 + sizeof(float));
    case CPU_W_E4M3:
        return cpu_e4m3_scale_offset(cols) + sizeof(float);
    default:
        return 0;
    }
}

static void dot_f32(const unsigned char *row, int cols, const float *x, size_t ldx,
                    const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)qa;
    const float *w = (const float *)row;
    for (int t = 0; t < nt; t++) {
        const float *xt = x + (size_t)t * ldx;
        float acc = 0.0f;
        for (int i = 0; i < cols; i++)
            acc += w[i] * xt[i];
        y[(size_t)t * ldy] = acc;
    }
}

static void dot_half(const unsigned char *row, int cols, const float *x, size_t ldx, int nt,
                     float *y, size_t ldy, int bf16)
{
    const uint16_t *w = (const uint16_t *)row;
    for (int t = 0; t < nt; t++) {
        const float *xt = x + (size_t)t * ldx;
        float acc = 0.0f;
        for (int i = 0; i < cols; i++)
            acc += (bf16 ? folio_bf16_to_f32(w[i]) : folio_f16_to_f32(w[i])) * xt[i];
        y[(size_t)t * ldy] = acc;
    }
}

static void dot_f16w(const unsigned char *row, int cols, const float *x, size_t ldx,
                     const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)qa;
    dot_half(row, cols, x, ldx, nt, y, ldy, 0);
}

static void dot_bf16w(const unsigned char *row, int cols, const float *x, size_t ldx,
                      const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)qa;
    dot_half(row, cols, x, ldx, nt, y, ldy, 1);
}

static void dot_q4(const unsigned char *row, int cols, const float *x, size_t ldx,
                   const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)x;
    (void)ldx;
    int nb = cols / CPU_QBLOCK;
    const unsigned char *nib = row;
    const float *dw = (const float *)(row + (size_t)nb * 16), *mw = dw + nb;
    for (int t = 0; t < nt; t++) {
        const int8_t *a = qa->q + (size_t)t * cols;
        const float *da = qa->d + (size_t)t * nb, *sa = qa->s + (size_t)t * nb;
        float acc = 0.0f, macc = 0.0f;
        for (int k = 0; k < nb; k++) {
            const unsigned char *b = nib + (size_t)k * 16;
            const int8_t *ak = a + (size_t)k * CPU_QBLOCK;
            int32_t sum = 0;
            for (int j = 0; j < 16; j++)
                sum += (b[j] & 0xf) * ak[j] + (b[j] >> 4) * ak[j + 16];
            acc += dw[k] * da[k] * (float)sum;
            macc += mw[k] * sa[k];
        }
        y[(size_t)t * ldy] = acc + macc;
    }
}

static void dot_q8(const unsigned char *row, int cols, const float *x, size_t ldx,
                   const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)x;
    (void)ldx;
    int nb = cols / CPU_QBLOCK;
    const int8_t *qw = (const int8_t *)row;
    const float *dw = (const float *)(row + (size_t)nb * 32);
    for (int t = 0; t < nt; t++) {
        const int8_t *a = qa->q + (size_t)t * cols;
        const float *da = qa->d + (size_t)t * nb;
        float acc = 0.0f;
        for (int k = 0; k < nb; k++) {
            int32_t sum = 0;
            for (int j = 0; j < CPU_QBLOCK; j++)
                sum += qw[k * CPU_QBLOCK + j] * a[k * CPU_QBLOCK + j];
            acc += dw[k] * da[k] * (float)sum;
        }
        y[(size_t)t * ldy] = acc;
    }
}

/* An e4m3 row against e4m3 tokens: the codes' products summed in f32 (each exact), then the
 * row's and the token's scales, as a W8A8 GEMM with outer-product scales computes it. */
static void dot_e4m3(const unsigned char *row, int cols, const float *x, size_t ldx,
                     const struct cpu_qact *qa, int nt, float *y, size_t ldy)
{
    (void)x;
    (void)ldx;
    const float *lut = folio_e4m3_table();
    float ws;
    memcpy(&ws, row + cpu_e4m3_scale_offset(cols), sizeof ws);
    for (int t = 0; t < nt; t++) {
        const float *a = qa->x8 + (size_t)t * cols;
        float acc = 0.0f;
        for (int i = 0; i < cols; i++)
            acc += lut[row[i]] * a[i];
        y[(size_t)t * ldy] = acc * ws * qa->x8_scale[t];
    }
}

static void quantize(const float *x, int cols, int8_t *q, float *d, float *s)
{
    for (int k = 0; k < cols / CPU_QBLOCK; k++) {
        const float *xb = x + (size_t)k * CPU_QBLOCK;
        float amax = 0.0f;
        for (int j = 0; j < CPU_QBLOCK; j++)
            amax = fmaxf(amax, fabsf(xb[j]));
        float dk = amax / 127.0f, id = dk > 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < CPU_QBLOCK; j++) {
            int v = (int)nearbyintf(xb[j] * id);
            q[k * CPU_QBLOCK + j] = (int8_t)v;
            sum += v;
        }
        d[k] = dk;
        s[k] = dk * (float)sum;
    }
}

static float dot_f16(const float *q, const uint16_t *k, int n)
{
    float acc = 0.0f;
    for (int i = 0; i < n; i++)
        acc += q[i] * folio_f16_to_f32(k[i]);
    return acc;
}

static void axpy_f16(float *o, float w, const uint16_t *v, int n)
{
    for (int i = 0; i < n; i++)
        o[i] += w * folio_f16_to_f32(v[i]);
}

static void to_f16(uint16_t *dst, const float *src, int n)
{
    for (int i = 0; i < n; i++)
        dst[i] = folio_f32_to_f16(src[i]);
}

const struct cpu_kernels cpu_kernels_scalar = {
    .name = "scalar",
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

const struct cpu_kernels *cpu_kernels_best(void)
{
    const struct cpu_kernels *k = cpu_kernels_avx512();
    if (!k)
        k = cpu_kernels_avx2();
    return k ? k : &cpu_kernels_scalar;
}
