/* Sampling of the common rows (sample_row_splits: greedy, or tempered with no
 * filter, without penalties or top-N logprobs) of steps of more rows than the
 * split sampler takes: one CTA a row, the row's max, argmax and log-sum-exp in
 * one read of it.
 *
 * Why not sample.cu's kernel: it holds a 32000-entry row in the registers of
 * 1024 threads, so one CTA fills an SM and 256 rows run in two waves, and each
 * entry costs it a scalar load, its index and bound, and two passes. Here 512
 * threads a CTA (two CTAs an SM: one wave up to 256 rows on an H200) read
 * the row as float4, VEC of them a thread at a time while the next VEC are in
 * flight, and keep per thread the best entry and a running sum of exp(l - m)
 * over its own running max m (rescaled when m grows: the online softmax),
 * merged over the block at the end. sample.cu's kernel, launched after it for
 * the other rows, returns at once in the rows taken here.
 *
 * Alone it is faster than sample.cu's kernel on the same rows; in a step the
 * gain shows on tempered rows, where sample.cu's passes cost most.
 *
 * Results: the token is sample.cu's (each thread visits its entries in
 * ascending index order through fold_ascending, and the block merges through
 * beats(); a tempered row's race keys are computed as sample.cu computes them,
 * with the same s_max). The log-sum-exp adds in another order, so a logprob
 * may differ from that kernel's in the last bits. Rows of a vocabulary that
 * is not a multiple of 4 do not come here (folio_k_sample). */
#include "common.cuh"
#include "rng.h"
#include "sample_reduce.cuh"

#define ROWS_THREADS 512
#define ROWS_VEC 4 /* float4 loads a thread has in flight while it folds the last VEC */

/* The thread's float4s of a chunk: entries 4 q .. 4 q + 3, q = base + j *
 * ROWS_THREADS + threadIdx.x; past the row stays untouched (never visited). */
__device__ __forceinline__ void load_vecs(const float4 *row4, int n4, int base,
                                          float4 (&v)[ROWS_VEC])
{
#pragma unroll
    for (int j = 0; j < ROWS_VEC; j++) {
        const int q = base + j * ROWS_THREADS + (int)threadIdx.x;
        if (q < n4)
            v[j] = row4[q];
    }
}

/* visit(l, i) for the thread's entries in ascending index order, the next
 * chunk's loads issued before the current chunk is visited; chunk(cur, base)
 * runs first on each chunk (with base its first float4). */
template <typename Chunk, typename Visit>
__device__ __forceinline__ void for_each_vec(const float4 *row4, int n4, Chunk chunk, Visit visit)
{
    constexpr int STEP = ROWS_VEC * ROWS_THREADS;
    float4 next[ROWS_VEC];
    load_vecs(row4, n4, 0, next);
    for (int base = 0; base < n4; base += STEP) {
        float4 cur[ROWS_VEC];
#pragma unroll
        for (int j = 0; j < ROWS_VEC; j++)
            cur[j] = next[j];
        if (base + STEP < n4)
            load_vecs(row4, n4, base + STEP, next);
        chunk(cur, base);
#pragma unroll
        for (int j = 0; j < ROWS_VEC; j++) {
            const int q = base + j * ROWS_THREADS + (int)threadIdx.x;
            if (q < n4) {
                visit(cur[j].x, 4 * q);
                visit(cur[j].y, 4 * q + 1);
                visit(cur[j].z, 4 * q + 2);
                visit(cur[j].w, 4 * q + 3);
            }
        }
    }
}

