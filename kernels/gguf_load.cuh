/* The device's gather of a packed chunk's bytes into gguf_blocks.h's words: the same bytes as
 * gguf_gather_host, with the widest loads the type's block alignment allows (rows start on 16
 * bytes; Q4_1's 20-byte blocks are 4-aligned, Q4_K's and Q4_0X8's 144-byte ones 16-aligned,
 * Q4_0, Q8_0 and Q6_K only 2-aligned). Weights are read once a product: streaming loads. */
#ifndef FOLIO_KERNELS_GGUF_LOAD_CUH
#define FOLIO_KERNELS_GGUF_LOAD_CUH

#include "gguf_blocks.h"

__device__ __forceinline__ uint32_t gguf_ld16(const uint8_t *p)
{
    return __ldcs((const unsigned short *)p);
}

/* Two 2-aligned halves as a word. */
__device__ __forceinline__ uint32_t gguf_ld16x2(const uint8_t *p)
{
    return gguf_ld16(p) | gguf_ld16(p + 2) << 16;
}

/* Chunk c of the row at row into r; returns its index within a K-quant super-block. */
template <int T> __device__ __forceinline__ int gguf_gather(const uint8_t *row, int c, uint32_t *r)
{
    int sub;
    const uint8_t *p = row + gguf_chunk_block(T, c, &sub);
    if (T == FOLIO_GGML_Q4_0 || T == FOLIO_GGML_Q8_0) {
        r[0] = gguf_ld16(p);
#pragma unroll
        for (int i = 0; i < (T == FOLIO_GGML_Q4_0 ? 4 : 8); i++)
            r[1 + i] = gguf_ld16x2(p + 2 + 4 * i);
    } else if (T == FOLIO_GGML_Q4_0X8) {
        const uint4 v = __ldcs((const uint4 *)(p + 16 + 16 * sub));
        r[0] = gguf_ld16(p + 2 * sub);
        r[1] = v.x, r[2] = v.y, r[3] = v.z, r[4] = v.w;
    } else if (T == FOLIO_GGML_Q4_1) {
#pragma unroll
        for (int i = 0; i < 5; i++)
            r[i] = __ldcs((const unsigned int *)p + i);
    } else if (T == FOLIO_GGML_Q4_K) {
        const uint4 h = __ldcs((const uint4 *)p);
        const uint4 q0 = __ldcs((const uint4 *)(p + 16 + 32 * (sub >> 1)));
        const uint4 q1 = __ldcs((const uint4 *)(p + 32 + 32 * (sub >> 1)));
        r[0] = h.x, r[1] = h.y, r[2] = h.z, r[3] = h.w;
        r[4] = q0.x, r[5] = q0.y, r[6] = q0.z, r[7] = q0.w;
        r[8] = q1.x, r[9] = q1.y, r[10] = q1.z, r[11] = q1.w;
    } else if (T == FOLIO_GGML_Q6_K) {
        const int h = sub >> 2, part = sub & 3;
        r[0] = gguf_ld16(p + 208);
        r[1] = gguf_ld16(p + 192 + 8 * h + 2 * part);
        const uint8_t *ql = p + 64 * h + 32 * (part & 1), *qh = p + 128 + 32 * h;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            r[2 + i] = gguf_ld16x2(ql + 4 * i);
            r[10 + i] = gguf_ld16x2(qh + 4 * i);
        }
    } else { /* FOLIO_GGML_BF16 */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 v = __ldcs((const uint4 *)p + i);
            r[4 * i] = v.x, r[4 * i + 1] = v.y, r[4 * i + 2] = v.z, r[4 * i + 3] = v.w;
        }
    }
    return sub;
}

#endif
