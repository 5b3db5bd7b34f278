#include "cpu_attention.h"

#include <math.h>
#include <string.h>

#include "fp8.h"
#include "safetensors.h" /* folio_f16_to_f32 */

/* Multiply-adds below which the pairs run on the calling thread: waking others costs more. */
#define CPU_ATTENTION_PARALLEL_MIN_WORK (1 << 18)

/* Causal grouped-query attention of new token t's head h over its sequence's
 * context up to and including its own position, read from the paged cache:
 * the rank's heads over its KV heads. */
static void attention_ref_chunk(void *arg, int chunk, int thread)
{
    const struct cpu_attention *j = arg;
    const struct folio_model_config *c = j->cfg;
    int nh = j->sh->heads, nkv = j->sh->kv_heads, hd = c->head_dim, group = nh / nkv;
    int t = chunk / nh, h = chunk % nh;
    float scale = (float)(1.0 / sqrt((double)hd));
    const struct folio_step_seq *s = &j->batch->seqs[j->tok_seq[t]];
    int32_t pos = j->tok_pos[t];
    int kvh = h / group;
    const float *q = j->q + ((size_t)t * nh + h) * hd;
    float *scores = j->scores + (size_t)thread * j->scores_cap;
    float max = -INFINITY;
    for (int32_t p = 0; p <= pos; p++) {
        const float *k = (const float *)j->k_cache +
                         cpu_kv_offset(c, nkv, s->block_table[p / FOLIO_KV_BLOCK_SIZE], p) +
                         (size_t)kvh * hd;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int i = 0; i < hd; i++)
            dot += q[i] * k[i];
        scores[p] = dot * scale;
        if (scores[p] > max)
            max = scores[p];
    }
    double sum = 0;
    for (int32_t p = 0; p <= pos; p++) {
        scores[p] = expf(scores[p] - max);
        sum += scores[p];
    }
    float inv_sum = (float)(1.0 / sum);
    float *o = j->out + ((size_t)t * nh + h) * hd;
    for (int i = 0; i < hd; i++)
        o[i] = 0.0f;
    for (int32_t p = 0; p <= pos; p++) {
        const float *v = (const float *)j->v_cache +
                         cpu_kv_offset(c, nkv, s->block_table[p / FOLIO_KV_BLOCK_SIZE], p) +
                         (size_t)kvh * hd;
        float w = scores[p] * inv_sum;
        for (int i = 0; i < hd; i++)
            o[i] += w * v[i];
    }
}

/* attention_ref_chunk's computation over the f16 cache with the SIMD kernels:
 * the same scores, softmax (normaliser in double) and weighted sum. */
static void attention_f16_chunk(void *arg, int chunk, int thread)
{
    const struct cpu_attention *j = arg;
    const struct folio_model_config *c = j->cfg;
    const struct cpu_kernels *k = j->kern;
    int nh = j->sh->heads, nkv = j->sh->kv_heads, hd = c->head_dim, group = nh / nkv;
    int t = chunk / nh, h = chunk % nh;
    float scale = (float)(1.0 / sqrt((double)hd));
    const struct folio_step_seq *s = &j->batch->seqs[j->tok_seq[t]];
    int32_t pos = j->tok_pos[t];
    size_t kvh = (size_t)(h / group) * hd;
    const float *q = j->q + ((size_t)t * nh + h) * hd;
    const uint16_t *kc = j->k_cache, *vc = j->v_cache;
    float *scores = j->scores + (size_t)thread * j->scores_cap;
    float max = -INFINITY;
    for (int32_t p = 0; p <= pos; p++) {
        size_t off = cpu_kv_offset(c, nkv, s->block_table[p / FOLIO_KV_BLOCK_SIZE], p) + kvh;
        scores[p] = k->dot_f16(q, kc + off, hd) * scale;
        if (scores[p] > max)
            max = scores[p];
    }
    double sum = 0;
    for (int32_t p = 0; p <= pos; p++) {
        scores[p] = expf(scores[p] - max);
        sum += scores[p];
    }
    float inv_sum = (float)(1.0 / sum);
    float *o = j->out + ((size_t)t * nh + h) * hd;
    memset(o, 0, (size_t)hd * sizeof *o);
    for (int32_t p = 0; p <= pos; p++) {
        size_t off = cpu_kv_offset(c, nkv, s->block_table[p / FOLIO_KV_BLOCK_SIZE], p) + kvh;
        k->axpy_f16(o, scores[p] * inv_sum, vc + off, hd);
    }
}

