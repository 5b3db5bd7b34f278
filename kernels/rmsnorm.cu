/* Fused residual add + RMSNorm, rounding where Hugging Face's bf16 Llama
 * rounds: the residual sum, the normalized row, and its product with the
 * weight. hidden must be a multiple of 8 (16-byte accesses).
 *
 * The added operand is one bf16 tensor (SPLITS == 0), or the SPLITS f32
 * partial sums of a split-K GEMM, summed here in the order s = 0..SPLITS-1 and
 * rounded to bf16 once, as the GEMM rounds its f32 accumulator when it writes
 * bf16: the reduction of the split costs no launch of its own, and with no
 * atomics a step gives the same bits eagerly and from a CUDA graph. */
#include "common.cuh"

/* re[0..7] = bf16(re + add) for the 8 columns of vector v of the row. */
template <int SPLITS>
__device__ __forceinline__ void add_vec(folio_bf16_bits *re, const folio_bf16_bits *a,
                                        const float *p, int64_t split_stride, int v)
{
    if constexpr (SPLITS == 0) {
        uint4 av = ((const uint4 *)a)[v];
        const folio_bf16_bits *ae = (const folio_bf16_bits *)&av;
        for (int e = 0; e < 8; e++)
            re[e] = f32_to_bf16(bf16_to_f32(re[e]) + bf16_to_f32(ae[e]));
    } else {
        /* Every load issued before the first add. */
        float4 lo[SPLITS], hi[SPLITS];
#pragma unroll
        for (int s = 0; s < SPLITS; s++) {
            lo[s] = ((const float4 *)(p + s * split_stride))[2 * v];
            hi[s] = ((const float4 *)(p + s * split_stride))[2 * v + 1];
        }
        float sum[8] = {lo[0].x, lo[0].y, lo[0].z, lo[0].w, hi[0].x, hi[0].y, hi[0].z, hi[0].w};
#pragma unroll
        for (int s = 1; s < SPLITS; s++) {
            sum[0] += lo[s].x;
            sum[1] += lo[s].y;
            sum[2] += lo[s].z;
            sum[3] += lo[s].w;
            sum[4] += hi[s].x;
            sum[5] += hi[s].y;
            sum[6] += hi[s].z;
            sum[7] += hi[s].w;
        }
        for (int e = 0; e < 8; e++)
            re[e] = f32_to_bf16(bf16_to_f32(re[e]) + round_bf16(sum[e]));
    }
}

/* The row's first KEEP * blockDim.x vectors (all of them up to hidden 4096 at
 * 256 threads) stay in registers across the reduction, with their weights
 * loaded before it: the second pass then reads nothing, where re-reading the
 * residual and the weight after the block sum added a memory round trip to a
 * kernel that is all latency. */
#define KEEP 2

/* src[v] (+ the added operand) into rv; written to res[v] when rows is NULL
 * and it differs from what res holds (an added operand, or src another row). */
template <int SPLITS>
__device__ __forceinline__ float
load_sum(uint4 &rv, const folio_bf16_bits *src, folio_bf16_bits *res, const folio_bf16_bits *a,
         const float *p, int64_t split_stride, bool has_add, bool copy, bool write, int v)
{
    rv = ((const uint4 *)src)[v];
    folio_bf16_bits *re = (folio_bf16_bits *)&rv;
    if (has_add) {
        add_vec<SPLITS>(re, a, p, split_stride, v);
        if (write)
            ((uint4 *)res)[v] = rv;
    } else if (copy && write) {
        ((uint4 *)res)[v] = rv;
    }
    float ss = 0.0f;
    for (int e = 0; e < 8; e++) {
        float x = bf16_to_f32(re[e]);
        ss += x * x;
    }
    return ss;
}

__device__ __forceinline__ uint4 norm_vec(const uint4 &rv, const uint4 &wv, float inv)
{
    const folio_bf16_bits *re = (const folio_bf16_bits *)&rv, *we = (const folio_bf16_bits *)&wv;
    uint4 ov;
    folio_bf16_bits *oe = (folio_bf16_bits *)&ov;
    for (int e = 0; e < 8; e++)
        oe[e] = f32_to_bf16(bf16_to_f32(we[e]) * round_bf16(bf16_to_f32(re[e]) * inv));
    return ov;
}

