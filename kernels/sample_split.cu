/* Sampling of the common rows over several CTAs a row (sample_row_splits:
 * greedy, or tempered with no filter, without penalties or top-N logprobs),
 * where sample.cu's kernel reads a whole row in one CTA (at batch 1 a visible
 * share of the step).
 *
 * Row r is cut into SPLIT_CTAS slices of consecutive entries. sample_scan_kernel
 * takes each slice's raw best (value, lowest index) and its sum of
 * exp(l - slice max). sample_finish_kernel merges those, in slice order, into the
 * row's max, argmax and log-sum-exp (every CTA of the row alike). A greedy row
 * is then done: its first CTA writes the token. A tempered row runs the
 * exponential race of sample.cu on each slice with the row's s_max, and the
 * last of its CTAs to finish (an atomic counter, reset by that CTA) merges the
 * slices' winners in slice order. Each entry's race key is computed as
 * sample.cu computes it, and every merge goes through beats(), so the token is
 * the one-CTA kernel's. The log-sum-exp adds in another order, so a logprob
 * may differ from that kernel's in the last bits.
 *
 * Both kernels trigger their dependents at once and wait for the kernel
 * before them in every CTA, rows they skip included: the next kernel may then
 * wait on the one before it alone. */
#include "common.cuh"
#include "rng.h"
#include "sample_reduce.cuh"

#define SPLIT_CTAS 16
#define SPLIT_THREADS 256
#define SPLIT_PER_THREAD 8 /* loads issued before any is used */

struct scan_part {
    float max;
    int index;
    float sum; /* of exp(l - max) over the slice; 0 for a slice of -inf */
    float unused;
};

struct race_part {
    float value;
    int index;
};

/* The workspace, a block a row at a fixed place whatever the step's row
 * count (the counters must stay zero between launches): its counter, then
 * its slices' scan and race results. */
struct split_row_ws {
    int counter;
    int unused[3];
    scan_part parts[SPLIT_CTAS];
    race_part races[SPLIT_CTAS];
};

/* visit(l, i) for this thread's entries of [lo, hi) in increasing order,
 * SPLIT_PER_THREAD loads in flight at a time. */
template <typename Visit>
__device__ __forceinline__ void for_each_in_slice(const float *row, int lo, int hi, Visit visit)
{
    for (int base = lo; base < hi; base += SPLIT_PER_THREAD * SPLIT_THREADS) {
        float v[SPLIT_PER_THREAD];
#pragma unroll
        for (int j = 0; j < SPLIT_PER_THREAD; j++) {
            int i = base + j * SPLIT_THREADS + (int)threadIdx.x;
            v[j] = i < hi ? row[i] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < SPLIT_PER_THREAD; j++) {
            int i = base + j * SPLIT_THREADS + (int)threadIdx.x;
            if (i < hi)
                visit(v[j], i);
        }
    }
}

__global__ void __launch_bounds__(SPLIT_THREADS)
    sample_scan_kernel(const float *logits, int vocab, const struct folio_k_sample_params *params,
                       const uint32_t *pen_state, split_row_ws *ws)
{
    __shared__ float sv[32];
    __shared__ int si[32];
    pdl_trigger();
    pdl_wait(); /* the logits */
    const int r = blockIdx.x, g = blockIdx.y, G = gridDim.y;
    if (!sample_row_splits(params[r], pen_state, vocab))
        return;
    const int per = (vocab + G - 1) / G, lo = g * per, hi = min(vocab, lo + per);
    const float *row = logits + (int64_t)r * vocab;
    float bv = -INFINITY;
    int bi = -1;
    for_each_in_slice(row, lo, hi, [&](float l, int i) { fold_ascending(l, i, bv, bi); });
    const arg_best b = block_argmax(bv, bi, sv, si);
    float se = 0.0f;
    if (b.v != -INFINITY)
        for_each_in_slice(row, lo, hi, [&](float l, int) { se += __expf(l - b.v); });
    se = block_sum(se, sv);
    if (threadIdx.x == 0)
        ws[r].parts[g] = {b.v, b.i, se, 0.0f};
}