/* attention_ref_chunk's computation over the e4m3 cache: each key's dot product with the codes'
 * values times k_scale, each value row's codes times its weight and v_scale, as the CUDA
 * kernels fold the two scales into the softmax scale and the output. */
static void attention_e4m3_chunk(void *arg, int chunk, int thread)
{
    const struct cpu_attention *j = arg;
    const struct folio_model_config *c = j->cfg;
    const float *codes = folio_e4m3_table();
    int nh = j->sh->heads, nkv = j->sh->kv_heads, hd = c->head_dim, group = nh / nkv;
    int t = chunk / nh, h = chunk % nh;
    float scale = (float)(1.0 / sqrt((double)hd)) * j->k_scale;
    const struct folio_step_seq *s = &j->batch->seqs[j->tok_seq[t]];
    int32_t pos = j->tok_pos[t];
    size_t kvh = (size_t)(h / group) * hd;
    const float *q = j->q + ((size_t)t * nh + h) * hd;
    const uint8_t *kc = j->k_cache, *vc = j->v_cache;
    float *scores = j->scores + (size_t)thread * j->scores_cap;
    float max = -INFINITY;
    for (int32_t p = 0; p <= pos; p++) {
        const uint8_t *k =
            kc + cpu_kv_offset(c, nkv, s->block_table[p / FOLIO_KV_BLOCK_SIZE], p) + kvh;
        float dot = 0.0f;
        for (int i = 0; i < hd; i++)
            dot += q[i] * codes[k[i]];
        scores[p] = dot * scale;
        if (scores[p] > max)
            max = scores[p];
    }
    double sum = 0;
    for (int32_t p = 0; p <= pos; p++) {
        scores[p] = expf(scores[p] - max);
        sum += scores[p];
    }
    float inv_sum = (float)(1.0 / sum) * j->v_scale;
    float *o = j->out + ((size_t)t * nh + h) * hd;
    memset(o, 0, (size_t)hd * sizeof *o);
    for (int32_t p = 0; p <= pos; p++) {
        const uint8_t *v =
            vc + cpu_kv_offset(c, nkv, s->block_table[p / FOLIO_KV_BLOCK_SIZE], p) + kvh;
        float w = scores[p] * inv_sum;
        for (int i = 0; i < hd; i++)
            o[i] += w * codes[v[i]];
    }
}

size_t cpu_kv_elem_bytes(enum cpu_kv_type type)
{
    return type == CPU_KV_F32 ? sizeof(float) : type == CPU_KV_F16 ? sizeof(uint16_t) : 1;
}

void cpu_kv_write(enum cpu_kv_type type, const struct cpu_kernels *kern, void *cache, size_t off,
                  const float *x, int n, float scale)
{
    if (type == CPU_KV_F32) {
        memcpy((float *)cache + off, x, (size_t)n * sizeof *x);
    } else if (type == CPU_KV_F16) {
        kern->to_f16((uint16_t *)cache + off, x, n);
    } else {
        uint8_t *q = (uint8_t *)cache + off;
        for (int i = 0; i < n; i++) /* the division, as the CUDA kernels divide */
            q[i] = folio_e4m3_from_f32(x[i] / scale);
    }
}

void cpu_kv_read(enum cpu_kv_type type, const void *cache, size_t off, float *out, int n,
                 float scale)
{
    for (int i = 0; i < n; i++) {
        if (type == CPU_KV_F32)
            out[i] = ((const float *)cache)[off + i];
        else if (type == CPU_KV_F16)
            out[i] = folio_f16_to_f32(((const uint16_t *)cache)[off + i]);
        else
            out[i] = folio_e4m3_to_f32(((const uint8_t *)cache)[off + i]) * scale;
    }
}

void cpu_attention_run(struct cpu_pool *pool, const struct cpu_attention *a)
{
    cpu_chunk_fn fn = a->kv == CPU_KV_F32   ? attention_ref_chunk
                      : a->kv == CPU_KV_F16 ? attention_f16_chunk
                                            : attention_e4m3_chunk;
    size_t work = 0;
    for (int t = 0; t < a->ntok; t++)
        work += 2 * (size_t)(a->tok_pos[t] + 1) * (size_t)a->sh->heads * (size_t)a->cfg->head_dim;
    int n = a->ntok * a->sh->heads;
    if (work >= CPU_ATTENTION_PARALLEL_MIN_WORK) {
        cpu_pool_run(pool, n, fn, (void *)a);
        return;
    }
    for (int i = 0; i < n; i++)
        fn((void *)a, i, 0);
}
