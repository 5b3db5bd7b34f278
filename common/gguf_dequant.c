/* ggml's tensor types: their block geometry (for checking every tensor's size
 * in a GGUF file, whatever its type) and the dequantization of the types a
 * llama.cpp export of a Llama model uses. The block layouts are ggml's
 * (ggml-common.h): little-endian, an f16 scale first, then the packed values. */
#include "error.h"
#include "gguf.h"
#include "safetensors.h"

#include <stdio.h>
#include <string.h>

struct type_info {
    const char *name;
    int block, bytes; /* elements per block, bytes per block */
};

/* Every type ggml has defined up to this writing, so that a file with a type
 * Folio cannot compute is still parsed (its size checked) and the error is a
 * clear "cannot dequantize" naming the tensor. */
static const struct type_info types[] = {
    [0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},         [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},      [6] = {"Q5_0", 32, 22},      [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},      [9] = {"Q8_1", 32, 36},      [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},   [12] = {"Q4_K", 256, 144},   [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},   [15] = {"Q8_K", 256, 292},   [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},  [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},   [21] = {"IQ3_S", 256, 110},  [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},         [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},        [27] = {"I64", 1, 8},        [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},   [30] = {"BF16", 1, 2},       [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},   [39] = {"MXFP4", 32, 17},    [40] = {"NVFP4", 64, 36},
    [41] = {"Q1_0", 128, 18},
};
#define NUM_TYPES (sizeof types / sizeof *types)

const char *folio_ggml_type_name(uint32_t type)
{
    static _Thread_local char buf[24];
    if (type < NUM_TYPES && types[type].name)
        return types[type].name;
    snprintf(buf, sizeof buf, "type %u", type);
    return buf;
}

int folio_ggml_block_size(uint32_t type)
{
    return type < NUM_TYPES ? types[type].block : 0;
}

int folio_ggml_type_size(uint32_t type)
{
    return type < NUM_TYPES ? types[type].bytes : 0;
}

