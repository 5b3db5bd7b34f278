/* GGUF's quantized blocks decoded 32 weights at a time, for the CUDA kernels that compute on
 * packed weights (gguf_gemv.cu, gguf_dequant.cu) and for the host, where tests/unit holds them
 * to common/gguf_dequant.c. A row of a packed matrix is its GGUF blocks as the file has them;
 * its k / 32 chunks of 32 weights are the blocks of the 32-weight types (Q4_0, Q4_1, Q8_0), the
 * eight sub-blocks of a K-quant super-block of 256, or 32 bf16 values (a tensor of another type
 * beside packed ones, widened at load). A chunk's bytes are first gathered into 18 words (the
 * device with the widest loads each type's alignment allows, the host byte by byte: the
 * gather_* offsets below say which bytes), then decoded into integer-valued floats q and
 * scales: weight j = a[j / 16] * q[j] + b. The split keeps the scales out of the 32 products
 * (sum q x, then one multiply), as the decode is shared. */
#ifndef FOLIO_GGUF_BLOCKS_H
#define FOLIO_GGUF_BLOCKS_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h" /* ggml's type numbers */

#ifdef __CUDACC__
#define GGUF_HD static __host__ __device__ __forceinline__
#else
#define GGUF_HD static inline
#endif

#define GGUF_CHUNK_WORDS 18

/* Q4_0 regrouped at load (gguf_regroup_q4_0), Folio's own type number (no file has it): eight
 * blocks' f16 scales, then their eight 16-byte nibble runs, 144 bytes a group of 256 weights,
 * so that every run is a 16-byte load. The same bytes a weight as Q4_0; rows of k % 256 == 0. */
#define FOLIO_GGML_Q4_0X8 0x102

/* Whether the CUDA backend keeps a tensor of this ggml type packed. */
GGUF_HD bool gguf_packed_type(uint32_t type)
{
    return type == FOLIO_GGML_Q4_0 || type == FOLIO_GGML_Q4_1 || type == FOLIO_GGML_Q8_0 ||
           type == FOLIO_GGML_Q4_K || type == FOLIO_GGML_Q6_K;
}

/* Bytes of a row of k weights (k a multiple of the type's block); 0 for other types. */
GGUF_HD int64_t gguf_row_bytes(uint32_t type, int64_t k)
{
    switch (type) {
    case FOLIO_GGML_Q4_0:
        return k / 32 * 18;
    case FOLIO_GGML_Q4_1:
        return k / 32 * 20;
    case FOLIO_GGML_Q8_0:
        return k / 32 * 34;
    case FOLIO_GGML_Q4_K:
    case FOLIO_GGML_Q4_0X8:
        return k / 256 * 144;
    case FOLIO_GGML_Q6_K:
        return k / 256 * 210;
    case FOLIO_GGML_BF16:
        return k * 2;
    }
    return 0;
}

/* Q4_0X8 as folio_k_gemv reads it: pair p (0..3) of word j (0..3) of a block's 16 nibble
 * bytes is the bits of a bf16 pair (128 + q, 128 + q') by a mask and the exponent of 128
 * or'ed in (byte i's low nibble is weight i, its high one weight i + 16); q is weight
 * gguf_q4_pair_elem(j, p) of the block, q' the one 2 after it. */
GGUF_HD uint32_t gguf_q4_pair(uint32_t word, int p)
{
    return ((word >> ((p & 1) * 8 + (p >> 1) * 4)) & 0x000f000fu) | 0x43004300u;
}

GGUF_HD int gguf_q4_pair_elem(int j, int p)
{
    return (p >> 1) * 16 + 4 * j + (p & 1);
}

/* A Q4_0 row of k weights (k % 256 == 0) as FOLIO_GGML_Q4_0X8 at dst. */
GGUF_HD void gguf_regroup_q4_0(uint8_t *dst, const uint8_t *src, int64_t k)
{
    for (int64_t g = 0; g < k / 256; g++)
        for (int s = 0; s < 8; s++) {
            const uint8_t *b = src + (8 * g + s) * 18;
            uint8_t *o = dst + 144 * g;
            for (int i = 0; i < 2; i++)
                o[2 * s + i] = b[i];
            for (int i = 0; i < 16; i++)
                o[16 + 16 * s + i] = b[2 + i];
        }
}

