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
 * code rounds it, so both backends see the same penalized values.
 *
 * Speed: at batch 1 one CTA reads the whole row, so the kernel is bound by
 * load latency and issue. Thread t owns the entries t + SAMPLE_THREADS * j (j
 * ascending) and issues the loads of up to SAMPLE_PER_THREAD of them before it
 * uses any. A row of up to SAMPLE_THREADS * SAMPLE_PER_THREAD logits (32768:
 * the 32000 of the Llama-2 vocabulary) is read once into registers for the two
 * passes that every row makes (max/argmax, sum of exponentials); longer rows
 * go through the same registers chunk by chunk. The other passes (top-N,
 * penalties, radix select, race) stream the row from L1/L2 in chunks of
 * SAMPLE_STREAM_PER_THREAD. Within a thread the scan for the best keeps the
 * first entry and then only strictly larger ones, which is what beats() gives
 * for ascending indices (NaN included); beats() orders the block reduction.
 * The entry-to-thread layout, each thread's visiting order and the order of
 * every sum are those of a plain strided loop, so tokens, logprobs and top-N
 * values are bit for bit those of the one-element-at-a-time loops. */
#include "common.cuh"
#include "rng.h"
#include "sample_reduce.cuh"

#define SAMPLE_THREADS 1024
/* Logits per thread held in registers by the max and sum passes: 32 keeps a
 * 32000-entry row whole and fits the 64 registers that a 1024-thread CTA may
 * use (those passes need little else). */
#define SAMPLE_PER_THREAD 32
#define SAMPLE_CHUNK (SAMPLE_THREADS * SAMPLE_PER_THREAD)
/* Logits per thread and chunk in the other passes, which stream the row from
 * L1/L2: the 32 cached ones would not fit in the registers beside their own
 * state (measured: spills). */
#define SAMPLE_STREAM_PER_THREAD 8

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

/* The logits that a pass sees: a row's raw logits, penalized where the row
 * has penalties (pen != NULL). */
struct work_row {
    const float *row;
    const uint32_t *pen; /* the slot's state, NULL: no penalties */
    float rep, freq, pres;
};

/* Raw logit l of entry i as the draw sees it under w's penalties. */
__device__ __forceinline__ float penalize(const work_row &w, float l, int i)
{
    uint32_t st = w.pen[i];
    if (!(st & FOLIO_K_PEN_SEEN))
        return l;
    l = l > 0.0f ? __fdiv_rn(l, w.rep) : __fmul_rn(l, w.rep);
    uint32_t count = st & FOLIO_K_PEN_COUNT_MASK;
    if (count)
        l = __fsub_rn(l, __fadd_rn(__fmul_rn((float)count, w.freq), w.pres));
    return l;
}

/* This thread's elements of the chunk that starts at base (entry base + j *
 * SAMPLE_THREADS + threadIdx.x in vals[j]), as w sees them. Every load is
 * issued before any is used: one memory round trip per chunk, not one per
 * element. Entries past the row are left alone (never visited). */
template <int N>
__device__ __forceinline__ void load_chunk(const work_row &w, int vocab, int base, float (&vals)[N])
{
#pragma unroll
    for (int j = 0; j < N; j++) {
        int i = base + j * SAMPLE_THREADS + (int)threadIdx.x;
        if (i < vocab)
            vals[j] = w.row[i];
    }
    if (w.pen) {
#pragma unroll
        for (int j = 0; j < N; j++) {
            int i = base + j * SAMPLE_THREADS + (int)threadIdx.x;
            if (i < vocab)
                vals[j] = penalize(w, vals[j], i);
        }
    }
}

/* visit(value, index) for each of this thread's entries of the row as w sees
 * them, in increasing index order (the per-thread reductions rely on it).
 * cached: the whole row is in vals already (vocab <= SAMPLE_CHUNK, loaded as w
 * sees it); otherwise each chunk is loaded into vals in turn. */
template <int N, typename Visit>
__device__ __forceinline__ void for_each_logit(float (&vals)[N], bool cached, const work_row &w,
                                               int vocab, Visit visit)
{
    for (int base = 0; base < vocab; base += N * SAMPLE_THREADS) {
        if (!cached)
            load_chunk(w, vocab, base, vals);
#pragma unroll
        for (int j = 0; j < N; j++) {
            int i = base + j * SAMPLE_THREADS + (int)threadIdx.x;
            if (i < vocab)
                visit(vals[j], i);
        }
    }
}

/* Radix select over the tempered logits s_i = l_i * inv_t (l_i as w sees it) with s_i >= floor_s.
 * by_mass == false: the key of the k-th largest (k = target, a count).
 * by_mass == true: the key at which the mass sum(exp(s - s_max)) from the top
 * first reaches target. */