/* One CTA per output row; add (SPLITS == 0) or partials (SPLITS > 0) is read.
 * src: the row's residual comes from there (the embedding's row, copied into
 * the residual), NULL: from the residual itself. drop: drop.dead, and with
 * drop.input the row's added operand once added (whole lines only: the
 * launcher checks, l2_drop_check). */
template <int SPLITS>
__device__ __forceinline__ void
add_rmsnorm_row(folio_bf16_bits *out, folio_bf16_bits *residual, const folio_bf16_bits *src,
                const folio_bf16_bits *add, const float *partials, int64_t split_stride,
                const folio_bf16_bits *weight, const int32_t *rows, int hidden, float eps,
                const struct folio_k_l2_drop &drop)
{
    __shared__ float scratch[32];
    int r = blockIdx.x;
    int row = rows ? rows[r] : r;
    folio_bf16_bits *res = residual + (int64_t)row * hidden;
    const bool copy = src != NULL;
    if (!src)
        src = res;
    const folio_bf16_bits *a = add ? add + (int64_t)row * hidden : NULL;
    const float *p = SPLITS ? partials + (int64_t)row * hidden : NULL;
    bool has_add = SPLITS || a;
    folio_bf16_bits *o = out + (int64_t)r * hidden;
    const int nvec = hidden / 8, step = blockDim.x, far = KEEP * step;

    /* Launched with programmatic dependent launch, the norm weight (written by
     * no kernel of the step) is read before the wait for the previous kernel. */
    pdl_trigger();
    float ss = 0.0f;
    uint4 kept[KEEP], wkept[KEEP];
#pragma unroll
    for (int k = 0; k < KEEP; k++) {
        int v = threadIdx.x + k * step;
        if (v < nvec)
            wkept[k] = ((const uint4 *)weight)[v];
    }
    pdl_wait();
#pragma unroll
    for (int k = 0; k < KEEP; k++) {
        int v = threadIdx.x + k * step;
        if (v < nvec)
            ss += load_sum<SPLITS>(kept[k], src, res, a, p, split_stride, has_add, copy, !rows, v);
    }
    for (int v = threadIdx.x + far; v < nvec; v += step) {
        uint4 rv;
        ss += load_sum<SPLITS>(rv, src, res, a, p, split_stride, has_add, copy, !rows, v);
    }
    float inv = rsqrtf(block_sum(ss, scratch) / (float)hidden + eps);

#pragma unroll
    for (int k = 0; k < KEEP; k++) {
        int v = threadIdx.x + k * step;
        if (v < nvec)
            ((uint4 *)o)[v] = norm_vec(kept[k], wkept[k], inv);
    }
    for (int v = threadIdx.x + far; v < nvec; v += step) {
        uint4 rv = ((const uint4 *)src)[v];
        if (has_add && rows) /* the sum was not written back: form it again */
            add_vec<SPLITS>((folio_bf16_bits *)&rv, a, p, split_stride, v);
        ((uint4 *)o)[v] = norm_vec(rv, ((const uint4 *)weight)[v], inv);
    }
    /* After the wait above: the kernels that read drop.dead last are done. */
    l2_discard_dead(drop, blockIdx.x, gridDim.x, threadIdx.x, blockDim.x);
    if (drop.input && has_add) {
        __syncthreads(); /* every thread's loads of the row's operand are used */
        if constexpr (SPLITS > 0) {
            const int lines = hidden / 32; /* f32 */
            for (int i = threadIdx.x; i < SPLITS * lines; i += blockDim.x)
                l2_discard(p + (i / lines) * split_stride + (i % lines) * 32);
        } else {
            for (int i = threadIdx.x; i < hidden / 64; i += blockDim.x)
                l2_discard(a + i * 64);
        }
    }
}

__global__ void add_rmsnorm_kernel(folio_bf16_bits *out, folio_bf16_bits *residual,
                                   const folio_bf16_bits *add, const folio_bf16_bits *weight,
                                   const int32_t *rows, int hidden, float eps,
                                   struct folio_k_l2_drop drop)
{
    add_rmsnorm_row<0>(out, residual, NULL, add, NULL, 0, weight, rows, hidden, eps, drop);
}

/* The step's first kernel on the paths with a norm kernel: row t of the
 * residual is the embedding of token t (embed_kernel's id rule), and out[t]
 * its norm with weight (add_rmsnorm_kernel's bits with no added operand).
 * One kernel where the gather and the first norm took two, each a launch and
 * a round trip on the way to the first projection. It lets the penalty
 * update after it start at once (PDL). */
