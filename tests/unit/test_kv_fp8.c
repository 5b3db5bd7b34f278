/* The CPU backend's e4m3 KV cache (--kv-cache-dtype fp8, worker/cpu_attention.h): a row written
 * and read back is code x scale, the codes common/fp8.h's rule gives x / scale (saturated past
 * 448 x scale); and attention over the e4m3 cache equals attention over an f32 cache that holds
 * those read-back values, so the scales are applied once, where they belong. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu_attention.h"
#include "fp8.h"

#define HEADS 4
#define KV_HEADS 2
#define HEAD_DIM 16
#define CTX 37 /* three blocks, the last one partial */
#define BLOCKS 4

static unsigned rng = 7;
static float frand(void)
{
    rng = rng * 1103515245u + 12345u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void round_trip(float scale)
{
    enum { N = 4096 };
    static float x[N], back[N];
    static uint8_t cache[N];
    for (int i = 0; i < N; i++) /* magnitudes from 1e-4 to 1000 x scale, past saturation */
        x[i] = frand() * powf(10.0f, 4.0f * fabsf(frand()) - 1.0f) * scale;
    x[0] = 2000.0f * scale;
    x[1] = -600.0f * scale;
    cpu_kv_write(CPU_KV_E4M3, NULL, cache, 0, x, N, scale);
    cpu_kv_read(CPU_KV_E4M3, cache, 0, back, N, scale);
    for (int i = 0; i < N; i++) {
        CHECK(cache[i] == folio_e4m3_from_f32(x[i] / scale));
        CHECK(back[i] == folio_e4m3_to_f32(cache[i]) * scale);
        float a = fabsf(x[i] / scale);
        if (a >= FOLIO_FP8_MAX)
            CHECK(fabsf(back[i]) == FOLIO_FP8_MAX * scale);
        else if (a >= 0.015625f) /* normal codes: within half a step, 2^-4 relative */
            CHECK(fabsf(back[i] - x[i]) <= fabsf(x[i]) * 0.0625f);
        else /* subnormal codes: within half of 2^-9 */
            CHECK(fabsf(back[i] - x[i]) <= scale * 0.5f / 512.0f * 1.0001f);
    }
}

/* Attention of the last token (position CTX - 1) and one earlier token over an e4m3 cache, and
 * over an f32 cache of the same values read back: equal within float rounding. */
static void attention_matches(float k_scale, float v_scale)
{
    struct folio_model_config cfg = {0};
    cfg.num_heads = HEADS;
    cfg.num_kv_heads = KV_HEADS;
    cfg.head_dim = HEAD_DIM;
    struct folio_tp_shard sh = {.size = 1, .heads = HEADS, .kv_heads = KV_HEADS};
    const size_t row = (size_t)KV_HEADS * HEAD_DIM, cells = BLOCKS * FOLIO_KV_BLOCK_SIZE * row;
    uint8_t *k8 = calloc(cells, 1), *v8 = calloc(cells, 1);
    float *kf = calloc(cells, sizeof *kf), *vf = calloc(cells, sizeof *vf);
    const int32_t table[3] = {2, 0, 3}; /* blocks out of order */
    float k[KV_HEADS * HEAD_DIM], v[KV_HEADS * HEAD_DIM], back[KV_HEADS * HEAD_DIM];
    for (int p = 0; p < CTX; p++) {
        for (size_t i = 0; i < row; i++) {
            k[i] = 3.0f * frand() * k_scale;
            v[i] = frand() * v_scale;
        }
        size_t off = cpu_kv_offset(&cfg, KV_HEADS, table[p / FOLIO_KV_BLOCK_SIZE], p);
        cpu_kv_write(CPU_KV_E4M3, NULL, k8, off, k, (int)row, k_scale);
        cpu_kv_write(CPU_KV_E4M3, NULL, v8, off, v, (int)row, v_scale);
        cpu_kv_read(CPU_KV_E4M3, k8, off, back, (int)row, k_scale);
        memcpy(kf + off, back, sizeof back);
        cpu_kv_read(CPU_KV_E4M3, v8, off, back, (int)row, v_scale);
        memcpy(vf + off, back, sizeof back);
    }
    struct folio_step_seq seq = {
        .num_new_tokens = 2, .context_len = CTX, .num_blocks = 3, .block_table = table};
    struct folio_step_batch batch = {.num_seqs = 1, .num_tokens = 2, .seqs = &seq};
    const int32_t tok_seq[2] = {0, 0}, tok_pos[2] = {20, CTX - 1};
    float q[2 * HEADS * HEAD_DIM], out8[2 * HEADS * HEAD_DIM], outf[2 * HEADS * HEAD_DIM];
    for (int i = 0; i < 2 * HEADS * HEAD_DIM; i++)
        q[i] = frand();
    float scores[CTX];
    struct cpu_pool *pool = cpu_pool_new(1);
    struct cpu_attention a = {.cfg = &cfg,
                              .kv = CPU_KV_E4M3,
                              .batch = &batch,
                              .tok_seq = tok_seq,
                              .tok_pos = tok_pos,
                              .q = q,
                              .out = out8,
                              .scores = scores,
                              .scores_cap = CTX,
                              .sh = &sh,
                              .k_cache = k8,
                              .v_cache = v8,
                              .k_scale = k_scale,
                              .v_scale = v_scale,
                              .ntok = 2};
    cpu_attention_run(pool, &a);
    a.kv = CPU_KV_F32;
    a.k_cache = kf;
    a.v_cache = vf;
    a.out = outf;
    cpu_attention_run(pool, &a);
    for (int i = 0; i < 2 * HEADS * HEAD_DIM; i++)
        CHECK(fabsf(out8[i] - outf[i]) <= 1e-5f * v_scale + 1e-5f * fabsf(outf[i]));
    cpu_pool_free(pool);
    free(k8);
    free(v8);
    free(kf);
    free(vf);
}

int main(void)
{
    enum folio_kv_cache_dtype d;
    CHECK(folio_kv_cache_dtype_parse(NULL, &d) == 0 && d == FOLIO_KV_AUTO);
    CHECK(folio_kv_cache_dtype_parse("auto", &d) == 0 && d == FOLIO_KV_AUTO);
    CHECK(folio_kv_cache_dtype_parse("fp8", &d) == 0 && d == FOLIO_KV_FP8);
    CHECK(folio_kv_cache_dtype_parse("fp8_e4m3", &d) == 0 && d == FOLIO_KV_FP8);
    CHECK(folio_kv_cache_dtype_parse("fp8_e5m2", &d) == -1);
    CHECK(folio_kv_cache_dtype_parse("bfloat16", &d) == -1);
    CHECK(cpu_kv_elem_bytes(CPU_KV_E4M3) == 1 && cpu_kv_elem_bytes(CPU_KV_F16) == 2);
    round_trip(FOLIO_KV_FP8_SCALE);
    round_trip(0.25f);
    attention_matches(FOLIO_KV_FP8_SCALE, FOLIO_KV_FP8_SCALE);
    attention_matches(0.5f, 3.0f);
    return check_report();
}
