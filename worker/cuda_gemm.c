/* The step's GEMMs: cuBLASLt plans (the heuristic asked once per shape and
 * cached), split-K into f32 partials, Folio's GEMV for a few rows, and the
 * tensor maps of the TMA GEMM (folio_k_gemm_tma). */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

/* Token counts vary from step to step, so new GEMM shapes keep coming: the
 * table starts over when it is 3/4 full instead of failing (one heuristic
 * query costs tens of microseconds; the shapes in use come back at once).
 * Matmuls already queued or captured in graphs do not need the descriptors. */
void cuda_gemm_plans_clear(struct cuda_backend *cb)
{
    for (int i = 0; i < GEMM_CACHE_SIZE; i++) {
        struct gemm_plan *p = &cb->plans[i];
        if (!p->used)
            continue;
        cublasLtMatrixLayoutDestroy(p->a);
        cublasLtMatrixLayoutDestroy(p->b);
        cublasLtMatrixLayoutDestroy(p->c);
        cublasLtMatmulDescDestroy(p->desc);
        p->used = false;
    }
    cb->num_plans = 0;
}

/* A strided batch of `count` matrices, `stride` elements apart. */
static cublasStatus_t layout_batch(cublasLtMatrixLayout_t l, int32_t count, int64_t stride)
{
    cublasStatus_t st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                         &count, sizeof(count));
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &stride, sizeof(stride));
    return st;
}

/* The heuristic's first choice for plan p. A split-K plan (splits > 1) asks for
 * algorithms without a reduction of their own (a split of the split would add
 * the reduce kernel this one avoids), and falls back to any algorithm if there
 * is none; it also declares its slices' alignment (the default assumes 256 bytes). */
static cublasStatus_t gemm_heuristic(struct cuda_backend *cb, struct gemm_plan *p, int *found,
                                     cublasLtMatmulHeuristicResult_t *res)
{
    *found = 0;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    for (int attempt = 0; attempt < 2 && *found < 1 && st == CUBLAS_STATUS_SUCCESS; attempt++) {
        if (attempt == 1 && p->splits <= 1)
            break;
        cublasLtMatmulPreference_t pref;
        st = cublasLtMatmulPreferenceCreate(&pref);
        if (st != CUBLAS_STATUS_SUCCESS)
            break;
        size_t ws = WORKSPACE_BYTES;
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof(ws));
        if (p->splits > 1) {
            const cublasLtMatmulPreferenceAttributes_t aligns[] = {
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
            uint32_t align = p->align;
            for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
                st = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof(align));
            uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
            if (attempt == 0 && st == CUBLAS_STATUS_SUCCESS)
                st = cublasLtMatmulPreferenceSetAttribute(
                    pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_reduction,
                    sizeof(no_reduction));
        }
        if (st == CUBLAS_STATUS_SUCCESS)
            st = cublasLtMatmulAlgoGetHeuristic(cb->lt, p->desc, p->a, p->b, p->c, p->c, pref, 1,
                                                res, found);
        cublasLtMatmulPreferenceDestroy(pref);
        /* Nothing under the filters may come back as NOT_SUPPORTED: try without. */
        if (attempt == 0 && p->splits > 1 && st == CUBLAS_STATUS_NOT_SUPPORTED) {
            st = CUBLAS_STATUS_SUCCESS;
            *found = 0;
        }
    }
    return st;
}

/* At 65-128 rows (the decode graphs' 128-row bucket on the cuBLASLt path)
 * the heuristic's kernel runs faster in clusters of one CTA with custom option
 * 0, with the same results; at 256 rows no cluster shape or custom option
 * beat the heuristic's. Kept only where cuBLASLt accepts it (the LM head's
 * kernel does not). */
static void plan_single_cta_clusters(struct cuda_backend *cb, struct gemm_plan *p)
{
    cublasLtMatmulAlgo_t a = p->algo;
    const uint32_t custom = 0;
    const uint16_t cluster = CUBLASLT_CLUSTER_SHAPE_1x1x1;
    cublasLtMatmulHeuristicResult_t r;
    if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom,
                                             sizeof(custom)) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                             sizeof(cluster)) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoCheck(cb->lt, p->desc, p->a, p->b, p->c, p->c, &a, &r) ==
            CUBLAS_STATUS_SUCCESS &&
        r.workspaceSize <= WORKSPACE_BYTES)
        p->algo = a;
}

/* The heuristic's first choice for the shape, asked once and cached. (Timing its
 * candidates at first use gained little and stalled the stream for tens of
 * milliseconds whenever a new batch size came.) */