__global__ void __launch_bounds__(ROWS_THREADS, 2)
    sample_rows_kernel(const float *logits, int vocab, const struct folio_k_sample_params *params,
                       const uint32_t *pen_state, int32_t *out_tokens, float *out_logprobs,
                       int32_t *out_top_ids, float *out_top_logprobs, int max_logprobs,
                       int32_t *last_sampled, bool drop_row)
{
    __shared__ float sv[32];
    __shared__ int si[32];
    pdl_trigger();
    const int r = blockIdx.x;
    const struct folio_k_sample_params p = params[r]; /* the host's: readable before the wait */
    /* Every CTA waits, rows it leaves included, so that the kernel after this
     * one may wait on this one alone. */
    pdl_wait(); /* the logits */
    if (!sample_row_splits(p, pen_state, vocab))
        return; /* sample_kernel's */
    const float *row = logits + (int64_t)r * vocab;
    const float4 *row4 = (const float4 *)row;
    const int n4 = vocab / 4;

    /* One read: the best entry, and sum exp(l - m) over the thread's running
     * max m, rescaled when a chunk raises m (2^(l log2e - m log2e); nothing
     * is added while m is -inf, and NaNs leave m alone but make the sum NaN,
     * as in sample.cu). */
    constexpr float LOG2E = 1.4426950408889634f;
    float bv = -INFINITY, m = -INFINITY, m2 = 0.0f, se = 0.0f;
    int bi = -1;
    for_each_vec(
        row4, n4,
        [&](const float4(&cur)[ROWS_VEC], int base) {
            float cm = m;
#pragma unroll
            for (int j = 0; j < ROWS_VEC; j++)
                if (base + j * ROWS_THREADS + (int)threadIdx.x < n4)
                    cm = fmaxf(fmaxf(cm, fmaxf(cur[j].x, cur[j].y)), fmaxf(cur[j].z, cur[j].w));
            if (cm > m) {
                se *= exp2_ftz(m2 - cm * LOG2E); /* m = -inf: se is 0 */
                m = cm;
                m2 = cm * LOG2E;
            }
        },
        [&](float l, int i) {
            fold_ascending(l, i, bv, bi);
            if (m != -INFINITY)
                se += exp2_ftz(l * LOG2E - m2);
        });
    const arg_best top = block_argmax(bv, bi, sv, si);
    const float mx = top.v;
    const float lse = mx + logf(block_sum(m == -INFINITY ? 0.0f : se * __expf(m - mx), sv));

    /* The token's writer: thread 0 for the argmax (its logit is mx), the
     * race's winner, which holds its logit, for a tempered row. */
    int token = top.i;
    float token_logit = mx;
    bool writes = threadIdx.x == 0;
    if (p.s.temperature > 0.0f && p.s.top_k != 1) {
        /* sample.cu's race, floor -inf, with its s_max. */
        const float inv_t = 1.0f / p.s.temperature, s_max = mx * inv_t;
        float rv = -INFINITY, rl = 0.0f;
        int ri = -1;
        for_each_vec(
            row4, n4, [](const float4(&)[ROWS_VEC], int) {},
            [&](float l, int i) {
                const float s = l * inv_t;
                if (!(s >= -INFINITY))
                    return;
                const float e =
                    -logf(folio_rng_uniform(p.s.seed, (uint32_t)p.output_index, (uint32_t)i));
                const int before = ri;
                fold_ascending(expf(s - s_max) / e, i, rv, ri);
                if (ri != before)
                    rl = l;
            });
        const arg_best b = block_argmax(rv, ri, sv, si);
        if (b.i >= 0) {
            token = b.i;
            token_logit = rl;
            writes = ri == b.i;
        }
    }
    if (writes) {
        out_tokens[r] = token;
        out_logprobs[r] = token_logit - lse;
        last_sampled[p.slot] = token;
    }
    for (int n = threadIdx.x; n < max_logprobs; n += ROWS_THREADS) {
        out_top_ids[(int64_t)r * max_logprobs + n] = -1;
        out_top_logprobs[(int64_t)r * max_logprobs + n] = -INFINITY;
    }
    /* Every thread's reads of the row ended before the last block reduction. */
    if (drop_row)
        for (int i = threadIdx.x; i < vocab / 32; i += ROWS_THREADS)
            l2_discard(row + 32 * i);
}

extern "C" cudaError_t folio_k_sample_rows(const float *logits, int rows, int vocab,
                                           const struct folio_k_sample_params *params,
                                           int32_t *out_tokens, float *out_logprobs,
                                           int32_t *out_top_ids, float *out_top_logprobs,
                                           int max_logprobs, int32_t *last_sampled,
                                           const uint32_t *pen_state, int drop_logits, int pdl,
                                           cudaStream_t s)
{
    if (rows <= 0)
        return cudaSuccess;
    if (vocab % 4 != 0 || ((uintptr_t)logits & 15) != 0)
        return cudaErrorInvalidValue;
    cudaError_t e =
        launch_pdl(sample_rows_kernel, dim3((unsigned)rows), dim3(ROWS_THREADS), 0, s, pdl != 0,
                   logits, vocab, params, pen_state, out_tokens, out_logprobs, out_top_ids,
                   out_top_logprobs, max_logprobs, last_sampled, drop_logits != 0);
    return e != cudaSuccess ? e : cudaGetLastError();
}
