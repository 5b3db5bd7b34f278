/* The CPU backend's kernel tables (worker/cpu_kernels.h) on random rows: each table the processor
 * runs against exact sums in double over the same packed values and quantized activations, for
 * every type and every token count of a tile; one token's result the same whatever the tile;
 * the activation quantizer, f16 helpers, and every table's quantizer the scalar one's, bit for bit.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu_kernels.h"
#include "fp8.h"
#include "safetensors.h"

#define COLS 608 /* 19 blocks: an odd count, so the 512-bit kernels' one-block tail runs */
#define NB (COLS / CPU_QBLOCK)
#define ROW_MAX (COLS * 4)

static unsigned rng = 7;
static float frand(void)
{
    rng = rng * 1103515245u + 12345u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* A random row of each type and its values as floats. */
static void make_row(enum cpu_wtype t, unsigned char *row, float *vals)
{
    memset(row, 0, ROW_MAX);
    for (int i = 0; i < COLS; i++)
        vals[i] = frand();
    switch (t) {
    case CPU_W_F32:
        memcpy(row, vals, COLS * sizeof(float));
        return;
    case CPU_W_F16:
    case CPU_W_BF16:
        for (int i = 0; i < COLS; i++) {
            uint16_t h = t == CPU_W_F16 ? folio_f32_to_f16(vals[i]) : folio_f32_to_bf16(vals[i]);
            memcpy(row + 2 * i, &h, 2);
            vals[i] = t == CPU_W_F16 ? folio_f16_to_f32(h) : folio_bf16_to_f32(h);
        }
        return;
    case CPU_W_Q4: {
        float *d = (float *)(row + NB * 16), *m = d + NB;
        for (int k = 0; k < NB; k++) {
            d[k] = 0.01f + 0.02f * fabsf(frand());
            m[k] = frand() * 0.1f;
            for (int j = 0; j < 16; j++) {
                unsigned lo = (rng >> 3) & 15, hi = (rng >> 11) & 15;
                frand();
                row[k * 16 + j] = (unsigned char)(lo | hi << 4);
                vals[k * 32 + j] = (float)lo * d[k] + m[k];
                vals[k * 32 + j + 16] = (float)hi * d[k] + m[k];
            }
        }
        return;
    }
    case CPU_W_Q8: {
        float *d = (float *)(row + NB * 32);
        for (int k = 0; k < NB; k++) {
            d[k] = 0.001f + 0.01f * fabsf(frand());
            for (int j = 0; j < 32; j++) {
                int q = (int)(frand() * 127.0f);
                if (k == 0 && j == 0)
                    q = -128; /* the file format allows it; the kernels must too */
                row[k * 32 + j] = (unsigned char)(int8_t)q;
                vals[k * 32 + j] = (float)q * d[k];
            }
        }
        return;
    }
    case CPU_W_E4M3: {
        float sc = folio_fp8_quantize_row(vals, COLS, row);
        memcpy(row + cpu_e4m3_scale_offset(COLS), &sc, sizeof sc);
        for (int i = 0; i < COLS; i++)
            vals[i] = folio_e4m3_to_f32(row[i]) * sc;
        return;
    }
    default:
        return;
    }
}

int main(void)
{
    const struct cpu_kernels *tables[] = {&cpu_kernels_scalar, cpu_kernels_avx2(),
                                          cpu_kernels_avx512()};
    static unsigned char row[ROW_MAX];
    static float vals[COLS], x[CPU_TOK_TILE][COLS], xq[CPU_TOK_TILE][COLS];
    static int8_t q[CPU_TOK_TILE][COLS];
    static float d[CPU_TOK_TILE][NB], s[CPU_TOK_TILE][NB];
    static float x8[CPU_TOK_TILE][COLS], x8s[CPU_TOK_TILE], x8q[CPU_TOK_TILE][COLS];
    for (int t = 0; t < CPU_TOK_TILE; t++)
        for (int i = 0; i < COLS; i++)
            x[t][i] = frand() * (i % 7 == 0 ? 4.0f : 1.0f);
    for (int t = 0; t < CPU_TOK_TILE; t++) {
        cpu_kernels_scalar.quantize(x[t], COLS, q[t], d[t], s[t]);
        for (int i = 0; i < COLS; i++) {
            xq[t][i] = (float)q[t][i] * d[t][i / 32];
            CHECK(fabsf(xq[t][i] - x[t][i]) <= d[t][i / 32] * 0.5f + 1e-7f);
        }
        for (int k = 0; k < NB; k++) {
            int32_t sum = 0;
            for (int j = 0; j < 32; j++)
                sum += q[t][k * 32 + j];
            CHECK(s[t][k] == d[t][k] * (float)sum);
        }
    }
    for (int t = 0; t < CPU_TOK_TILE; t++) { /* the e4m3 form, as cpu_matmul makes it */
        uint8_t codes[COLS];
        x8s[t] = folio_fp8_quantize_row(x[t], COLS, codes);
        for (int i = 0; i < COLS; i++) {
            x8[t][i] = folio_e4m3_to_f32(codes[i]);
            x8q[t][i] = x8[t][i] * x8s[t];
            CHECK(fabsf(x8q[t][i] - x[t][i]) <= fabsf(x[t][i]) / 16 + x8s[t] / 512);
        }
    }
    struct cpu_qact qa = {&q[0][0], &d[0][0], &s[0][0], COLS, &x8[0][0], x8s};
    int tested = 0;
    for (size_t ti = 0; ti < sizeof tables / sizeof *tables; ti++) {
        const struct cpu_kernels *k = tables[ti];
        if (!k)
            continue;
        tested++;
        for (int t = 0; t < CPU_TOK_TILE; t++) {
            int8_t q2[COLS];
            float d2[NB], s2[NB];
            k->quantize(x[t], COLS, q2, d2, s2);
            CHECK(memcmp(q2, q[t], sizeof q2) == 0 && memcmp(d2, d[t], sizeof d2) == 0 &&
                  memcmp(s2, s[t], sizeof s2) == 0);
        }
        for (int type = 0; type < CPU_W_NUM_TYPES; type++) {
            make_row((enum cpu_wtype)type, row, vals);
            bool packed = type == CPU_W_Q4 || type == CPU_W_Q8;
            float want[CPU_TOK_TILE], one[CPU_TOK_TILE], scale[CPU_TOK_TILE];
            for (int t = 0; t < CPU_TOK_TILE; t++) {
                double acc = 0, mag = 0;
                for (int i = 0; i < COLS; i++) {
                    double a = packed ? xq[t][i] : type == CPU_W_E4M3 ? x8q[t][i] : x[t][i];
                    acc += (double)vals[i] * a;
                    mag += fabs((double)vals[i] * a);
                }
                want[t] = (float)acc;
                scale[t] = (float)mag;
            }
            for (int t = 0; t < CPU_TOK_TILE; t++)
                k->dot[type](row, COLS, x[t], COLS,
                             &(struct cpu_qact){q[t], d[t], s[t], COLS, x8[t], &x8s[t]}, 1, &one[t],
                             1);
            for (int nt = 1; nt <= CPU_TOK_TILE; nt++) {
                float y[CPU_TOK_TILE * 3];
                k->dot[type](row, COLS, &x[0][0], COLS, &qa, nt, y, 3);
                for (int t = 0; t < nt; t++) {
                    bool near = fabsf(y[3 * t] - want[t]) <= 2e-6f * scale[t];
                    if (!near)
                        fprintf(stderr, "%s type %d nt %d token %d: %g, want %g\n", k->name, type,
                                nt, t, y[3 * t], want[t]);
                    CHECK(near);
                    CHECK(y[3 * t] == one[t]); /* the same sums in a tile of any size */
                }
            }
        }
        uint16_t h[COLS];
        float o[COLS], o_want[COLS];
        k->to_f16(h, x[0], COLS);
        double dot_want = 0;
        for (int i = 0; i < COLS; i++) {
            CHECK(h[i] == folio_f32_to_f16(x[0][i]));
            dot_want += (double)x[1][i] * folio_f16_to_f32(h[i]);
            o[i] = o_want[i] = x[2][i];
            o_want[i] += 0.5f * folio_f16_to_f32(h[i]);
        }
        CHECK(fabs(k->dot_f16(x[1], h, COLS) - dot_want) < 1e-3);
        k->axpy_f16(o, 0.5f, h, COLS);
        for (int i = 0; i < COLS; i++)
            CHECK(fabsf(o[i] - o_want[i]) < 1e-6f);
    }
    printf("kernel tables tested: %d (best: %s)\n", tested, cpu_kernels_best()->name);
    CHECK(tested >= 1);
    return check_report();
}