__device__ __forceinline__ float radix_threshold(const work_row &w, int vocab, float inv_t,
                                                 float s_max, float floor_s, bool by_mass,
                                                 float target, float *hist_f, int *hist_i, int *sel)
{
    float vals[SAMPLE_STREAM_PER_THREAD];
    uint32_t prefix = 0, prefix_mask = 0;
    float remaining = target;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) {
            hist_f[b] = 0.0f;
            hist_i[b] = 0;
        }
        __syncthreads();
        for_each_logit(vals, false, w, vocab, [&](float l, int) {
            float s = l * inv_t;
            if (!(s >= floor_s))
                return;
            uint32_t k = order_key(s);
            if ((k & prefix_mask) != prefix)
                return;
            int bin = (k >> shift) & 255;
            if (by_mass) {
                atomicAdd(&hist_f[bin], __expf(s - s_max));
            } else {
                /* Most logits share their top key bits: one add per bin and
                 * warp, not 32 serialized adds to one address. */
                unsigned same = __match_any_sync(__activemask(), bin);
                if ((int)(threadIdx.x & 31) == __ffs(same) - 1)
                    atomicAdd(&hist_i[bin], __popc(same));
            }
        });
        __syncthreads();
        if (threadIdx.x == 0) {
            /* From the top bin down, in this order (the float sums must round
             * the same way every time); the bins are read 8 at a time, so that
             * the walk waits on the adds, not on a shared-memory load per bin. */
            float cum = 0.0f;
            int chosen = -1, last_nonempty = -1;
            for (int top_bin = 255; top_bin >= 0 && chosen < 0; top_bin -= 8) {
                float wts[8];
#pragma unroll
                for (int k = 0; k < 8; k++)
                    wts[k] = by_mass ? hist_f[top_bin - k] : (float)hist_i[top_bin - k];
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    if (chosen >= 0 || wts[k] <= 0.0f)
                        continue;
                    last_nonempty = top_bin - k;
                    if (cum + wts[k] >= remaining)
                        chosen = top_bin - k;
                    else
                        cum += wts[k];
                }
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
                  const uint32_t *pen_state, int skip_common, bool drop_row)
{
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ float hist_f[256];
    __shared__ int hist_i[256];
    __shared__ int sel[2];

    int r = blockIdx.x;
    /* The rest of the row's parameters are read after the raw passes, so that
     * they do not hold registers beside the cached row. */
    if (params[r].slot < 0)
        return;
    pdl_wait(); /* the logits (the LM head GEMV's) */
    if (skip_common && sample_row_splits(params[r], pen_state, vocab))
        return; /* sampled by folio_k_sample_split or folio_k_sample_rows */
    int num_logprobs = params[r].s.num_logprobs;
    const float *row = logits + (int64_t)r * vocab;
    const work_row raw = {row, NULL, 1.0f, 0.0f, 0.0f};

    float vals[SAMPLE_PER_THREAD];
    bool cached = vocab <= SAMPLE_CHUNK;
    if (cached)
        load_chunk(raw, vocab, 0, vals);

    /* Raw distribution: max, argmax, log-sum-exp. */
    float bv = -INFINITY;
    int bi = -1;
    for_each_logit(vals, cached, raw, vocab, [&](float v, int i) { fold_ascending(v, i, bv, bi); });
    arg_best top = block_argmax(bv, bi, sv, si);
    float mx = top.v;
    float se = 0.0f;
    for_each_logit(vals, cached, raw, vocab, [&](float v, int) { se += __expf(v - mx); });
    float lse = mx + logf(block_sum(se, sv));

    /* Top-N logprobs: N passes, each the best strictly after the previous one
     * in (value descending, index ascending) order. They stream the row again
     * (from L1/L2): the cached row would not fit in the registers beside them. */
    float stream[SAMPLE_STREAM_PER_THREAD];
    float prev_v = INFINITY;
    int prev_i = -1;
    const int top_n = num_logprobs < 0              ? 0
                      : num_logprobs < max_logprobs ? num_logprobs
                                                    : max_logprobs;
    for (int n = 0; n < top_n; n++) {
        bv = -INFINITY;
        bi = -1;
        for_each_logit(stream, false, raw, vocab, [&](float v, int i) {
            if (v < prev_v || (v == prev_v && i > prev_i))
                fold_ascending(v, i, bv, bi);
        });
        arg_best b = block_argmax(bv, bi, sv, si);
        prev_v = b.v;
        prev_i = b.i;
        if (threadIdx.x == 0) {
            out_top_ids[(int64_t)r * max_logprobs + n] = b.i;
            out_top_logprobs[(int64_t)r * max_logprobs + n] = b.v - lse;
        }
    }
    /* The unused slots, by one thread: as a loop of the whole block (every
     * thread counting through all of them) it was a large share of the
     * instructions the kernel ran at large batches. */
    if (threadIdx.x == 0)
        for (int n = top_n; n < max_logprobs; n++) {
            out_top_ids[(int64_t)r * max_logprobs + n] = -1;
            out_top_logprobs[(int64_t)r * max_logprobs + n] = -INFINITY;
        }

    struct folio_k_sample_params p = params[r];
    /* The draw's logits: penalized (as the CPU sampler decides it), or the raw ones. */
    bool penalized = pen_state && (p.s.repetition_penalty != 1.0f || p.s.frequency_penalty != 0.0f ||
                                   p.s.presence_penalty != 0.0f);
    work_row w = {row, penalized ? pen_state + (int64_t)p.slot * vocab : NULL, p.s.repetition_penalty,
                  p.s.frequency_penalty, p.s.presence_penalty};
    if (penalized) {
        bv = -INFINITY;
        bi = -1;
        for_each_logit(stream, false, w, vocab,
                       [&](float v, int i) { fold_ascending(v, i, bv, bi); });
        arg_best ptop = block_argmax(bv, bi, sv, si);
        if (ptop.i >= 0) {
            top = ptop;
            mx = ptop.v;
        }
    }

    int token = top.i;
    if (p.s.temperature > 0.0f && p.s.top_k != 1) {
        float inv_t = 1.0f / p.s.temperature;
        float s_max = mx * inv_t;
        float floor_s = -INFINITY;
        if (p.s.top_k > 0 && p.s.top_k < vocab)
            floor_s = radix_threshold(w, vocab, inv_t, s_max, -INFINITY, false, (float)p.s.top_k,
                                      hist_f, hist_i, sel);
        if (p.s.top_p < 1.0f) {
            float z = 0.0f;
            for_each_logit(stream, false, w, vocab, [&](float l, int) {
                float s = l * inv_t;
                if (s >= floor_s)
                    z += __expf(s - s_max);
            });
            z = block_sum(z, sv);
            float thr = radix_threshold(w, vocab, inv_t, s_max, floor_s, true,
                                        fmaxf(p.s.top_p, 0.0f) * z, hist_f, hist_i, sel);
            floor_s = fmaxf(floor_s, thr);
        }
        if (p.s.min_p > 0.0f)
            floor_s = fmaxf(floor_s, s_max + logf(p.s.min_p));
        bv = -INFINITY;
        bi = -1;
        for_each_logit(stream, false, w, vocab, [&](float l, int i) {
            float s = l * inv_t;
            if (!(s >= floor_s))
                return;
            float e = -logf(folio_rng_uniform(p.s.seed, (uint32_t)p.output_index, (uint32_t)i));
            fold_ascending(expf(s - s_max) / e, i, bv, bi);
        });
        arg_best b = block_argmax(bv, bi, sv, si);
        if (b.i >= 0)
            token = b.i;
    }
    if (threadIdx.x == 0) {
        out_tokens[r] = token;
        out_logprobs[r] = row[token] - lse;
        last_sampled[p.slot] = token;
    }
    if (drop_row) { /* once every read of the row is done */
        __syncthreads();
        for (int i = threadIdx.x; i < vocab / 32; i += SAMPLE_THREADS)
            l2_discard(row + 32 * i);
    }
}