static int gemm_plan_get(struct cuda_backend *cb, enum gemm_kind kind, int m, int n, int k,
                         bool out_f32, int splits, unsigned align, struct gemm_plan **out,
                         char *err, size_t errlen)
{
    if (cb->num_plans >= GEMM_CACHE_SIZE * 3 / 4)
        cuda_gemm_plans_clear(cb);
    uint64_t h = ((uint64_t)m * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)n * 0xbf58476d1ce4e5b9ull) ^
                 ((uint64_t)k * 0x94d049bb133111ebull) ^ (uint64_t)out_f32 ^
                 ((uint64_t)splits << 1) ^ ((uint64_t)align << 5) ^ ((uint64_t)kind << 17);
    h ^= h >> 29;
    for (int probe = 0; probe < GEMM_CACHE_SIZE; probe++) {
        struct gemm_plan *p = &cb->plans[(h + probe) & (GEMM_CACHE_SIZE - 1)];
        if (p->used && p->m == m && p->n == n && p->k == k && p->out_f32 == out_f32 &&
            p->splits == splits && p->align == align && p->kind == kind) {
            *out = p;
            return 0;
        }
        if (p->used)
            continue;
        /* A new shape: describe it and ask the heuristic once. */
        cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        cudaDataType_t ct = out_f32 ? CUDA_R_32F : CUDA_R_16BF;
        cudaDataType_t in = kind == GEMM_BF16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
        CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
        CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
        if (kind == GEMM_FP8_SCALED) { /* A's scale per row of op(A) (w's n), B's per column */
            const int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                                        &vec, sizeof(vec)));
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                        &vec, sizeof(vec)));
        }
        /* Column-major view: w is K x N (op T gives N x K), x is K x M, y is N x M.
         * Split: slice s of w and x starts k/splits elements after slice s-1 (the
         * same leading dimension k), partial s is M x N after partial s-1. */
        int ks = k / splits;
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, in, ks, n, k));
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, in, ks, m, k));
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, ct, n, m, n));
        if (splits > 1) {
            CUBLAS_CHECK(layout_batch(p->a, splits, ks));
            CUBLAS_CHECK(layout_batch(p->b, splits, ks));
            CUBLAS_CHECK(layout_batch(p->c, splits, (int64_t)m * n));
        }
        p->m = m;
        p->n = n;
        p->k = k;
        p->out_f32 = out_f32;
        p->splits = splits;
        p->align = align;
        p->kind = kind;
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        CUBLAS_CHECK(gemm_heuristic(cb, p, &found, &res));
        if (found < 1) {
            snprintf(err, errlen,
                     "cuda backend: cuBLASLt has no algorithm for %dx%dx%d (%d splits%s)", m, n, k,
                     splits, kind == GEMM_BF16 ? "" : ", e4m3");
            cublasLtMatrixLayoutDestroy(p->a);
            cublasLtMatrixLayoutDestroy(p->b);
            cublasLtMatrixLayoutDestroy(p->c);
            cublasLtMatmulDescDestroy(p->desc);
            return -1;
        }
        p->algo = res.algo;
        if (kind == GEMM_BF16 && m > 64 && m <= 128)
            plan_single_cta_clusters(cb, p);
        p->used = true;
        cb->num_plans++;
        *out = p;
        return 0;
    }
    snprintf(err, errlen, "cuda backend: GEMM plan cache full (%d shapes)", GEMM_CACHE_SIZE);
    return -1;
}

/* Folio's GEMV for a few rows, optionally with the residual add + RMSNorm in front, on weights
 * of any of its formats. */
cudaError_t cuda_gemv(struct cuda_backend *cb, void *y, const bf16 *x, const bf16 *add,
                      const bf16 *norm_w, const int32_t *rows, bf16 *res_out,
                      struct folio_k_weight w, int m, int n, int k, bool out_f32, bool gate_up_silu)
{
    return folio_k_gemv(y, x, add, norm_w, cb->eps, rows, res_out, w, m, n, k, out_f32,
                        gate_up_silu, cb->pdl_step, cb->stream);
}

/* y[m, n] = x[m, k] * w[n, k]^T + beta * y[m, n] on cuBLASLt, bf16 in, f32
 * accumulate, bf16 or f32 out. beta 1 (bf16 y, the sum rounded once): the O
 * and down projections adding into the residual when no norm kernel follows
 * them (norm_in_consumers). */
int cuda_gemm_lt(struct cuda_backend *cb, const bf16 *x, const bf16 *w, void *y, int m, int n,
                 int k, bool out_f32, float beta, char *err, size_t errlen)
{
    struct gemm_plan *p;
    if (gemm_plan_get(cb, GEMM_BF16, m, n, k, out_f32, 1, 0, &p, err, errlen) != 0)
        return -1;
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasLtMatmul(cb->lt, p->desc, &alpha, w, p->a, x, p->b, &beta, y, p->c, y, p->c,
                                &p->algo, cb->workspace, WORKSPACE_BYTES, cb->stream));
    return 0;
}