/* Elements a block of the type holds (k must be a multiple). */
GGUF_HD int gguf_block_elems(uint32_t type)
{
    return type == FOLIO_GGML_Q4_K || type == FOLIO_GGML_Q6_K || type == FOLIO_GGML_Q4_0X8 ? 256
           : type == FOLIO_GGML_BF16                                                       ? 1
                                                                                           : 32;
}

GGUF_HD float gguf_bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    union {
        uint32_t u;
        float f;
    } v = {u};
    return v.f;
#endif
}

/* An f16's value (every f16 is exact in f32). */
GGUF_HD float gguf_f16(uint32_t h)
{
    uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f)
        return gguf_bits_f32(sign | 0x7f800000u | man << 13);
    if (exp != 0)
        return gguf_bits_f32(sign | (exp + 112) << 23 | man << 13);
    /* subnormal: man * 2^-24, exact in f32 */
    float f = (float)man * (1.0f / 16777216.0f);
    return sign ? -f : f;
}

/* v - off for a small integer v (below 2^23), exact: the bits of 2^23 + v, less 2^23 + off,
 * two integer-unit operations where a conversion instruction is slower. */
GGUF_HD float gguf_int(uint32_t v, float off)
{
    return gguf_bits_f32(0x4b000000u | v) - (8388608.0f + off);
}

GGUF_HD uint32_t gguf_byte(const uint32_t *w, int i)
{
    return (w[i >> 2] >> (8 * (i & 3))) & 0xffu;
}

/* Q4_K's 6-bit scale and min of sub-block j from its 12 bytes s (as llama.cpp packs them). */
GGUF_HD void gguf_scale_min_k4(const uint32_t *s, int j, uint32_t *sc, uint32_t *m)
{
    if (j < 4) {
        *sc = gguf_byte(s, j) & 63;
        *m = gguf_byte(s, j + 4) & 63;
    } else {
        *sc = (gguf_byte(s, j + 4) & 0xf) | (gguf_byte(s, j - 4) >> 6) << 4;
        *m = (gguf_byte(s, j + 4) >> 4) | (gguf_byte(s, j) >> 6) << 4;
    }
}

/* Decodes the gathered words r of chunk `sub` (its index within a K-quant super-block; 0 for
 * the others) of the type: q[32], a[2] (the scale of q[0..15] and of q[16..31]) and b. */
GGUF_HD void gguf_decode_chunk(uint32_t type, const uint32_t *r, int sub, float *q, float *a,
                               float *b)
{
    *b = 0.0f;
    switch (type) {
    case FOLIO_GGML_Q4_0:
    case FOLIO_GGML_Q4_0X8:
    case FOLIO_GGML_Q4_1: { /* r[0]: d (and m); r[1..4]: nibbles, low ones elements 0-15 */
        const float off = type == FOLIO_GGML_Q4_1 ? 0.0f : 8.0f;
        a[0] = a[1] = gguf_f16(r[0] & 0xffffu);
        if (type == FOLIO_GGML_Q4_1)
            *b = gguf_f16(r[0] >> 16);
#ifdef __CUDACC__
#pragma unroll
#endif
        for (int i = 0; i < 16; i++) {
            uint32_t v = gguf_byte(r + 1, i);
            q[i] = gguf_int(v & 0xf, off);
            q[16 + i] = gguf_int(v >> 4, off);
        }
        return;
    }
    case FOLIO_GGML_Q8_0: /* r[0]: d; r[1..8]: int8 values */
        a[0] = a[1] = gguf_f16(r[0] & 0xffffu);
#ifdef __CUDACC__
#pragma unroll
#endif
        for (int i = 0; i < 32; i++)
            q[i] = gguf_int(gguf_byte(r + 1, i) ^ 0x80u, 128.0f);
        return;
    case FOLIO_GGML_Q4_K: { /* r[0]: d, dmin; r[1..3]: scales; r[4..11]: the pair's 32 bytes */
        uint32_t sc, m;
        gguf_scale_min_k4(r + 1, sub, &sc, &m);
        a[0] = a[1] = gguf_f16(r[0] & 0xffffu) * (float)sc;
        *b = -(gguf_f16(r[0] >> 16) * (float)m);
        const int shift = (sub & 1) * 4;
#ifdef __CUDACC__
#pragma unroll
#endif
        for (int i = 0; i < 32; i++)
            q[i] = gguf_int((gguf_byte(r + 4, i) >> shift) & 0xf, 0.0f);
        return;
    }
    case FOLIO_GGML_Q6_K: { /* r[0]: d; r[1]: the 2 int8 scales; r[2..9]: ql; r[10..17]: qh */
        const float d = gguf_f16(r[0] & 0xffffu);
        a[0] = d * (float)(int8_t)(r[1] & 0xffu);
        a[1] = d * (float)(int8_t)((r[1] >> 8) & 0xffu);
        const int part = sub & 3, lshift = (part >> 1) * 4, hshift = part * 2;
#ifdef __CUDACC__
#pragma unroll
#endif
        for (int i = 0; i < 32; i++) {
            uint32_t lo = (gguf_byte(r + 2, i) >> lshift) & 0xf;
            uint32_t hi = (gguf_byte(r + 10, i) >> hshift) & 3;
            q[i] = gguf_int(lo | hi << 4, 32.0f);
        }
        return;
    }
    default: /* FOLIO_GGML_BF16: r[0..15] */
        a[0] = a[1] = 1.0f;
#ifdef __CUDACC__
#pragma unroll
#endif
        for (int i = 0; i < 16; i++) {
            q[2 * i] = gguf_bits_f32(r[i] << 16);
            q[2 * i + 1] = gguf_bits_f32(r[i] & 0xffff0000u);
        }
        return;
    }
}

