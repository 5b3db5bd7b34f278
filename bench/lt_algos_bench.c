/* lt_algos_bench: every algorithm cuBLASLt's heuristic offers for TinyLlama's
 * projections at steps of 65-256 rows, checked and timed, to see whether its
 * first choice (the one cuda_backend.c's gemm() takes) is the fastest.
 *
 *     lt_algos_bench [--m M[,M...]] [--max N] [--loop SECONDS] [NAME:N:K ...]
 *
 * Shapes: by default QKV (2560 x 2048), O (2048 x 2048), gate/up (11264 x
 * 2048), down (2048 x 5632) and the LM head (32000 x 2048); m 128 and 256;
 * up to 32 candidates each. The layout is gemm()'s: y[m][n] = x[m][k] .
 * w[n][k]^T, bf16 in and out, f32 accumulate. Each candidate is checked
 * against the heuristic's first choice writing f32 (every bf16 output within
 * one bf16 ulp of the reference, or 1e-4 of its rms where a sum nearly
 * cancels; err: max |y - ref| over the rms of ref) and timed as
 * gemm_tma_bench times: 20 launches back to back in a CUDA graph, the weights
 * rotating over copies of at least 256 MB so that they come from device
 * memory, the median over 15 replays divided by 20. One line a candidate:
 *
 *     RESULT shape=S m=M cand=I ms=T tflops=F ratio=R id=.. tile=.. stages=..
 *            splitk=.. red=.. swizzle=.. custom=.. cluster=.. ws=.. ok=1 kernel=NAME
 *
 * ratio: its time over candidate 0's; kernel: the first kernel of its launch
 * (from the captured graph). Then per shape and m a BEST line. Exit status 1
 * if a candidate that cuBLASLt accepted computes a wrong result.
 *
 * --loop SECONDS: then the heuristic's first choice runs back to back for that
 * long (its 20-launch graph replayed), so that a power reading taken meanwhile
 * (nvidia-smi; bench/gpu/power_by_kernel.sh) is that GEMM's alone:
 *
 *     LOOP shape=S m=M launches=L seconds=T ms=T/L */
#include <math.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio_kernels.h"
#include "gemm_bench_common.h"
#include "safetensors.h"

#define WARMUP 3
#define REPEATS 15
#define BATCH 20
#define MAX_CANDIDATES 64
#define LT_WORKSPACE (32u << 20)

struct shape {
    const char *name;
    int n, k;
};

/* One candidate timed: launch i reads weight copy i % copies. */
struct timing {
    cublasLtHandle_t lt;
    const struct bench_lt_desc *d;
    const cublasLtMatmulAlgo_t *algo;
    const void *x;
    void *const *w;
    void *y, *workspace;
    int copies;
};

static int launch(void *ctx, int i, cudaStream_t s)
{
    const struct timing *t = ctx;
    return bench_lt_run(t->lt, t->d, t->algo, t->x, t->w[i % t->copies], t->y, t->workspace,
                        LT_WORKSPACE, s) != CUBLAS_STATUS_SUCCESS;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --loop: t's BATCH-launch graph replayed for `seconds`, 50 replays between
 * synchronizations (about 5-60 ms of work, so that the GPU never waits on the
 * host); prints the LOOP line. */
static void loop_for(struct timing *t, const char *shape, int m, double seconds, cudaStream_t s)
{
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < BATCH; i++)
        if (launch(t, i, s)) {
            fprintf(stderr, "lt_algos_bench: --loop: launch refused\n");
            exit(2);
        }
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    long replays = 0;
    const double t0 = now_s();
    double t1 = t0;
    while (t1 - t0 < seconds) {
        for (int i = 0; i < 50; i++)
            CK(cudaGraphLaunch(exec, s));
        replays += 50;
        CK(cudaStreamSynchronize(s));
        t1 = now_s();
    }
    printf("LOOP shape=%s m=%d launches=%ld seconds=%.3f ms=%.5f\n", shape, m, replays * BATCH,
           t1 - t0, (t1 - t0) * 1e3 / (double)(replays * BATCH));
    fflush(stdout);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
}

