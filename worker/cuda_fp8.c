/* --quantization fp8 on the CUDA backend (common/fp8.h's rule, vLLM's W8A8 FP8 with dynamic
 * per-token activations and per-channel weights): the card's check, the weights' e4m3 form,
 * and the products of forward_quant.
 *
 * Steps of up to gemv_max_rows rows (decode at small batch) take forward_gemv, whose GEMV
 * reads the e4m3 weights and quantizes its input rows itself (folio_k_gemv with scales), since
 * a cuBLASLt call pays a fixed cost that a few rows do not amortise. Here, the larger steps'
 * rows are quantized (folio_k_fp8_quantize_rows) and multiplied on the FP8 tensor cores by
 * cuBLASLt, its outer-vector scales applying each output channel's and each token's scale in
 * the epilogue, or, where this cuBLASLt lacks them, raw f32 sums that folio_k_fp8_scale_out
 * scales. Both round the same codes; only the order of the f32 sums differs. */
#include <string.h>

#include "cuda_internal.h"
#include "log.h"

int cuda_fp8_check_device(char *err, size_t errlen)
{
    int major = 0, minor = 0;
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    if (major * 10 + minor >= 89)
        return 0;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    snprintf(err, errlen,
             "cuda backend: --quantization fp8 needs FP8 tensor cores (compute capability 8.9 or "
             "newer); %s is %d.%d",
             prop.name, major, minor);
    return -1;
}

/* dst = the e4m3 form of w [n][k] (bf16 on the device) in q and scale, row by row. */
int cuda_fp8_quantize_weight(struct cuda_backend *cb, struct fp8_weight *dst, uint8_t *q,
                             float *scale, const bf16 *w, int n, int k, char *err, size_t errlen)
{
    dst->q = q;
    dst->scale = scale;
    CUDA_CHECK(folio_k_fp8_quantize_rows(q, scale, w, n, k, cb->stream));
    return 0;
}

/* y[m, n] = x[m, k] . w^T in W8A8, bf16 out. */
int cuda_gemm_fp8(struct cuda_backend *cb, const bf16 *x, const struct fp8_weight *w, bf16 *y,
                  int m, int n, int k, char *err, size_t errlen)
{
    if (m <= 0)
        return 0;
    CUDA_CHECK(folio_k_fp8_quantize_rows(cb->x8, cb->x8_scale, x, m, k, cb->stream));
    if (cb->fp8_kind == GEMM_FP8_SCALED)
        return cuda_gemm_lt_fp8(cb, GEMM_FP8_SCALED, cb->x8, cb->x8_scale, w->q, w->scale, y, m, n,
                                k, err, errlen);
    if (cuda_gemm_lt_fp8(cb, GEMM_FP8_RAW, cb->x8, NULL, w->q, NULL, cb->fp8_acc, m, n, k, err,
                         errlen) != 0)
        return -1;
    CUDA_CHECK(folio_k_fp8_scale_out(y, cb->fp8_acc, cb->x8_scale, w->scale, m, n, cb->stream));
    return 0;
}

/* Which cuBLASLt form the products take: outer-vector scales where this cuBLASLt runs them
 * on the card (tried on the first layer's QKV at the smallest and largest row counts that
 * reach cuBLASLt), else raw sums and the scaling kernel, whose f32 buffer is then allocated
 * (before the KV pool takes what is left). The activations' buffers are allocated by then;
 * their contents do not matter. */
int cuda_fp8_setup(struct cuda_backend *cb, int max_rows, char *err, size_t errlen)
{
    const int small = cb->paths.gemv_max_rows + 1;
    const struct fp8_weight *w = &cb->lw[0].qkv8;
    cb->fp8_kind = GEMM_FP8_SCALED;
    char why[256] = "";
    for (int rows = small; rows <= max_rows; rows = rows == max_rows ? max_rows + 1 : max_rows)
        if (cuda_gemm_lt_fp8(cb, GEMM_FP8_SCALED, cb->x8, cb->x8_scale, w->q, w->scale, cb->qkv,
                             rows, cb->qkv_dim, cb->hidden, why, sizeof why) != 0) {
            cb->fp8_kind = GEMM_FP8_RAW;
            break;
        }
    CUDA_CHECK(cudaStreamSynchronize(cb->stream));
    if (cb->fp8_kind == GEMM_FP8_RAW) {
        folio_log_info(0,
                       "fp8: cuBLASLt's outer-vector scales are not available here (%s); "
                       "its raw sums are scaled by a kernel",
                       why);
        cuda_gemm_plans_clear(cb);
        int n = cb->qkv_dim > 2 * cb->inter ? cb->qkv_dim : 2 * cb->inter;
        n = n > cb->hidden ? n : cb->hidden;
        CUDA_CHECK(cudaMalloc((void **)&cb->fp8_acc, sizeof(float) * (size_t)max_rows * n));
    }
    return 0;
}