/* Where chunk c of a row lives: the byte offset of its block, and its index in the block. */
GGUF_HD int64_t gguf_chunk_block(uint32_t type, int64_t c, int *sub)
{
    *sub = 0;
    switch (type) {
    case FOLIO_GGML_Q4_0:
        return c * 18;
    case FOLIO_GGML_Q4_1:
        return c * 20;
    case FOLIO_GGML_Q8_0:
        return c * 34;
    case FOLIO_GGML_Q4_K:
    case FOLIO_GGML_Q4_0X8:
        *sub = (int)(c & 7);
        return (c >> 3) * 144;
    case FOLIO_GGML_Q6_K:
        *sub = (int)(c & 7);
        return (c >> 3) * 210;
    }
    return c * 64;
}

/* The gather of chunk `sub` of the block at p into r, byte by byte (the host's; the device
 * reads the same bytes with wider loads): runs of (source offset, length) into r's bytes. */
GGUF_HD void gguf_gather_host(uint32_t type, const uint8_t *p, int sub, uint32_t *r)
{
    /* {source offset, destination byte, length} */
    int runs[4][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
    switch (type) {
    case FOLIO_GGML_Q4_0:
        runs[0][2] = 2, runs[1][0] = 2, runs[1][1] = 4, runs[1][2] = 16;
        break;
    case FOLIO_GGML_Q4_1:
        runs[0][2] = 20;
        break;
    case FOLIO_GGML_Q8_0:
        runs[0][2] = 2, runs[1][0] = 2, runs[1][1] = 4, runs[1][2] = 32;
        break;
    case FOLIO_GGML_Q4_K:
        runs[0][2] = 16, runs[1][0] = 16 + 32 * (sub >> 1), runs[1][1] = 16, runs[1][2] = 32;
        break;
    case FOLIO_GGML_Q4_0X8:
        runs[0][0] = 2 * sub, runs[0][2] = 2, runs[1][0] = 16 + 16 * sub, runs[1][1] = 4;
        runs[1][2] = 16;
        break;
    case FOLIO_GGML_Q6_K: {
        const int h = sub >> 2, part = sub & 3;
        runs[0][0] = 208, runs[0][2] = 2;
        runs[1][0] = 192 + 8 * h + 2 * part, runs[1][1] = 4, runs[1][2] = 2;
        runs[2][0] = 64 * h + 32 * (part & 1), runs[2][1] = 8, runs[2][2] = 32;
        runs[3][0] = 128 + 32 * h, runs[3][1] = 40, runs[3][2] = 32;
        break;
    }
    default:
        runs[0][2] = 64;
        break;
    }
    for (int i = 0; i < GGUF_CHUNK_WORDS; i++)
        r[i] = 0;
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < runs[k][2]; i++) {
            const int at = runs[k][1] + i;
            r[at >> 2] |= (uint32_t)p[runs[k][0] + i] << (8 * (at & 3));
        }
}

#endif
