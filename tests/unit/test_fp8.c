/* common/fp8.h: the e4m3 codec every backend's `--quantization fp8` rounds with, and the rule of
 * a quantized row. Every one of the 256 codes decodes to the value the OCP spec gives it and
 * encodes back to itself; a value between two neighbours goes to the nearer, a tie to the even
 * code; everything past 448 saturates; and a matrix quantized row by row comes back within half
 * a step of each value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fp8.h"

/* The spec's value of code c, computed another way than fp8.c does. */
static double spec_value(int c)
{
    int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    double v = e ? (8 + m) * pow(2, e - 10) : m * pow(2, -9);
    return s ? -v : v;
}

static unsigned rng = 11;
static float frand(void)
{
    rng = rng * 1103515245u + 12345u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

int main(void)
{
    /* Every code: its value, and back. */
    for (int c = 0; c < 256; c++) {
        float v = folio_e4m3_to_f32((uint8_t)c);
        if ((c & 0x7f) == 0x7f) {
            CHECK(isnan(v));
            CHECK((folio_e4m3_from_f32(v) & 0x7f) == 0x7f);
            continue;
        }
        CHECK((double)v == spec_value(c));
        CHECK(folio_e4m3_from_f32(v) == c); /* -0 included: 0x80 */
    }
    CHECK(folio_e4m3_to_f32(0x7e) == 448.0f && folio_e4m3_to_f32(0x01) == ldexpf(1, -9));
    CHECK(folio_e4m3_to_f32(0x08) == ldexpf(1, -6));

    /* Between each pair of neighbouring positive values: below the midpoint to the lower,
     * above to the upper, at it to the even code (the one whose mantissa's last bit is 0). */
    for (int c = 0; c < 0x7e; c++) {
        float lo = folio_e4m3_to_f32((uint8_t)c), hi = folio_e4m3_to_f32((uint8_t)(c + 1));
        float mid = (lo + hi) / 2; /* exact: both have few bits */
        CHECK(folio_e4m3_from_f32(nextafterf(mid, 0)) == c);
        CHECK(folio_e4m3_from_f32(nextafterf(mid, 1000)) == c + 1);
        int even = c % 2 == 0 ? c : c + 1;
        CHECK(folio_e4m3_from_f32(mid) == even);
        CHECK(folio_e4m3_from_f32(-mid) == (0x80 | even));
    }

    /* Saturation: the largest finite value for anything larger, infinities included. */
    const float big[] = {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, 3e38f, INFINITY};
    for (size_t i = 0; i < sizeof big / sizeof *big; i++) {
        CHECK(folio_e4m3_from_f32(big[i]) == 0x7e);
        CHECK(folio_e4m3_from_f32(-big[i]) == 0xfe);
    }
    CHECK(folio_e4m3_from_f32(ldexpf(1, -11)) == 0x00);     /* below half the least step */
    CHECK(folio_e4m3_from_f32(ldexpf(1.01f, -10)) == 0x01); /* above it */
    CHECK(folio_e4m3_from_f32(ldexpf(3, -10)) == 0x02);     /* 1.5 steps: a tie, to even 2 */
    CHECK((folio_e4m3_from_f32(NAN) & 0x7f) == 0x7f);

    /* The scale rule. */
    CHECK(folio_fp8_scale(448.0f) == 1.0f && folio_fp8_scale(0.0f) == FOLIO_FP8_MIN_SCALE);
    uint8_t zq[4];
    const float zeros[4] = {0};
    CHECK(folio_fp8_quantize_row(zeros, 4, zq) == FOLIO_FP8_MIN_SCALE);
    CHECK(zq[0] == 0 && zq[3] == 0);

    /* A matrix quantized per row: each row's largest magnitude lands on +-448, and every value
     * comes back within half a step (1/16 of it for normal codes, half the subnormal step
     * 2^-10 * s below them). */
    enum { ROWS = 64, COLS = 96 };
    static float w[ROWS][COLS], back[ROWS][COLS];
    static uint8_t q[ROWS][COLS];
    float scales[ROWS];
    for (int r = 0; r < ROWS; r++) {
        float mag = ldexpf(1.0f, r % 24 - 8); /* rows of very different ranges */
        for (int c = 0; c < COLS; c++)
            w[r][c] = frand() * mag * (c == r % COLS ? 3.0f : 1.0f);
        scales[r] = folio_fp8_quantize_row(w[r], COLS, q[r]);
        float amax = 0;
        for (int c = 0; c < COLS; c++)
            amax = fmaxf(amax, fabsf(w[r][c]));
        CHECK(scales[r] == amax / 448.0f);
        int at_max = 0;
        for (int c = 0; c < COLS; c++) {
            back[r][c] = folio_e4m3_to_f32(q[r][c]) * scales[r];
            at_max += (q[r][c] & 0x7f) == 0x7e;
            float err = fabsf(back[r][c] - w[r][c]);
            CHECK(err <= fabsf(w[r][c]) / 16 + ldexpf(scales[r], -10));
        }
        CHECK(at_max >= 1);
    }
    /* Quantizing the dequantized matrix again changes nothing: the codes are a fixed point. */
    for (int r = 0; r < ROWS; r++) {
        uint8_t q2[COLS];
        CHECK(folio_fp8_quantize_row(back[r], COLS, q2) == scales[r]);
        CHECK(memcmp(q2, q[r], COLS) == 0);
    }

    enum folio_quantization qz;
    CHECK(folio_quantization_parse(NULL, &qz) == 0 && qz == FOLIO_QUANT_NONE);
    CHECK(folio_quantization_parse("fp8", &qz) == 0 && qz == FOLIO_QUANT_FP8);
    CHECK(folio_quantization_parse("awq", &qz) == -1);
    return check_report();
}
