/* A GGUF's linear weights kept packed on the CUDA backend (struct gguf_weight, loaded by
 * cuda_weights.c): the products of forward_quant on them. A product of m rows takes one of two
 * forms: up to gguf_gemv_rows rows (decode) the packed GEMV (folio_k_gguf_gemv), a launch a part
 * of the projection, which reads each weight's few bits once and decodes it in registers; above,
 * the projection's parts are widened into a bf16 scratch (folio_k_gguf_dequantize) and the bf16
 * GEMM multiplies: the widening costs about one bf16 read and write of the weights a product,
 * small beside a prefill's matrix work, and keeps the tensor cores' GEMM as it is. Both decode
 * the same values; only the order of the f32 sums, and the bf16 rounding of the widened
 * weights, differ. */
#include "cuda_internal.h"

/* The scratch of the widened matrices, as large as the largest projection, allocated before the
 * KV pool takes what is left; none where every product fits the GEMV. */
int cuda_gguf_setup(struct cuda_backend *cb, int max_rows, char *err, size_t errlen)
{
    if (max_rows <= cb->gguf_gemv_rows)
        return 0;
    const size_t H = (size_t)cb->hidden, I = (size_t)cb->inter,
                 QD = (size_t)cb->heads * cb->head_dim;
    size_t elems = (size_t)cb->qkv_dim * H;
    const size_t others[3] = {H * QD, 2 * I * H, H * I};
    for (int i = 0; i < 3; i++)
        elems = others[i] > elems ? others[i] : elems;
    CUDA_CHECK(cudaMalloc((void **)&cb->gguf_scratch, sizeof(bf16) * elems));
    return 0;
}

/* y[m, n] = x[m, k] . w^T, bf16 out. */
int cuda_gemm_gguf(struct cuda_backend *cb, const bf16 *x, const struct gguf_weight *w, bf16 *y,
                   int m, int n, int k, char *err, size_t errlen)
{
    if (m <= 0)
        return 0;
    if (m <= cb->gguf_gemv_rows) {
        for (int i = 0; i < w->num_parts; i++) {
            const struct gguf_part *p = &w->part[i];
            CUDA_CHECK(folio_k_gguf_gemv(y + p->row0, n, x, p->q, p->type, p->stride, m, p->rows, k,
                                         cb->stream));
        }
        return 0;
    }
    for (int i = 0; i < w->num_parts; i++) {
        const struct gguf_part *p = &w->part[i];
        CUDA_CHECK(folio_k_gguf_dequantize(cb->gguf_scratch + (size_t)p->row0 * k, p->q, p->type,
                                           p->stride, p->rows, k, cb->stream));
    }
    return cuda_gemm(cb, x, cb->gguf_scratch, y, m, n, k, false, err, errlen);
}