/* y[m, n] = x[m, k] * w[n, k]^T, bf16 in, f32 accumulate, bf16 or f32 out.
 * A few rows (small-batch decode) go through Folio's GEMV, which streams the
 * weights near the bandwidth where cuBLASLt pays a fixed cost per call. */
int cuda_gemm(struct cuda_backend *cb, const bf16 *x, const bf16 *w, void *y, int m, int n, int k,
              bool out_f32, char *err, size_t errlen)
{
    if (m <= 0)
        return 0;
    if (m <= cb->paths.gemv_max_rows) {
        CUDA_CHECK(cuda_gemv(cb, y, x, NULL, NULL, NULL, NULL,
                             (struct folio_k_weight){w, NULL, FOLIO_K_W_BF16}, m, n, k, out_f32,
                             false));
        return 0;
    }
    return cuda_gemm_lt(cb, x, w, y, m, n, k, out_f32, 0.0f, err, errlen);
}

/* y[m, n] = x[m, k] * w[n, k]^T on FP8 tensor cores: x and w as e4m3 codes (xq, w), f32
 * accumulation. GEMM_FP8_SCALED: y bf16, each sum times w_scale[j] * x_scale[t] by cuBLASLt's
 * outer-vector scales; GEMM_FP8_RAW: y the raw f32 sums (the caller scales them). The scale
 * pointers are the descriptor's, set before each call (plans are shared by the layers). */
int cuda_gemm_lt_fp8(struct cuda_backend *cb, enum gemm_kind kind, const uint8_t *xq,
                     const float *x_scale, const uint8_t *w, const float *w_scale, void *y, int m,
                     int n, int k, char *err, size_t errlen)
{
    struct gemm_plan *p;
    if (gemm_plan_get(cb, kind, m, n, k, kind == GEMM_FP8_RAW, 1, 0, &p, err, errlen) != 0)
        return -1;
    if (kind == GEMM_FP8_SCALED) {
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                    &w_scale, sizeof(w_scale)));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                    &x_scale, sizeof(x_scale)));
    }
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(cb->lt, p->desc, &alpha, w, p->a, xq, p->b, &beta, y, p->c, y, p->c,
                                &p->algo, cb->workspace, WORKSPACE_BYTES, cb->stream));
    return 0;
}

/* The largest power of two (at most 256) that divides v: the byte alignment of
 * pointers and strides that cuBLASLt's heuristic is told. */
static unsigned byte_alignment(uintptr_t v)
{
    unsigned a = 1;
    while (a < 256 && !(v & a))
        a <<= 1;
    return a;
}

/* partials[s][m][n] = x[m, slice s of k] * w[n, slice s of k]^T in f32, s in
 * 0..splits-1 (k / splits a multiple of 8): one strided-batched cuBLASLt matmul,
 * its plan cached per (m, n, k, splits). The sum is left to the reader
 * (folio_k_add_rmsnorm_partials). */
int cuda_gemm_splitk(struct cuda_backend *cb, const bf16 *x, const bf16 *w, float *partials, int m,
                     int n, int k, int splits, char *err, size_t errlen)
{
    int ks = k / splits;
    unsigned align =
        byte_alignment((uintptr_t)x | (uintptr_t)w | (uintptr_t)partials |
                       (uintptr_t)(sizeof(bf16) * ks) | (uintptr_t)(sizeof(float) * (size_t)m * n));
    struct gemm_plan *p;
    if (gemm_plan_get(cb, GEMM_BF16, m, n, k, true, splits, align, &p, err, errlen) != 0)
        return -1;
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(cb->lt, p->desc, &alpha, w, p->a, x, p->b, &beta, partials, p->c,
                                partials, p->c, &p->algo, cb->workspace, WORKSPACE_BYTES,
                                cb->stream));
    return 0;
}

/* K slices for a projection y[m, n] = x[m, k] * w[n, k]^T on the cuBLASLt path
 * whose output only the next add_rmsnorm reads (O and down); 1: no split.
 * forced: paths.splitk_o / paths.splitk_down, used as given for every m up to
 * SPLITK_MAX_ROWS (1 if k / forced is not a whole multiple of 8). Prefill-sized
 * m (above SPLITK_MAX_ROWS) never splits.
 * Default, from the graph bucket of m (an eager step splits as its graph
 * would, so the two give the same bits): 2 slices up to 128 rows, none above.
 * 2 slices beat 1 and 4 where cuBLASLt's tiles leave SMs idle; at 256 rows its
 * tiles already fill the chip and any split loses. */