extern "C" cudaError_t
folio_k_sample(const float *logits, int rows, int vocab, const struct folio_k_sample_params *params,
               int32_t *out_tokens, float *out_logprobs, int32_t *out_top_ids,
               float *out_top_logprobs, int max_logprobs, int32_t *last_sampled,
               const uint32_t *pen_state, void *split_ws, int drop_logits, int pdl, cudaStream_t s)
{
    if (rows <= 0)
        return cudaSuccess;
    /* Rows are dropped as whole lines: each must start on one. */
    drop_logits = drop_logits && vocab % 32 == 0 && ((uintptr_t)logits & 127) == 0;
    /* The common rows (sample_row_splits) first, by the kernels made for
     * them: over several CTAs a row in steps of a few rows, one CTA a row in
     * one read above that (float4: a vocabulary that is a multiple of 4). */
    bool common = split_ws != NULL;
    if (common && rows <= FOLIO_K_SAMPLE_SPLIT_MAX_ROWS) {
        cudaError_t e = folio_k_sample_split(logits, rows, vocab, params, out_tokens, out_logprobs,
                                             out_top_ids, out_top_logprobs, max_logprobs,
                                             last_sampled, pen_state, split_ws, pdl, s);
        if (e != cudaSuccess)
            return e;
    } else if (common && vocab % 4 == 0 && ((uintptr_t)logits & 15) == 0) {
        cudaError_t e = folio_k_sample_rows(logits, rows, vocab, params, out_tokens, out_logprobs,
                                            out_top_ids, out_top_logprobs, max_logprobs,
                                            last_sampled, pen_state, drop_logits, pdl, s);
        if (e != cudaSuccess)
            return e;
    } else {
        common = false;
    }
    if (common)
        pdl = 1; /* after kernels that let it start early */
    cudaError_t e =
        launch_pdl(sample_kernel, dim3(rows), dim3(SAMPLE_THREADS), 0, s, pdl != 0, logits, vocab,
                   params, out_tokens, out_logprobs, out_top_ids, out_top_logprobs, max_logprobs,
                   last_sampled, pen_state, common ? 1 : 0, drop_logits != 0);
    return e != cudaSuccess ? e : cudaGetLastError();
}
