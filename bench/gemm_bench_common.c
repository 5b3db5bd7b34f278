/* The helpers gemm_bench_common.h describes. */
#include "gemm_bench_common.h"

#include "safetensors.h"

#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_cuda_fail(cudaError_t e, const char *file, const char *call, int line)
{
    fprintf(stderr, "%s: %s: %s (line %d)\n", file, call, cudaGetErrorString(e), line);
    exit(2);
}

void bench_lt_fail(cublasStatus_t s, const char *file, const char *call, int line)
{
    fprintf(stderr, "%s: %s: cuBLASLt status %d (line %d)\n", file, call, (int)s, line);
    exit(2);
}

static uint64_t rng_state = 0x853c49e6748fea9bull;

float bench_uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (2.0 / 16777216.0) - 1.0);
}

void bench_gemm_inputs_make(struct bench_gemm_inputs *in, int n, int k, int rows)
{
    const size_t wn = (size_t)n * k, xn = (size_t)rows * k;
    int copies = (int)ceil(BENCH_ROTATE_BYTES / (wn * 2.0));
    in->copies = copies < 1 ? 1 : copies > BENCH_MAX_COPIES ? BENCH_MAX_COPIES : copies;
    uint16_t *hw = malloc(wn * 2), *hx = malloc(xn * 2);
    if (!hw || !hx)
        bench_cuda_fail(cudaErrorMemoryAllocation, __FILE__, "malloc", __LINE__);
    for (size_t i = 0; i < wn; i++)
        hw[i] = folio_f32_to_bf16(0.02f * bench_uniform());
    for (size_t i = 0; i < xn; i++)
        hx[i] = folio_f32_to_bf16(bench_uniform());
    for (int c = 0; c < in->copies; c++) {
        CK(cudaMalloc(&in->w[c], wn * 2));
        CK(cudaMemcpy(in->w[c], hw, wn * 2, cudaMemcpyHostToDevice));
    }
    CK(cudaMalloc(&in->x, xn * 2));
    CK(cudaMemcpy(in->x, hx, xn * 2, cudaMemcpyHostToDevice));
    free(hw);
    free(hx);
}

void bench_gemm_inputs_free(struct bench_gemm_inputs *in)
{
    for (int c = 0; c < in->copies; c++)
        CK(cudaFree(in->w[c]));
    CK(cudaFree(in->x));
}

double bench_rms(const float *ref, size_t count)
{
    double sum = 0.0;
    for (size_t i = 0; i < count; i++)
        sum += (double)ref[i] * ref[i];
    return sqrt(sum / (double)count);
}

int bench_off_ulp(double v, double r, double rms, double *max_err)
{
    double e = fabs(v - r);
    int ex;
    frexp(r, &ex);
    *max_err = isnan(e) ? INFINITY : e > *max_err ? e : *max_err;
    return isnan(e) || (e > ldexp(1.0, ex - 8) && e > 1e-4 * rms);
}

void bench_lt_desc_make(struct bench_lt_desc *d, int m, int n, int k, int out_f32)
{
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LK(cublasLtMatmulDescCreate(&d->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    LK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    LK(cublasLtMatrixLayoutCreate(&d->a, CUDA_R_16BF, k, n, k));
    LK(cublasLtMatrixLayoutCreate(&d->b, CUDA_R_16BF, k, m, k));
    LK(cublasLtMatrixLayoutCreate(&d->c, out_f32 ? CUDA_R_32F : CUDA_R_16BF, n, m, n));
}

void bench_lt_desc_splitk(struct bench_lt_desc *d, int m, int n, int k, int splits)
{
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const int ks = k / splits;
    LK(cublasLtMatmulDescCreate(&d->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    LK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    LK(cublasLtMatrixLayoutCreate(&d->a, CUDA_R_16BF, ks, n, k));
    LK(cublasLtMatrixLayoutCreate(&d->b, CUDA_R_16BF, ks, m, k));
    LK(cublasLtMatrixLayoutCreate(&d->c, CUDA_R_32F, n, m, n));
    const int32_t count = splits;
    const cublasLtMatrixLayout_t l[3] = {d->a, d->b, d->c};
    const int64_t stride[3] = {ks, ks, (int64_t)m * n};
    for (int i = 0; i < 3; i++) {
        LK(cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                            sizeof(count)));
        LK(cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &stride[i], sizeof(stride[i])));
    }
}

static long algo_attr(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr,
                      size_t size)
{
    uint64_t v = 0;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(algo, attr, &v, size, &written) !=
        CUBLAS_STATUS_SUCCESS)
        return -1;
    return size == 2 ? (long)(uint16_t)v : size == 4 ? (long)(uint32_t)v : (long)v;
}

void bench_lt_algo_describe(const cublasLtMatmulAlgo_t *algo, char *out, size_t len)
{
    snprintf(out, len,
             "id=%ld tile=%ld stages=%ld splitk=%ld red=%ld swizzle=%ld custom=%ld cluster=%ld",
             algo_attr(algo, CUBLASLT_ALGO_CONFIG_ID, 4),
             algo_attr(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, 4),
             algo_attr(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, 4),
             algo_attr(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 4),
             algo_attr(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, 4),
             algo_attr(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, 4),
             algo_attr(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, 4),
             algo_attr(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, 2));
}

void bench_lt_desc_destroy(struct bench_lt_desc *d)
{
    cublasLtMatrixLayoutDestroy(d->a);
    cublasLtMatrixLayoutDestroy(d->b);
    cublasLtMatrixLayoutDestroy(d->c);
    cublasLtMatmulDescDestroy(d->desc);
}

int bench_lt_heuristic(cublasLtHandle_t lt, const struct bench_lt_desc *d, size_t workspace_bytes,
                       int want, cublasLtMatmulHeuristicResult_t *res)
{
    cublasLtMatmulPreference_t pref;
    int found = 0;
    LK(cublasLtMatmulPreferenceCreate(&pref));
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &workspace_bytes, sizeof(workspace_bytes)));
    LK(cublasLtMatmulAlgoGetHeuristic(lt, d->desc, d->a, d->b, d->c, d->c, pref, want, res,
                                      &found));
    cublasLtMatmulPreferenceDestroy(pref);
    return found;
}