int cuda_splitk_slices(int forced, int m, int k)
{
    if (m > SPLITK_MAX_ROWS)
        return 1;
    int s = forced > 0 ? forced : cuda_graph_bucket(m) <= 128 ? 2 : 1;
    return k % s == 0 && (k / s) % 8 == 0 ? s : 1;
}

/* The TMA GEMM's tensor maps: the weights of layer li, and the activations. */

const struct folio_k_tmap *cuda_tma_wmap(const struct cuda_backend *cb, int li, int which)
{
    return &cb->tmaps[li * TMA_WEIGHTS + which];
}

const struct folio_k_tmap *cuda_tma_xmap(const struct cuda_backend *cb, int which)
{
    return &cb->tmaps[cb->layers * TMA_WEIGHTS + which];
}

/* The LM head's map, after the activations' (cb->tma_lm_head). */
const struct folio_k_tmap *cuda_tma_lm_head_map(const struct cuda_backend *cb)
{
    return &cb->tmaps[cb->layers * TMA_WEIGHTS + TMA_XS];
}

/* Whether a step of m rows runs its projections as folio_k_gemm_tma. */

/* The most K slices, up to want, that k takes (whole 64-wide stages each). */
static int tma_slices(int k, int want)
{
    int s = want;
    while (s > 1 && k % (s * 64) != 0)
        s /= 2;
    return s;
}

/* Encodes the tensor maps (create, after the weights and activations are on
 * the GPU). The TMA path stays off when the shapes or the driver do not
 * allow it: every k a multiple of 64, every n of FOLIO_K_TMA_NT. */
void cuda_tma_setup(struct cuda_backend *cb, size_t max_rows, size_t max_seqs)
{
    int H = cb->hidden, QD = cb->heads * cb->head_dim, I = cb->inter;
    if (!cb->tma || H % FOLIO_K_TMA_NT != 0 || QD % 64 != 0 || I % FOLIO_K_TMA_NT != 0 ||
        cb->qkv_dim % FOLIO_K_TMA_NT != 0) {
        cb->tma = false;
        return;
    }
    size_t n = (size_t)cb->layers * TMA_WEIGHTS + TMA_XS + 1;
    cb->tmaps = aligned_alloc(64, sizeof(struct folio_k_tmap) * n);
    if (!cb->tmaps) {
        cb->tma = false;
        return;
    }
    int bad = 0;
    for (int li = 0; li < cb->layers; li++) {
        const struct cuda_layer *L = &cb->lw[li];
        struct folio_k_tmap *w = &cb->tmaps[li * TMA_WEIGHTS];
        bad |= folio_k_tmap_encode(&w[TMA_QKV], L->wqkv, cb->qkv_dim, H, FOLIO_K_TMA_NT);
        bad |= folio_k_tmap_encode(&w[TMA_O], L->wo, H, QD, FOLIO_K_TMA_NT);
        bad |= folio_k_tmap_encode(&w[TMA_GATE_UP], L->w_gate_up, 2 * I, H, FOLIO_K_TMA_NT / 2);
        bad |= folio_k_tmap_encode(&w[TMA_DOWN], L->w_down, H, I, FOLIO_K_TMA_NT);
    }
    const bf16 *xs[TMA_XS] = {cb->normed, cb->attn_out, cb->act, cb->final_h};
    const int ks[TMA_XS] = {H, QD, I, H};
    const size_t xrows[TMA_XS] = {max_rows, max_rows, max_rows, max_seqs};
    for (int x = 0; x < TMA_XS; x++) {
        int rows = xrows[x] < FOLIO_K_TMA_MAX_ROWS ? (int)xrows[x] : FOLIO_K_TMA_MAX_ROWS;
        bad |= folio_k_tmap_encode(&cb->tmaps[cb->layers * TMA_WEIGHTS + x], xs[x], rows, ks[x],
                                   FOLIO_K_TMA_MAX_ROWS);
    }
    /* The LM head too, where its rows fill whole CTAs. */
    cb->tma_lm_head = cb->vocab % FOLIO_K_TMA_NT == 0 &&
                      folio_k_tmap_encode(&cb->tmaps[cb->layers * TMA_WEIGHTS + TMA_XS],
                                          cb->lm_head, cb->vocab, H, FOLIO_K_TMA_NT) == 0;
    if (bad) {
        free(cb->tmaps);
        cb->tmaps = NULL;
        cb->tma = false;
        return;
    }
    cb->tma_split_qkv = tma_slices(H, TMA_SLICES);
    cb->tma_split_o = tma_slices(QD, TMA_SLICES);
    cb->tma_split_down = tma_slices(I, TMA_SLICES);
    cb->tma_split_down_small = tma_slices(I, TMA_SLICES_SMALL);
}