static float f16_at(const unsigned char *p)
{
    return folio_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* Q4_0: d, 16 bytes of nibbles; low nibbles are elements 0..15, high 16..31. */
static void dq_q4_0(const unsigned char *b, float *y)
{
    float d = f16_at(b);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((b[2 + j] & 0xf) - 8) * d;
        y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

/* Q4_1: d, m, nibbles: x = q*d + m. */
static void dq_q4_1(const unsigned char *b, float *y)
{
    float d = f16_at(b), m = f16_at(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(b[4 + j] & 0xf) * d + m;
        y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

/* Q5_0 / Q5_1: the fifth bits of the 32 values in a 32-bit word. */
static void dq_q5(const unsigned char *b, float *y, bool has_min)
{
    float d = f16_at(b), m = has_min ? f16_at(b + 2) : 0.0f;
    const unsigned char *qhp = b + (has_min ? 4 : 2), *qs = qhp + 4;
    uint32_t qh =
        (uint32_t)qhp[0] | (uint32_t)qhp[1] << 8 | (uint32_t)qhp[2] << 16 | (uint32_t)qhp[3] << 24;
    int offset = has_min ? 0 : 16;
    for (int j = 0; j < 16; j++) {
        int x0 = (int)((qs[j] & 0xf) | (((qh >> j) & 1u) << 4)) - offset;
        int x1 = (int)((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - offset;
        y[j] = (float)x0 * d + m;
        y[j + 16] = (float)x1 * d + m;
    }
}

static void dq_q8_0(const unsigned char *b, float *y)
{
    float d = f16_at(b);
    for (int j = 0; j < 32; j++)
        y[j] = (float)(int8_t)b[2 + j] * d;
}

/* Q4_K's 6-bit scale and min of sub-block j, packed in 12 bytes. */
static void scale_min_k4(int j, const unsigned char *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K: d, dmin, 12 bytes of scales/mins, 128 bytes of nibbles; 8 sub-blocks
 * of 32, each x = d*sc*q - dmin*m. */
static void dq_q4_k(const unsigned char *b, float *y)
{
    float d = f16_at(b), dmin = f16_at(b + 2);
    const unsigned char *scales = b + 4, *q = b + 16;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
        int sc, m;
        scale_min_k4(is, scales, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        scale_min_k4(is + 1, scales, &sc, &m);
        float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            y[j + l] = d1 * (float)(q[l] & 0xf) - m1;
            y[j + 32 + l] = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Q5_K: Q4_K with a fifth bit per value: d, dmin, 12 bytes of scales/mins,
 * 32 bytes of high bits (bit pair 2k, 2k+1 for sub-blocks 2k, 2k+1), 128 of
 * nibbles. */
static void dq_q5_k(const unsigned char *b, float *y)
{
    float d = f16_at(b), dmin = f16_at(b + 2);
    const unsigned char *scales = b + 4, *qh = b + 16, *ql = b + 48;
    unsigned u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
        int sc, m;
        scale_min_k4(is, scales, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        scale_min_k4(is + 1, scales, &sc, &m);
        float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            y[j + l] = d1 * (float)((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
            y[j + 32 + l] = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

/* Q2_K: 16 bytes of 4-bit scale/min pairs, 64 bytes of 2-bit values, d, dmin;
 * 16 sub-blocks of 16, each x = d*sc*q - dmin*m. */
static void dq_q2_k(const unsigned char *b, float *y)
{
    const unsigned char *scales = b, *q = b + 16;
    float d = f16_at(b + 80), dmin = f16_at(b + 82);
    int is = 0;
    for (int n = 0; n < 256; n += 128, q += 32) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++) {
                unsigned sc = scales[is++];
                float dl = d * (float)(sc & 0xf), ml = dmin * (float)(sc >> 4);
                for (int l = 0; l < 16; l++)
                    *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
            }
        }
    }
}

/* Q3_K: 32 bytes of high-bit masks, 64 of 2-bit values, 12 bytes packing
 * sixteen 6-bit scales (low nibbles in bytes 0-7, high pairs in 8-11), d; 16
 * sub-blocks of 16, each x = d*(sc-32)*(q - (high bit clear ? 4 : 0)). */
static void dq_q3_k(const unsigned char *b, float *y)
{
    const unsigned char *hm = b, *q = b + 32, *packed = b + 96;
    float d = f16_at(b + 108);
    int sc[16];
    for (int k = 0; k < 16; k++) {
        int low = k < 8 ? packed[k] & 0xf : packed[k - 8] >> 4;
        int high = (packed[8 + k % 4] >> (2 * (k / 4))) & 3;
        sc[k] = (low | high << 4) - 32;
    }
    int is = 0;
    unsigned m = 1;
    for (int n = 0; n < 256; n += 128, q += 32) {
        for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
            for (int half = 0; half < 2; half++) {
                float dl = d * (float)sc[is++];
                for (int l = 0; l < 16; l++) {
                    int i = l + 16 * half;
                    *y++ = dl * (float)((int)((q[i] >> shift) & 3) - (hm[i] & m ? 0 : 4));
                }
            }
        }
    }
}

/* Q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8 scales, d. */
static void dq_q6_k(const unsigned char *b, float *y)
{
    const unsigned char *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = f16_at(b + 208);
    for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = (int)((ql[l] & 0xf) | ((qh[l] & 3) << 4)) - 32;
            int q2 = (int)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[n + l] = d * (float)sc[is] * (float)q1;
            y[n + l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[n + l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[n + l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
    }
}

/* One block of type at b into y (block-size floats). */
static void dequantize_block(uint32_t type, const unsigned char *b, float *y)
{
    switch (type) {
    case FOLIO_GGML_F32: {
        uint32_t u =
            (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        memcpy(y, &u, 4);
        return;
    }
    case FOLIO_GGML_F16:
        y[0] = f16_at(b);
        return;
    case FOLIO_GGML_BF16:
        y[0] = folio_bf16_to_f32((uint16_t)(b[0] | b[1] << 8));
        return;
    case FOLIO_GGML_Q4_0:
        dq_q4_0(b, y);
        return;
    case FOLIO_GGML_Q4_1:
        dq_q4_1(b, y);
        return;
    case FOLIO_GGML_Q5_0:
        dq_q5(b, y, false);
        return;
    case FOLIO_GGML_Q5_1:
        dq_q5(b, y, true);
        return;
    case FOLIO_GGML_Q8_0:
        dq_q8_0(b, y);
        return;
    case FOLIO_GGML_Q4_K:
        dq_q4_k(b, y);
        return;
    case FOLIO_GGML_Q5_K:
        dq_q5_k(b, y);
        return;
    case FOLIO_GGML_Q2_K:
        dq_q2_k(b, y);
        return;
    case FOLIO_GGML_Q3_K:
        dq_q3_k(b, y);
        return;
    case FOLIO_GGML_Q6_K:
        dq_q6_k(b, y);
        return;
    }
}

bool folio_ggml_can_dequantize(uint32_t type)
{
    switch (type) {
    case FOLIO_GGML_F32:
    case FOLIO_GGML_F16:
    case FOLIO_GGML_BF16:
    case FOLIO_GGML_Q4_0:
    case FOLIO_GGML_Q4_1:
    case FOLIO_GGML_Q5_0:
    case FOLIO_GGML_Q5_1:
    case FOLIO_GGML_Q8_0:
    case FOLIO_GGML_Q2_K:
    case FOLIO_GGML_Q3_K:
    case FOLIO_GGML_Q4_K:
    case FOLIO_GGML_Q5_K:
    case FOLIO_GGML_Q6_K:
        return true;
    }
    return false;
}

int folio_gguf_dequantize(const struct folio_gguf_tensor *t, uint64_t first, uint64_t count,
                          float *out, char *err, size_t errlen)
{
    if (!folio_ggml_can_dequantize(t->type)) {
        folio_set_err(err, errlen,
                      "%s: tensor '%s': ggml type %s cannot be dequantized (supported: F32, F16, "
                      "BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)",
                      t->file, t->name, folio_ggml_type_name(t->type));
        return -1;
    }
    uint64_t numel = folio_gguf_tensor_numel(t);
    if (first > numel || count > numel - first) {
        folio_set_err(err, errlen,
                      "%s: tensor '%s': elements [%llu, +%llu) run past its %llu elements", t->file,
                      t->name, (unsigned long long)first, (unsigned long long)count,
                      (unsigned long long)numel);
        return -1;
    }
    const uint64_t bs = (uint64_t)folio_ggml_block_size(t->type);
    const size_t bytes = (size_t)folio_ggml_type_size(t->type);
    const unsigned char *data = t->data;
    float block[256];
    uint64_t done = 0;
    while (done < count) {
        uint64_t e = first + done, blk = e / bs, within = e % bs;
        uint64_t take = bs - within < count - done ? bs - within : count - done;
        if (within == 0 && take == bs) {
            dequantize_block(t->type, data + blk * bytes, out + done);
        } else {
            dequantize_block(t->type, data + blk * bytes, block);
            memcpy(out + done, block + within, (size_t)take * sizeof *out);
        }
        done += take;
    }
    return 0;
}