cublasStatus_t bench_lt_run(cublasLtHandle_t lt, const struct bench_lt_desc *d,
                            const cublasLtMatmulAlgo_t *algo, const void *x, const void *w, void *y,
                            void *workspace, size_t workspace_bytes, cudaStream_t s)
{
    const float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(lt, d->desc, &alpha, w, d->a, x, d->b, &beta, y, d->c, y, d->c, algo,
                          workspace, workspace_bytes, s);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* The name of the first kernel node of a captured graph (cuBLASLt launches
 * through the driver, so the driver's node parameters are read). */
static void first_kernel_name(cudaGraph_t graph, char *out, size_t len)
{
    snprintf(out, len, "?");
    size_t count = 0;
    if (cudaGraphGetNodes(graph, NULL, &count) != cudaSuccess || count == 0)
        return;
    cudaGraphNode_t *nodes = malloc(sizeof(*nodes) * count);
    if (!nodes || cudaGraphGetNodes(graph, nodes, &count) != cudaSuccess) {
        free(nodes);
        return;
    }
    for (size_t i = 0; i < count; i++) {
        enum cudaGraphNodeType t;
        if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess || t != cudaGraphNodeTypeKernel)
            continue;
        CUDA_KERNEL_NODE_PARAMS p;
        memset(&p, 0, sizeof(p));
        const char *name = NULL;
        if (cuGraphKernelNodeGetParams((CUgraphNode)nodes[i], &p) == CUDA_SUCCESS) {
            if (p.func)
                cuFuncGetName(&name, p.func);
            else if (p.kern)
                cuKernelGetName(&name, p.kern);
        }
        if (name) {
            snprintf(out, len, "%s", name);
            break;
        }
    }
    free(nodes);
}

double bench_graph_median_ms(bench_launch_fn launch, void *ctx, int batch, int warmup, int repeats,
                             cudaStream_t s, char *kernel, size_t kernel_len)
{
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    int bad = 0;
    for (int i = 0; i < batch && !bad; i++)
        bad = launch(ctx, i, s);
    CK(cudaStreamEndCapture(s, &graph));
    if (bad) {
        cudaGraphDestroy(graph);
        return -1.0;
    }
    if (kernel)
        first_kernel_name(graph, kernel, kernel_len);
    CK(cudaGraphInstantiate(&exec, graph, 0));
    float *ms = malloc(sizeof(float) * (size_t)repeats);
    if (!ms)
        bench_cuda_fail(cudaErrorMemoryAllocation, __FILE__, "malloc", __LINE__);
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = -warmup; i < repeats; i++) {
        CK(cudaEventRecord(a, s));
        CK(cudaGraphLaunch(exec, s));
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        if (i >= 0)
            CK(cudaEventElapsedTime(&ms[i], a, b));
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    qsort(ms, (size_t)repeats, sizeof(float), cmp_float);
    const double med = ms[repeats / 2] / batch;
    free(ms);
    return med;
}
