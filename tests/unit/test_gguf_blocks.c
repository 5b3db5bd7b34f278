/* kernels/gguf_blocks.h, the decoding the CUDA backend's packed-GGUF kernels run, held to
 * common/gguf_dequant.c on random blocks of every type it takes (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K,
 * and bf16 rows, and Q4_0 rows regrouped as Q4_0X8): each 32-weight chunk of a row, gathered
 * and decoded, gives the reference's values, and the row sizes and the types kept packed are
 * the ones the file has. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "gguf_blocks.h"
#include "safetensors.h" /* folio_f16_to_f32 */

static unsigned rng = 7;
static unsigned next(void)
{
    rng = rng * 1103515245u + 12345u;
    return rng >> 8;
}

/* An f16 scale of about 2^-e, positive. */
static uint16_t f16_scale(int e)
{
    return (uint16_t)((15 - e) << 10 | (next() & 0x3ff));
}

/* n blocks of the type: random bytes, the f16 scales set to small finite values. */
static void random_blocks(uint32_t type, uint8_t *b, int n)
{
    const int bytes = folio_ggml_type_size(type);
    for (int i = 0; i < n * bytes; i++)
        b[i] = (uint8_t)next();
    for (int i = 0; i < n; i++) {
        uint8_t *p = b + i * bytes;
        uint16_t d = f16_scale(6), m = f16_scale(5);
        if (type == FOLIO_GGML_Q6_K) {
            memcpy(p + 208, &d, 2);
            continue;
        }
        memcpy(p, &d, 2);
        if (type == FOLIO_GGML_Q4_1 || type == FOLIO_GGML_Q4_K)
            memcpy(p + 2, &m, 2);
    }
    if (type == FOLIO_GGML_BF16)
        for (int i = 0; i < n; i++)
            b[2 * i + 1] = (uint8_t)(0x3c + (next() & 3) - (next() & 0x80)); /* finite */
}

/* Chunk c of a row of the type at data, gathered and decoded: its 32 weights into w, and q
 * (the integer-valued floats) into q. */
static void decode_chunk(uint32_t type, const uint8_t *data, int c, float w[32], float q[32])
{
    int sub;
    const int64_t at = gguf_chunk_block(type, c, &sub);
    uint32_t r[GGUF_CHUNK_WORDS];
    float a[2], b;
    gguf_gather_host(type, data + at, sub, r);
    gguf_decode_chunk(type, r, sub, q, a, &b);
    for (int j = 0; j < 32; j++)
        w[j] = a[j / 16] * q[j] + b;
}

/* A Q4_0 row regrouped as Q4_0X8 decodes to the same weights, and so do the fused GEMV's pairs:
 * pair p of nibble word j, less 136, times the block's scale, is the block's weight
 * gguf_q4_pair_elem(j, p) and the one 2 after it. */
static void check_regrouped(const uint8_t *data, const float *want, int k)
{
    uint8_t *grouped = malloc((size_t)gguf_row_bytes(FOLIO_GGML_Q4_0X8, k));
    CHECK(gguf_row_bytes(FOLIO_GGML_Q4_0X8, k) == gguf_row_bytes(FOLIO_GGML_Q4_0, k));
    gguf_regroup_q4_0(grouped, data, k);
    int bad = 0, bad_pairs = 0;
    for (int c = 0; c < k / 32; c++) {
        float w[32], q[32];
        decode_chunk(FOLIO_GGML_Q4_0X8, grouped, c, w, q);
        for (int j = 0; j < 32; j++)
            bad += w[j] != want[32 * c + j];
        int sub;
        const int64_t at = gguf_chunk_block(FOLIO_GGML_Q4_0X8, c, &sub);
        uint32_t r[GGUF_CHUNK_WORDS];
        gguf_gather_host(FOLIO_GGML_Q4_0X8, grouped + at, sub, r);
        const float d = gguf_f16(r[0] & 0xffffu);
        for (int j = 0; j < 4; j++)
            for (int p = 0; p < 4; p++) {
                const uint32_t h = gguf_q4_pair(r[1 + j], p);
                const int e = 32 * c + gguf_q4_pair_elem(j, p);
                const float lo = gguf_bits_f32(h << 16) - 136.0f,
                            hi = gguf_bits_f32(h & 0xffff0000u) - 136.0f;
                bad_pairs += lo * d != want[e] || hi * d != want[e + 2];
            }
    }
    CHECK(bad == 0);
    CHECK(bad_pairs == 0);
    free(grouped);
}

