/* What gemm_tma_bench and lt_algos_bench share: exiting checks of CUDA and
 * cuBLASLt calls, the pseudo-random inputs, cuda_backend.c's cuBLASLt layout
 * of y = x . w^T, and the timing of launches captured in a CUDA graph. */
#ifndef FOLIO_GEMM_BENCH_COMMON_H
#define FOLIO_GEMM_BENCH_COMMON_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>

/* Print what failed (the bench's source file, the call, its line) and exit 2. */
void bench_cuda_fail(cudaError_t e, const char *file, const char *call, int line);
void bench_lt_fail(cublasStatus_t s, const char *file, const char *call, int line);
#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess)                                                                     \
            bench_cuda_fail(e_, __FILE__, #x, __LINE__);                                           \
    } while (0)
#define LK(x)                                                                                      \
    do {                                                                                           \
        cublasStatus_t s_ = (x);                                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            bench_lt_fail(s_, __FILE__, #x, __LINE__);                                             \
    } while (0)

/* xorshift64 from a fixed seed: the same inputs on every run; [-1, 1). */
float bench_uniform(void);

/* A GEMM's inputs as every GEMM bench times them: weights w [n][k] in enough
 * copies to span BENCH_ROTATE_BYTES (at most BENCH_MAX_COPIES), so that
 * launches rotating over them read the weights from device memory, and x
 * [rows][k]; bf16 from bench_uniform (the weights scaled by 0.02). */
#define BENCH_ROTATE_BYTES (256.0 * 1024 * 1024)
#define BENCH_MAX_COPIES 64
struct bench_gemm_inputs {
    void *w[BENCH_MAX_COPIES];
    int copies;
    void *x;
};
void bench_gemm_inputs_make(struct bench_gemm_inputs *in, int n, int k, int rows);
void bench_gemm_inputs_free(struct bench_gemm_inputs *in);

/* The rms of ref [count], the scale of bench_off_ulp's cancellation bound. */
double bench_rms(const float *ref, size_t count);
/* Whether v is off the f32 reference r by more than one bf16 ulp of r (and
 * by more than 1e-4 of rms, where a sum nearly cancels), NaN included;
 * *max_err keeps the largest |v - r| (infinite for a NaN). */
int bench_off_ulp(double v, double r, double rms, double *max_err);

/* cuda_backend.c's gemm(): y [m][n] = x [m][k] . w [n][k]^T, bf16 in, f32
 * accumulate, bf16 or f32 (out_f32) out, in cuBLASLt's column-major terms. */
struct bench_lt_desc {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
};
void bench_lt_desc_make(struct bench_lt_desc *d, int m, int n, int k, int out_f32);
/* cuda_backend.c's gemm_splitk(): `splits` f32 partials [s][m][n], slice s of
 * k each (k / splits), as one strided-batched matmul. */
void bench_lt_desc_splitk(struct bench_lt_desc *d, int m, int n, int k, int splits);
void bench_lt_desc_destroy(struct bench_lt_desc *d);
/* algo's configuration as "id=.. tile=.. stages=.. splitk=.. red=.. swizzle=..
 * custom=.. cluster=.." (-1 for an attribute it does not report). */
void bench_lt_algo_describe(const cublasLtMatmulAlgo_t *algo, char *out, size_t len);
/* Up to `want` algorithms of cuBLASLt's heuristic for d, best first, within
 * workspace_bytes; returns how many came back. */
int bench_lt_heuristic(cublasLtHandle_t lt, const struct bench_lt_desc *d, size_t workspace_bytes,
                       int want, cublasLtMatmulHeuristicResult_t *res);
cublasStatus_t bench_lt_run(cublasLtHandle_t lt, const struct bench_lt_desc *d,
                            const cublasLtMatmulAlgo_t *algo, const void *x, const void *w, void *y,
                            void *workspace, size_t workspace_bytes, cudaStream_t s);

/* Median ms of one launch: `batch` launches (launch(ctx, i, s), i = 0 ..
 * batch - 1) back to back in a CUDA graph, as a decode step runs them, so
 * that no host submission time counts; the median over `repeats` replays
 * (after `warmup`) divided by batch. -1 if a launch returns nonzero. The
 * graph's kernel nodes: see bench_first_kernel_name. */
typedef int (*bench_launch_fn)(void *ctx, int i, cudaStream_t s);
double bench_graph_median_ms(bench_launch_fn launch, void *ctx, int batch, int warmup, int repeats,
                             cudaStream_t s, char *kernel, size_t kernel_len);

#endif