__global__ void embed_rmsnorm_kernel(folio_bf16_bits *out, folio_bf16_bits *residual,
                                     const folio_bf16_bits *embed, const int32_t *token_ids,
                                     const int32_t *token_slot, const int32_t *last_sampled,
                                     const folio_bf16_bits *weight, int hidden, int vocab,
                                     float eps)
{
    const int id = embed_row(token_ids, token_slot, last_sampled, blockIdx.x, vocab);
    add_rmsnorm_row<0>(out, residual, embed + (int64_t)id * hidden, NULL, NULL, 0, weight, NULL,
                       hidden, eps, folio_k_l2_drop{});
}

/* __launch_bounds__(256, 1): without it ptxas interleaves the 2 * SPLITS partial
 * loads with the adds, about two in flight at a time (a chain of L2 round
 * trips); with it all of them are issued back to back. */
template <int SPLITS>
__global__ void __launch_bounds__(256, 1)
    add_rmsnorm_partials_kernel(folio_bf16_bits *out, folio_bf16_bits *residual,
                                const float *partials, int64_t split_stride,
                                const folio_bf16_bits *weight, const int32_t *rows, int hidden,
                                float eps, struct folio_k_l2_drop drop)
{
    add_rmsnorm_row<SPLITS>(out, residual, NULL, NULL, partials, split_stride, weight, rows, hidden,
                            eps, drop);
}

extern "C" cudaError_t folio_k_add_rmsnorm(folio_bf16_bits *out, folio_bf16_bits *residual,
                                           const folio_bf16_bits *add,
                                           const folio_bf16_bits *weight, const int32_t *rows,
                                           int num_rows, int hidden, float eps,
                                           struct folio_k_l2_drop drop, int pdl, cudaStream_t s)
{
    if (num_rows <= 0)
        return cudaSuccess;
    if (!l2_drop_check(drop, add, hidden % 64 == 0))
        return cudaErrorInvalidValue;
    cudaError_t e = launch_pdl(add_rmsnorm_kernel, dim3(num_rows), dim3(256), 0, s, pdl != 0, out,
                               residual, add, weight, rows, hidden, eps, drop);
    return e != cudaSuccess ? e : cudaGetLastError();
}

extern "C" cudaError_t folio_k_embed_rmsnorm(folio_bf16_bits *out, folio_bf16_bits *residual,
                                             const folio_bf16_bits *embed, const int32_t *token_ids,
                                             const int32_t *token_slot, const int32_t *last_sampled,
                                             const folio_bf16_bits *weight, int num_tokens,
                                             int hidden, int vocab, float eps, int pdl,
                                             cudaStream_t s)
{
    if (num_tokens <= 0)
        return cudaSuccess;
    cudaError_t e =
        launch_pdl(embed_rmsnorm_kernel, dim3(num_tokens), dim3(256), 0, s, pdl != 0, out, residual,
                   embed, token_ids, token_slot, last_sampled, weight, hidden, vocab, eps);
    return e != cudaSuccess ? e : cudaGetLastError();
}

extern "C" cudaError_t
folio_k_add_rmsnorm_partials(folio_bf16_bits *out, folio_bf16_bits *residual, const float *partials,
                             int splits, int64_t split_stride, const folio_bf16_bits *weight,
                             const int32_t *rows, int num_rows, int hidden, float eps,
                             struct folio_k_l2_drop drop, int pdl, cudaStream_t s)
{
    if (num_rows <= 0)
        return cudaSuccess;
    if (!l2_drop_check(drop, partials, hidden % 32 == 0 && split_stride % 32 == 0))
        return cudaErrorInvalidValue;
    void (*kernel)(folio_bf16_bits *, folio_bf16_bits *, const float *, int64_t,
                   const folio_bf16_bits *, const int32_t *, int, float, struct folio_k_l2_drop) =
        splits == 2   ? add_rmsnorm_partials_kernel<2>
        : splits == 4 ? add_rmsnorm_partials_kernel<4>
        : splits == 8 ? add_rmsnorm_partials_kernel<8>
                      : NULL;
    if (!kernel)
        return cudaErrorInvalidValue;
    cudaError_t e = launch_pdl(kernel, dim3(num_rows), dim3(256), 0, s, pdl != 0, out, residual,
                               partials, split_stride, weight, rows, hidden, eps, drop);
    return e != cudaSuccess ? e : cudaGetLastError();
}
