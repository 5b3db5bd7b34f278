/* The reductions that the sampling kernels share (sample.cu, sample_split.cu):
 * the best entry of a row, by value and then lowest index, within a thread's
 * ascending scan, a warp and a block; and which rows the split sampler takes.
 * Every merge of partial bests goes through beats(), so a row's best is the
 * same whatever the split. */
#ifndef FOLIO_KERNELS_SAMPLE_REDUCE_CUH
#define FOLIO_KERNELS_SAMPLE_REDUCE_CUH

#include "common.cuh"

struct arg_best {
    float v;
    int i;
};

/* The order of the block-wide reduction: larger value, then lower index; an
 * entry (ia >= 0) beats no entry (ib < 0) whatever its value, NaN included. */
__device__ __forceinline__ bool beats(float a, int ia, float b, int ib)
{
    return a > b || (a == b && ia < ib && ia >= 0) || (ib < 0 && ia >= 0);
}

/* beats(a, ia, best, bi) where ia is larger than every index already folded
 * into (best, bi), as in a thread's own scan: the first entry is taken, a later
 * one only if strictly larger (a tie keeps the lower index; a NaN never
 * replaces nor is replaced, as in beats). */
__device__ __forceinline__ void fold_ascending(float a, int ia, float &best, int &bi)
{
    if (bi < 0 || a > best) {
        best = a;
        bi = ia;
    }
}

/* Warp-wide best (largest value, lowest index); every lane gets it. */
__device__ __forceinline__ void warp_argmax(float &v, int &i)
{
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, o);
        int oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (beats(ov, oi, v, i)) {
            v = ov;
            i = oi;
        }
    }
}

/* Block-wide best (largest value, lowest index); every thread gets it. */
__device__ __forceinline__ arg_best block_argmax(float v, int i, float *sv, int *si)
{
    warp_argmax(v, i);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) {
        sv[warp] = v;
        si[warp] = i;
    }
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? sv[lane] : -INFINITY;
    i = lane < (int)(blockDim.x >> 5) ? si[lane] : -1;
    warp_argmax(v, i);
    arg_best r = {v, i};
    return r;
}

/* Whether sample_split.cu samples row p (and sample_kernel leaves it): a
 * sampling row without top-N logprobs and without penalties that is greedy,
 * or tempered with no top-k, top-p or min-p filter (the race over the whole
 * row). The tests mirror sample_kernel's own, so both agree on every row. */
__device__ __forceinline__ bool sample_row_splits(const struct folio_k_sample_params &p,
                                                  const uint32_t *pen_state, int vocab)
{
    if (p.slot < 0 || p.s.num_logprobs > 0)
        return false;
    if (pen_state &&
        (p.s.repetition_penalty != 1.0f || p.s.frequency_penalty != 0.0f || p.s.presence_penalty != 0.0f))
        return false;
    if (!(p.s.temperature > 0.0f && p.s.top_k != 1))
        return true; /* greedy */
    return !(p.s.top_k > 0 && p.s.top_k < vocab) && !(p.s.top_p < 1.0f) && !(p.s.min_p > 0.0f);
}

#endif