static void check_type(uint32_t type, int k)
{
    const int64_t row_bytes = gguf_row_bytes(type, k);
    const int blocks = (int)(row_bytes / folio_ggml_type_size(type));
    CHECK(blocks * folio_ggml_block_size(type) == k);
    CHECK(gguf_block_elems(type) == folio_ggml_block_size(type));
    uint8_t *data = malloc((size_t)row_bytes);
    float *want = malloc(sizeof(float) * k);
    random_blocks(type, data, blocks);
    struct folio_gguf_tensor t = {.name = "w",
                                  .file = "test",
                                  .type = type,
                                  .ndim = 1,
                                  .ne = {k},
                                  .data = data,
                                  .nbytes = (size_t)row_bytes};
    char err[256];
    CHECK(folio_gguf_dequantize(&t, 0, (uint64_t)k, want, err, sizeof err) == 0);
    int bad = 0;
    for (int c = 0; c < k / 32; c++) {
        float w[32], q[32];
        decode_chunk(type, data, c, w, q);
        for (int j = 0; j < 32; j++) {
            const float got = w[j], ref = want[32 * c + j];
            if (q[j] != nearbyintf(q[j]) && type != FOLIO_GGML_BF16)
                bad++;
            if (fabsf(got - ref) > 1e-6f * fabsf(ref) + 1e-12f) {
                if (bad++ < 4)
                    fprintf(stderr, "%s chunk %d elem %d: got %g want %g\n",
                            folio_ggml_type_name(type), c, j, got, ref);
            }
        }
    }
    CHECK(bad == 0);
    if (type == FOLIO_GGML_Q4_0 && k % 256 == 0)
        check_regrouped(data, want, k);
    free(data);
    free(want);
}

int main(void)
{
    const uint32_t packed[] = {FOLIO_GGML_Q4_0, FOLIO_GGML_Q4_1, FOLIO_GGML_Q8_0, FOLIO_GGML_Q4_K,
                               FOLIO_GGML_Q6_K};
    for (size_t i = 0; i < sizeof packed / sizeof *packed; i++) {
        CHECK(gguf_packed_type(packed[i]));
        for (int rep = 0; rep < 20; rep++)
            check_type(packed[i], 512);
        check_type(packed[i], 1280);
    }
    for (int rep = 0; rep < 5; rep++)
        check_type(FOLIO_GGML_BF16, 256);
    CHECK(!gguf_packed_type(FOLIO_GGML_Q5_0) && !gguf_packed_type(FOLIO_GGML_Q5_K) &&
          !gguf_packed_type(FOLIO_GGML_F16) && !gguf_packed_type(FOLIO_GGML_BF16));
    /* ggml's numbers, which gguf_blocks.h repeats without including common/gguf.h */
    const int ours[] = {FOLIO_GGML_Q4_0, FOLIO_GGML_Q4_1, FOLIO_GGML_Q8_0,
                        FOLIO_GGML_Q4_K, FOLIO_GGML_Q6_K, FOLIO_GGML_BF16};
    const int ggml[] = {FOLIO_GGML_Q4_0, FOLIO_GGML_Q4_1, FOLIO_GGML_Q8_0,
                        FOLIO_GGML_Q4_K, FOLIO_GGML_Q6_K, FOLIO_GGML_BF16};
    CHECK(memcmp(ours, ggml, sizeof ours) == 0);
    /* every f16, finite or not, as common/ widens it */
    int f16_bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float a = gguf_f16(h), b = folio_f16_to_f32((uint16_t)h);
        f16_bad += memcmp(&a, &b, 4) != 0 && !(isnan(a) && isnan(b));
    }
    CHECK(f16_bad == 0);
    return check_report();
}