__global__ void __launch_bounds__(SPLIT_THREADS)
    sample_finish_kernel(const float *logits, int vocab, const struct folio_k_sample_params *params,
                         const uint32_t *pen_state, split_row_ws *ws, int32_t *out_tokens,
                         float *out_logprobs, int32_t *out_top_ids, float *out_top_logprobs,
                         int max_logprobs, int32_t *last_sampled)
{
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ int is_last;
    pdl_trigger();
    pdl_wait(); /* sample_scan_kernel's partials */
    const int r = blockIdx.x, g = blockIdx.y, G = gridDim.y;
    const struct folio_k_sample_params p = params[r];
    if (!sample_row_splits(p, pen_state, vocab))
        return;
    const float *row = logits + (int64_t)r * vocab;

    /* The row's raw max and argmax, then its log-sum-exp, slice by slice. */
    float mx = -INFINITY;
    int mi = -1;
    for (int k = 0; k < G; k++) {
        const scan_part q = ws[r].parts[k];
        if (beats(q.max, q.index, mx, mi)) {
            mx = q.max;
            mi = q.index;
        }
    }
    float se = 0.0f;
    for (int k = 0; k < G; k++) {
        const scan_part q = ws[r].parts[k];
        if (q.max != -INFINITY)
            se += q.sum * __expf(q.max - mx);
    }
    const float lse = mx + logf(se);

    int token = mi;
    if (p.s.temperature > 0.0f && p.s.top_k != 1) {
        /* The race over this slice (sample.cu's keys, floor -inf), then the
         * slices' winners merged by the last CTA. */
        const float inv_t = 1.0f / p.s.temperature, s_max = mx * inv_t;
        const int per = (vocab + G - 1) / G, lo = g * per, hi = min(vocab, lo + per);
        float bv = -INFINITY;
        int bi = -1;
        for_each_in_slice(row, lo, hi, [&](float l, int i) {
            float s = l * inv_t;
            if (!(s >= -INFINITY))
                return;
            float e = -logf(folio_rng_uniform(p.s.seed, (uint32_t)p.output_index, (uint32_t)i));
            fold_ascending(expf(s - s_max) / e, i, bv, bi);
        });
        const arg_best b = block_argmax(bv, bi, sv, si);
        if (threadIdx.x == 0)
            ws[r].races[g] = {b.v, b.i};
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            is_last = atomicAdd(&ws[r].counter, 1) == G - 1;
            if (is_last)
                ws[r].counter = 0; /* every CTA of the row has counted: ready for the next launch */
        }
        __syncthreads();
        if (!is_last)
            return;
        __threadfence();
        float wv = -INFINITY;
        int wi = -1;
        for (int k = 0; k < G; k++) {
            const float v = __ldcg(&ws[r].races[k].value);
            const int i = __ldcg(&ws[r].races[k].index);
            if (beats(v, i, wv, wi)) {
                wv = v;
                wi = i;
            }
        }
        if (wi >= 0)
            token = wi;
    } else if (g != 0) {
        return; /* greedy: the first CTA writes the token */
    }
    if (threadIdx.x == 0) {
        out_tokens[r] = token;
        out_logprobs[r] = row[token] - lse;
        last_sampled[p.slot] = token;
    }
    for (int n = threadIdx.x; n < max_logprobs; n += SPLIT_THREADS) {
        out_top_ids[(int64_t)r * max_logprobs + n] = -1;
        out_top_logprobs[(int64_t)r * max_logprobs + n] = -INFINITY;
    }
}

extern "C" size_t folio_k_sample_split_bytes(int rows)
{
    return (size_t)rows * sizeof(split_row_ws);
}

extern "C" cudaError_t folio_k_sample_split(const float *logits, int rows, int vocab,
                                            const struct folio_k_sample_params *params,
                                            int32_t *out_tokens, float *out_logprobs,
                                            int32_t *out_top_ids, float *out_top_logprobs,
                                            int max_logprobs, int32_t *last_sampled,
                                            const uint32_t *pen_state, void *workspace, int pdl,
                                            cudaStream_t s)
{
    if (rows <= 0)
        return cudaSuccess;
    split_row_ws *ws = (split_row_ws *)workspace;
    const dim3 grid((unsigned)rows, SPLIT_CTAS);
    cudaError_t e = launch_pdl(sample_scan_kernel, grid, dim3(SPLIT_THREADS), 0, s, pdl != 0,
                               logits, vocab, params, pen_state, ws);
    if (e == cudaSuccess)
        e = launch_pdl(sample_finish_kernel, grid, dim3(SPLIT_THREADS), 0, s, true, logits, vocab,
                       params, pen_state, ws, out_tokens, out_logprobs, out_top_ids,
                       out_top_logprobs, max_logprobs, last_sampled);
    return e != cudaSuccess ? e : cudaGetLastError();
}