int main(int argc, char **argv)
{
    struct shape shapes[16] = {
        {"qkv", 2560, 2048},  {"o", 2048, 2048},       {"gateup", 11264, 2048},
        {"down", 2048, 5632}, {"lmhead", 32000, 2048},
    };
    size_t num_shapes = 5;
    int ms_list[8] = {128, 256}, num_ms = 2, max_cand = 32;
    double loop_seconds = 0.0;
    static char names[16][32];
    for (int i = 1, given = 0; i < argc; i++) {
        int n, k;
        if (strcmp(argv[i], "--m") == 0 && i + 1 < argc) {
            num_ms = 0;
            for (char *p = argv[++i]; *p && num_ms < 8;) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || v < 1 || v > 8192) {
                    fprintf(stderr, "lt_algos_bench: bad --m %s\n", argv[i]);
                    return 2;
                }
                ms_list[num_ms++] = (int)v;
                p = *end == ',' ? end + 1 : end;
            }
        } else if (strcmp(argv[i], "--max") == 0 && i + 1 < argc &&
                   sscanf(argv[i + 1], "%d", &max_cand) == 1 && max_cand >= 1 &&
                   max_cand <= MAX_CANDIDATES) {
            i++;
        } else if (strcmp(argv[i], "--loop") == 0 && i + 1 < argc &&
                   sscanf(argv[i + 1], "%lf", &loop_seconds) == 1 && loop_seconds > 0.0 &&
                   loop_seconds <= 60.0) {
            i++;
        } else if (given < 16 && sscanf(argv[i], "%31[^:]:%d:%d", names[given], &n, &k) == 3 &&
                   n > 0 && k > 0) {
            shapes[given] = (struct shape){names[given], n, k};
            num_shapes = (size_t)++given;
        } else {
            fprintf(stderr, "usage: lt_algos_bench [--m M[,M...]] [--max N] [--loop SECONDS] "
                            "[NAME:N:K ...]\n");
            return 2;
        }
    }
    int max_m = 0;
    for (int i = 0; i < num_ms; i++)
        max_m = ms_list[i] > max_m ? ms_list[i] : max_m;
    cublasLtHandle_t lt;
    LK(cublasLtCreate(&lt));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    void *workspace;
    CK(cudaMalloc(&workspace, LT_WORKSPACE));
    int wrong = 0;
    for (size_t si = 0; si < num_shapes; si++) {
        const struct shape *sh = &shapes[si];
        const size_t yn = (size_t)max_m * sh->n;
        struct bench_gemm_inputs in;
        bench_gemm_inputs_make(&in, sh->n, sh->k, max_m);
        void *const *w = in.w, *x = in.x, *y, *y_ref;
        const int copies = in.copies;
        uint16_t *out = malloc(yn * 2);
        float *ref = malloc(yn * 4);
        CK(cudaMalloc(&y, yn * 2));
        CK(cudaMalloc(&y_ref, yn * 4));
        for (int mi = 0; mi < num_ms; mi++) {
            const int m = ms_list[mi];
            const double flop = 2.0 * m * sh->n * sh->k;
            struct bench_lt_desc dref, d;
            bench_lt_desc_make(&dref, m, sh->n, sh->k, 1);
            bench_lt_desc_make(&d, m, sh->n, sh->k, 0);
            cublasLtMatmulHeuristicResult_t r0, res[MAX_CANDIDATES];
            if (bench_lt_heuristic(lt, &dref, LT_WORKSPACE, 1, &r0) < 1) {
                fprintf(stderr, "lt_algos_bench: no f32 algorithm for %s m=%d\n", sh->name, m);
                return 2;
            }
            LK(bench_lt_run(lt, &dref, &r0.algo, x, w[0], y_ref, workspace, LT_WORKSPACE, s));
            CK(cudaStreamSynchronize(s));
            CK(cudaMemcpy(ref, y_ref, (size_t)m * sh->n * 4, cudaMemcpyDeviceToHost));
            const double rms = bench_rms(ref, (size_t)m * sh->n);
            const int found = bench_lt_heuristic(lt, &d, LT_WORKSPACE, max_cand, res);
            double t0 = -1.0, best = -1.0;
            int best_i = -1;
            for (int ci = 0; ci < found; ci++) {
                const cublasLtMatmulAlgo_t *al = &res[ci].algo;
                struct timing t = {lt, &d, al, x, w, y, workspace, copies};
                CK(cudaMemset(y, 0xff, (size_t)m * sh->n * 2)); /* NaN where unwritten */
                if (launch(&t, 0, s)) {
                    printf("RESULT shape=%s m=%d cand=%d refused=1\n", sh->name, m, ci);
                    continue;
                }
                CK(cudaStreamSynchronize(s));
                CK(cudaMemcpy(out, y, (size_t)m * sh->n * 2, cudaMemcpyDeviceToHost));
                double err = 0.0;
                long ulp_bad = 0;
                for (size_t i = 0; i < (size_t)m * sh->n; i++)
                    ulp_bad += bench_off_ulp(folio_bf16_to_f32(out[i]), ref[i], rms, &err);
                err /= rms;
                const int ok = ulp_bad == 0;
                wrong += !ok;
                char kernel[160];
                double ms = bench_graph_median_ms(launch, &t, BATCH, WARMUP, REPEATS, s, kernel,
                                                  sizeof kernel);
                if (ci == 0)
                    t0 = ms;
                if (ok && ms > 0 && (best < 0 || ms < best)) {
                    best = ms;
                    best_i = ci;
                }
                char config[200];
                bench_lt_algo_describe(al, config, sizeof config);
                printf("RESULT shape=%s m=%d cand=%d ms=%.5f tflops=%.1f ratio=%.3f %s ws=%zu "
                       "err=%.1e ok=%d kernel=%s\n",
                       sh->name, m, ci, ms, ms > 0 ? flop / (ms * 1e9) : 0.0,
                       t0 > 0 ? ms / t0 : 0.0, config, res[ci].workspaceSize, err, ok, kernel);
                fflush(stdout);
            }
            if (loop_seconds > 0.0 && found > 0) {
                struct timing t = {lt, &d, &res[0].algo, x, w, y, workspace, copies};
                loop_for(&t, sh->name, m, loop_seconds, s);
            }
            if (best_i >= 0)
                printf("BEST shape=%s m=%d cand=%d ms=%.5f first_ms=%.5f ratio=%.3f "
                       "candidates=%d\n",
                       sh->name, m, best_i, best, t0, t0 > 0 ? best / t0 : 0.0, found);
            bench_lt_desc_destroy(&dref);
            bench_lt_desc_destroy(&d);
        }
        bench_gemm_inputs_free(&in);
        CK(cudaFree(y));
        CK(cudaFree(y_ref));
        free(out);
        free(ref);
    }
    printf("lt_algos_bench: %d wrong\n", wrong);
    return wrong ? 1 : 0;
}
