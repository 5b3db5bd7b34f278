/* The helpers gemm_bench_common.h describes. */
#include "gemm_bench_common.h"

#include <cuda.h>
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
