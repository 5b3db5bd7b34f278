/* Sampling on the GPU, one CTA per sampling row of f32 logits.
 *
 * logprobs (of the sampled token and the top N) are taken from the raw
 * distribution, as OpenAI and vLLM report them. The token: greedy is the
 * argmax (lowest index on ties); otherwise the logits are divided by the
 * temperature, filtered by top-k, top-p (the smallest set of highest
 * probabilities whose mass reaches top_p, within the top-k set) and min-p
 * (p >= min_p * p_max), and the token is the exponential race of common/rng.h:
 * argmax over the kept i of p_i / E_i, E_i = -log(folio_rng_uniform(seed,
 * output_index, i)), which draws i with probability p_i and depends only on
 * the request's seed and position, so the CPU backend draws the same token.
 *
 * The top-k and top-p thresholds are found without sorting, by a radix select
 * over the order-preserving bit patterns of the tempered logits: four passes of
 * 256-bin histograms (counts for top-k, probability mass for top-p).
 *
 * Penalties (worker/sampler.c's, in its order) change the logits that the
 * draw sees, never the logprobs: each pass that reads a logit for the draw
 * applies them on the fly from the slot's state word (penalties.cu), which
 * costs a second 4-byte read per token only in rows that have penalties. The
 * arithmetic is rounded step by step (no contraction into an FMA) as the C
 * code rounds it, so both backends see the same penalized values. */
#include "common.cuh"
#include "rng.h"

#define SAMPLE_THREADS 1024

/* Float -> unsigned with the same order. */
__device__ __forceinline__ uint32_t order_key(float f)
{
    uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_to_float(uint32_t k)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* The logits that the draw sees: a row's raw logits, penalized where the
 * row has penalties (pen != NULL). */
struct work_row {
    const float *row;
    const uint32_t *pen; /* the slot's state, NULL: no penalties */
    float rep, freq, pres;
};

__device__ __forceinline__ float work_logit(const work_row &w, int i)
{
    float l = w.row[i];
    if (!w.pen)
        return l;
    uint32_t st = w.pen[i];
    if (!(st & FOLIO_K_PEN_SEEN))
        return l;
    l = l > 0.0f ? __fdiv_rn(l, w.rep) : __fmul_rn(l, w.rep);
    uint32_t count = st & FOLIO_K_PEN_COUNT_MASK;
    if (count)
        l = __fsub_rn(l, __fadd_rn(__fmul_rn((float)count, w.freq), w.pres));
    return l;
}

struct arg_best {
    float v;
    int i;
};

__device__ __forceinline__ bool beats(float a, int ia, float b, int ib)
{
    return a > b || (a == b && ia < ib && ia >= 0) || (ib < 0 && ia >= 0);
}

/* Block-wide best (largest value, lowest index); every thread gets it. */
__device__ arg_best block_argmax(float v, int i, float *sv, int *si)
{
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, o);
        int oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (beats(ov, oi, v, i)) {
            v = ov;
            i = oi;
        }
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) {
        sv[warp] = v;
        si[warp] = i;
    }
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? sv[lane] : -INFINITY;
    i = lane < (int)(blockDim.x >> 5) ? si[lane] : -1;
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, o);
        int oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (beats(ov, oi, v, i)) {
            v = ov;
            i = oi;
        }
    }
    arg_best r = {v, i};
    return r;
}

/* Radix select over the tempered logits s_i = work_logit(i) * inv_t with s_i >= floor_s.
 * by_mass == false: the key of the k-th largest (k = target, a count).
 * by_mass == true: the key at which the mass sum(exp(s - s_max)) from the top
 * first reaches target. */
__device__ float radix_threshold(const work_row &row, int vocab, float inv_t, float s_max,
                                 float floor_s, bool by_mass, float target, float *hist_f,
                                 int *hist_i, int *sel)
{
    uint32_t prefix = 0, prefix_mask = 0;
    float remaining = target;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) {
            hist_f[b] = 0.0f;
            hist_i[b] = 0;
        }
        __syncthreads();
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            float s = work_logit(row, i) * inv_t;
            if (!(s >= floor_s))
                continue;
            uint32_t k = order_key(s);
            if ((k & prefix_mask) != prefix)
                continue;
            int bin = (k >> shift) & 255;
            if (by_mass)
                atomicAdd(&hist_f[bin], __expf(s - s_max));
            else
                atomicAdd(&hist_i[bin], 1);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            float cum = 0.0f;
            int chosen = -1, last_nonempty = -1;
            for (int bin = 255; bin >= 0; bin--) {
                float w = by_mass ? hist_f[bin] : (float)hist_i[bin];
                if (w <= 0.0f)
                    continue;
                last_nonempty = bin;
                if (cum + w >= remaining) {
                    chosen = bin;
                    break;
                }
                cum += w;
            }
            if (chosen < 0) /* rounding left the target unmet: take everything */
                chosen = last_nonempty < 0 ? 0 : last_nonempty;
            else
                remaining -= cum;
            sel[0] = chosen;
            ((float *)sel)[1] = remaining;
        }
        __syncthreads();
        prefix |= (uint32_t)sel[0] << shift;
        prefix_mask |= 255u << shift;
        remaining = ((float *)sel)[1];
        __syncthreads();
    }
    return key_to_float(prefix);
}

__global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_kernel(const float *logits, int vocab, const struct folio_k_sample_params *params,
                  int32_t *out_tokens, float *out_logprobs, int32_t *out_top_ids,
                  float *out_top_logprobs, int max_logprobs, int32_t *last_sampled,
                  const uint32_t *pen_state)
{
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ float hist_f[256];
    __shared__ int hist_i[256];
    __shared__ int sel[2];

    int r = blockIdx.x;
    struct folio_k_sample_params p = params[r];
    if (p.slot < 0)
        return;
    const float *row = logits + (int64_t)r * vocab;

    /* Raw distribution: max, argmax, log-sum-exp. */
    /* Unrolled so that each thread has several independent loads in flight: the
     * plain loop waited out an L2 round trip per element (~17 us at batch 1). */
    float bv = -INFINITY;
    int bi = -1;
#pragma unroll 8
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        float v = row[i];
        if (beats(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    arg_best top = block_argmax(bv, bi, sv, si);
    float mx = top.v;
    float se = 0.0f;
#pragma unroll 8
    for (int i = threadIdx.x; i < vocab; i += blockDim.x)
        se += __expf(row[i] - mx);
    float lse = mx + logf(block_sum(se, sv));

    /* Top-N logprobs: N passes, each the best strictly after the previous one
     * in (value descending, index ascending) order. */
    float prev_v = INFINITY;
    int prev_i = -1;
    for (int n = 0; n < max_logprobs; n++) {
        if (n < p.num_logprobs) {
            bv = -INFINITY;
            bi = -1;
            for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
                float v = row[i];
                bool after = v < prev_v || (v == prev_v && i > prev_i);
                if (after && beats(v, i, bv, bi)) {
                    bv = v;
                    bi = i;
                }
            }
            arg_best b = block_argmax(bv, bi, sv, si);
            prev_v = b.v;
            prev_i = b.i;
            if (threadIdx.x == 0) {
                out_top_ids[(int64_t)r * max_logprobs + n] = b.i;
                out_top_logprobs[(int64_t)r * max_logprobs + n] = b.v - lse;
            }
        } else if (threadIdx.x == 0) {
            out_top_ids[(int64_t)r * max_logprobs + n] = -1;
            out_top_logprobs[(int64_t)r * max_logprobs + n] = -INFINITY;
        }
    }

    /* The draw's logits: penalized (as the CPU sampler decides it), or the raw ones. */
    bool penalized = pen_state && (p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f ||
                                   p.presence_penalty != 0.0f);
    work_row w = {row, penalized ? pen_state + (int64_t)p.slot * vocab : NULL, p.repetition_penalty,
                  p.frequency_penalty, p.presence_penalty};
    if (penalized) {
        bv = -INFINITY;
        bi = -1;
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            float v = work_logit(w, i);
            if (beats(v, i, bv, bi)) {
                bv = v;
                bi = i;
            }
        }
        arg_best ptop = block_argmax(bv, bi, sv, si);
        if (ptop.i >= 0) {
            top = ptop;
            mx = ptop.v;
        }
    }

    int token = top.i;
    if (p.temperature > 0.0f && p.top_k != 1) {
        float inv_t = 1.0f / p.temperature;
        float s_max = mx * inv_t;
        float floor_s = -INFINITY;
        if (p.top_k > 0 && p.top_k < vocab)
            floor_s = radix_threshold(w, vocab, inv_t, s_max, -INFINITY, false, (float)p.top_k,
                                      hist_f, hist_i, sel);
        if (p.top_p < 1.0f) {
            float z = 0.0f;
            for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
                float s = work_logit(w, i) * inv_t;
                if (s >= floor_s)
                    z += __expf(s - s_max);
            }
            z = block_sum(z, sv);
            float thr = radix_threshold(w, vocab, inv_t, s_max, floor_s, true,
                                        fmaxf(p.top_p, 0.0f) * z, hist_f, hist_i, sel);
            floor_s = fmaxf(floor_s, thr);
        }
        if (p.min_p > 0.0f)
            floor_s = fmaxf(floor_s, s_max + logf(p.min_p));
        bv = -INFINITY;
        bi = -1;
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            float s = work_logit(w, i) * inv_t;
            if (!(s >= floor_s))
                continue;
            float e = -logf(folio_rng_uniform(p.seed, (uint32_t)p.output_index, (uint32_t)i));
            float score = expf(s - s_max) / e;
            if (beats(score, i, bv, bi)) {
                bv = score;
                bi = i;
            }
        }
        arg_best b = block_argmax(bv, bi, sv, si);
        if (b.i >= 0)
            token = b.i;
    }
    if (threadIdx.x == 0) {
        out_tokens[r] = token;
        out_logprobs[r] = row[token] - lse;
        last_sampled[p.slot] = token;
    }
}

extern "C" cudaError_t folio_k_sample(const float *logits, int rows, int vocab,
                                      const struct folio_k_sample_params *params,
                                      int32_t *out_tokens, float *out_logprobs,
                                      int32_t *out_top_ids, float *out_top_logprobs,
                                      int max_logprobs, int32_t *last_sampled,
                                      const uint32_t *pen_state, cudaStream_t s)
{
    if (rows <= 0)
        return cudaSuccess;
    sample_kernel<<<rows, SAMPLE_THREADS, 0, s>>>(logits, vocab, params, out_tokens, out_logprobs,
                                                  out_top_ids, out_top_logprobs, max_logprobs,
                                                  last_sampled, pen_state);
    return cudaGetLastError();
}
