/* lt_search_bench: cuBLASLt configurations beyond its heuristic's list, for
 * TinyLlama's projections at m rows (default 256), to see whether any tile,
 * cluster shape, stage count, custom option or K split runs faster than the
 * heuristic's first choice (the one cuda_backend.c's gemm() takes).
 *
 *     lt_search_bench [--m M] [--splits S[,S...]] [--top N] [--quick N] [NAME:N:K ...]
 *
 * The heuristic offers 8 algorithms a shape (bench/lt_algos_bench.c times
 * those). Here every algorithm id is initialized by hand and every
 * combination of its tiles, stages, custom options, a set of cluster shapes
 * and in-kernel K splits (with each reduction scheme) that
 * cublasLtMatmulAlgoCheck accepts, that needs at most LT_WORKSPACE and whose
 * waves (the check's estimate of how full it fills the GPU) lie in
 * [0.4, 2.05], is timed quickly; the fastest `top` are then checked and timed
 * as lt_algos_bench times (a CUDA graph of 20 launches, weights rotating over
 * 256 MB of copies, median of 15 replays over 20).
 *
 * splits: besides the plain GEMM (1, bf16 out), the form of cuda_backend.c's
 * gemm_splitk: S strided-batched f32 partials over K slices, which the next
 * add_rmsnorm sums. Its time here leaves out that sum (S x m x n f32 read from
 * L2 instead of m x n bf16).
 *
 * One line per timed configuration:
 *     RESULT shape=S m=M splits=P rank=R ms=T tflops=F ratio=R id=.. tile=.. stages=..
 *            splitk=.. red=.. swizzle=.. custom=.. cluster=.. waves=.. ws=.. ok=1 kernel=NAME
 * rank 0 is the heuristic's first choice (the baseline, ratio 1). Then per
 * shape and split a BEST line. Exit status 1 if a configuration that
 * cuBLASLt accepted computes a wrong result. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "folio_kernels.h"
#include "gemm_bench_common.h"
#include "safetensors.h"

#define MAX_CONFIGS 200000
#define LT_WORKSPACE (32u << 20)
/* Seconds of quick timing at most per shape and split form. */
#define QUICK_BUDGET_S 15.0

struct shape {
    const char *name;
    int n, k;
};

/* One form: the plain GEMM (splits 1, bf16 out) or gemm_splitk's partials. */
struct form {
    struct bench_lt_desc d;
    int splits;
};

static void form_make(struct form *f, int m, int n, int k, int splits)
{
    f->splits = splits;
    if (splits > 1)
        bench_lt_desc_splitk(&f->d, m, n, k, splits);
    else
        bench_lt_desc_make(&f->d, m, n, k, 0);
}

struct config {
    cublasLtMatmulAlgo_t algo;
    size_t ws;
    float waves;
    double quick_ms;
};

struct timing {
    cublasLtHandle_t lt;
    const struct form *f;
    const cublasLtMatmulAlgo_t *algo;
    const void *x;
    void *const *w;
    void *y, *workspace;
    int copies;
};

static int launch(void *ctx, int i, cudaStream_t s)
{
    const struct timing *t = ctx;
    return bench_lt_run(t->lt, &t->f->d, t->algo, t->x, t->w[i % t->copies], t->y, t->workspace,
                        LT_WORKSPACE, s) != CUBLAS_STATUS_SUCCESS;
}

static int cmp_quick(const void *a, const void *b)
{
    double x = ((const struct config *)a)->quick_ms, y = ((const struct config *)b)->quick_ms;
    return x < y ? -1 : x > y;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Every configuration of every algorithm id that the check accepts for f,
 * within the workspace and the waves window; returns how many. */
static int enumerate(cublasLtHandle_t lt, const struct form *f, struct config *out, int max)
{
    static const uint16_t clusters[] = {0, 2, 3, 5, 6, 4, 8};
    int ids[256], num_ids = 0, n = 0;
    cudaDataType_t ct = f->splits > 1 ? CUDA_R_32F : CUDA_R_16BF;
    LK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, ct,
                                ct, 256, ids, &num_ids));
    for (int ii = 0; ii < num_ids; ii++) {
        cublasLtMatmulAlgo_t algo;
        if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, ct,
                                   ct, ids[ii], &algo) != CUBLAS_STATUS_SUCCESS)
            continue;
        uint32_t tiles[1024], stages[1024];
        size_t tw = 0, sw = 0, wr = 0;
        int32_t custom_max = 0, splitk_ok = 0;
        uint32_t red_mask = 0;
        int32_t swizzle_ok = 0;
        if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles,
                                              sizeof(tiles), &tw) != CUBLAS_STATUS_SUCCESS)
            continue;
        if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages,
                                              sizeof(stages), &sw) != CUBLAS_STATUS_SUCCESS)
            sw = 0;
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &custom_max,
                                          sizeof(custom_max), &wr);
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_ok,
                                          sizeof(splitk_ok), &wr);
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &red_mask,
                                          sizeof(red_mask), &wr);
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT,
                                          &swizzle_ok, sizeof(swizzle_ok), &wr);
        int num_tiles = (int)(tw / sizeof(uint32_t)), num_stages = (int)(sw / sizeof(uint32_t));
        if (num_tiles == 0) {
            tiles[0] = 0;
            num_tiles = 1;
        }
        if (num_stages == 0) {
            stages[0] = 0;
            num_stages = 1;
        }
        /* In-kernel splits: none, or 2-4 with each reduction the algorithm has. */
        int32_t splitks[16];
        uint32_t reds[16];
        int num_sk = 0;
        splitks[num_sk] = 1;
        reds[num_sk++] = 0;
        for (int32_t sk = 2; splitk_ok && f->splits == 1 && sk <= 4; sk++)
            for (uint32_t r = 1; r <= 4; r <<= 1)
                if (red_mask & r) {
                    splitks[num_sk] = sk;
                    reds[num_sk++] = r;
                }
        const int n_before = n;
        for (int ti = 0; ti < num_tiles; ti++)
            for (int si = 0; si < num_stages; si++) {
                /* A tile and stage count that the check refuses with every
                 * cluster shape and custom option (no K split) is not tried in
                 * its other forms: this keeps the search to seconds. (The
                 * Hopper algorithms refuse cluster 0 with custom option 0.) */
                bool any = false;
                for (size_t ci = 0; ci < sizeof(clusters) / sizeof(clusters[0]) && !any; ci++)
                    for (int32_t co = 0; co <= custom_max && !any; co++) {
                        cublasLtMatmulAlgo_t base = algo;
                        cublasLtMatmulHeuristicResult_t rb;
                        uint16_t cl = clusters[ci];
                        cublasLtMatmulAlgoConfigSetAttribute(&base, CUBLASLT_ALGO_CONFIG_TILE_ID,
                                                             &tiles[ti], sizeof(uint32_t));
                        cublasLtMatmulAlgoConfigSetAttribute(&base, CUBLASLT_ALGO_CONFIG_STAGES_ID,
                                                             &stages[si], sizeof(uint32_t));
                        cublasLtMatmulAlgoConfigSetAttribute(
                            &base, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof(cl));
                        cublasLtMatmulAlgoConfigSetAttribute(
                            &base, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &co, sizeof(co));
                        any = cublasLtMatmulAlgoCheck(lt, f->d.desc, f->d.a, f->d.b, f->d.c, f->d.c,
                                                      &base, &rb) == CUBLAS_STATUS_SUCCESS;
                    }
                if (!any)
                    continue;
                for (size_t ci = 0; ci < sizeof(clusters) / sizeof(clusters[0]); ci++)
                    for (int32_t co = 0; co <= custom_max; co++)
                        for (int ki = 0; ki < num_sk; ki++)
                            for (uint32_t sz = 0; sz <= (swizzle_ok ? 1u : 0u); sz++) {
                                cublasLtMatmulAlgo_t a = algo;
                                uint16_t cl = clusters[ci];
                                cublasLtMatmulAlgoConfigSetAttribute(
                                    &a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tiles[ti], sizeof(uint32_t));
                                cublasLtMatmulAlgoConfigSetAttribute(&a,
                                                                     CUBLASLT_ALGO_CONFIG_STAGES_ID,
                                                                     &stages[si], sizeof(uint32_t));
                                cublasLtMatmulAlgoConfigSetAttribute(
                                    &a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof(cl));
                                cublasLtMatmulAlgoConfigSetAttribute(
                                    &a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &co, sizeof(co));
                                cublasLtMatmulAlgoConfigSetAttribute(
                                    &a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitks[ki],
                                    sizeof(int32_t));
                                cublasLtMatmulAlgoConfigSetAttribute(
                                    &a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reds[ki],
                                    sizeof(uint32_t));
                                cublasLtMatmulAlgoConfigSetAttribute(
                                    &a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sz, sizeof(sz));
                                cublasLtMatmulHeuristicResult_t r;
                                if (cublasLtMatmulAlgoCheck(lt, f->d.desc, f->d.a, f->d.b, f->d.c,
                                                            f->d.c, &a,
                                                            &r) != CUBLAS_STATUS_SUCCESS)
                                    continue;
                                if (r.workspaceSize > LT_WORKSPACE || r.wavesCount < 0.4f ||
                                    r.wavesCount > 2.05f)
                                    continue;
                                if (n < max)
                                    out[n++] =
                                        (struct config){a, r.workspaceSize, r.wavesCount, 0.0};
                            }
            }
        printf("ALGO id=%d tiles=%d stages=%d custom_max=%d splitk=%d red_mask=%u swizzle=%d "
               "accepted=%d\n",
               ids[ii], num_tiles, num_stages, custom_max, splitk_ok, red_mask, swizzle_ok,
               n - n_before);
    }
    return n;
}

/* Checks y (bf16, or f32 partials summed over splits) against ref; returns
 * the number of outputs off by more than one bf16 ulp (and 1e-4 of the rms). */
static long check(const struct form *f, const void *y, const float *ref, double rms, int m, int n,
                  void *host, double *err_out)
{
    size_t count = (size_t)m * n;
    CK(cudaMemcpy(host, y, count * (f->splits > 1 ? 4u * f->splits : 2u), cudaMemcpyDeviceToHost));
    long bad = 0;
    double err = 0.0;
    for (size_t i = 0; i < count; i++) {
        double v = 0.0;
        if (f->splits > 1)
            for (int s = 0; s < f->splits; s++)
                v += ((const float *)host)[(size_t)s * count + i];
        else
            v = folio_bf16_to_f32(((const uint16_t *)host)[i]);
        bad += bench_off_ulp(v, ref[i], rms, &err);
    }
    *err_out = err / rms;
    return bad;
}

static void print_config(const char *shape, int m, const struct form *f, int rank, double ms,
                         double t0, double flop, const struct config *c, long bad, double err,
                         const char *kernel)
{
    char config[200];
    bench_lt_algo_describe(&c->algo, config, sizeof config);
    printf("RESULT shape=%s m=%d splits=%d rank=%d ms=%.5f tflops=%.1f ratio=%.3f %s waves=%.2f "
           "ws=%zu err=%.1e ok=%d kernel=%s\n",
           shape, m, f->splits, rank, ms, ms > 0 ? flop / (ms * 1e9) : 0.0, t0 > 0 ? ms / t0 : 0.0,
           config, c->waves, c->ws, err, bad == 0, kernel);
    fflush(stdout);
}

static int parse_list(const char *s, int *out, int max, int lo, int hi)
{
    int n = 0;
    for (const char *p = s; *p && n < max;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > hi)
            return -1;
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv)
{
    struct shape shapes[16] = {
        {"qkv", 2560, 2048},
        {"o", 2048, 2048},
        {"gateup", 11264, 2048},
        {"down", 2048, 5632},
    };
    size_t num_shapes = 4;
    int m = 256, splits_list[8] = {1, 2, 4}, num_splits = 3, top = 8, quick_max = MAX_CONFIGS;
    static char names[16][32];
    for (int i = 1, given = 0; i < argc; i++) {
        int n, k;
        if (strcmp(argv[i], "--m") == 0 && i + 1 < argc &&
            parse_list(argv[++i], &m, 1, 1, 8192) == 1)
            continue;
        if (strcmp(argv[i], "--splits") == 0 && i + 1 < argc &&
            (num_splits = parse_list(argv[++i], splits_list, 8, 1, 16)) > 0)
            continue;
        if (strcmp(argv[i], "--top") == 0 && i + 1 < argc &&
            parse_list(argv[++i], &top, 1, 1, 100) == 1)
            continue;
        if (strcmp(argv[i], "--quick") == 0 && i + 1 < argc &&
            parse_list(argv[++i], &quick_max, 1, 1, MAX_CONFIGS) == 1)
            continue;
        if (given < 16 && sscanf(argv[i], "%31[^:]:%d:%d", names[given], &n, &k) == 3 && n > 0 &&
            k > 0) {
            shapes[given] = (struct shape){names[given], n, k};
            num_shapes = (size_t)++given;
            continue;
        }
        fprintf(stderr, "usage: lt_search_bench [--m M] [--splits S[,S...]] [--top N] "
                        "[--quick N] [NAME:N:K ...]\n");
        return 2;
    }
    cublasLtHandle_t lt;
    LK(cublasLtCreate(&lt));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    void *workspace;
    CK(cudaMalloc(&workspace, LT_WORKSPACE));
    struct config *configs = malloc(sizeof(struct config) * MAX_CONFIGS);
    if (!configs)
        return 2;
    int wrong = 0;
    for (size_t si = 0; si < num_shapes; si++) {
        const struct shape *sh = &shapes[si];
        const size_t yn = (size_t)m * sh->n;
        struct bench_gemm_inputs in;
        bench_gemm_inputs_make(&in, sh->n, sh->k, m);
        void *const *w = in.w, *x = in.x, *y, *y_ref;
        const int copies = in.copies;
        float *ref = malloc(yn * 4);
        void *host = malloc(yn * 4 * 16);
        CK(cudaMalloc(&y, yn * 4 * 16));
        CK(cudaMalloc(&y_ref, yn * 4));
        /* The reference: the heuristic's first choice writing f32. */
        struct bench_lt_desc dref;
        bench_lt_desc_make(&dref, m, sh->n, sh->k, 1);
        cublasLtMatmulHeuristicResult_t r0;
        if (bench_lt_heuristic(lt, &dref, LT_WORKSPACE, 1, &r0) < 1) {
            fprintf(stderr, "lt_search_bench: no f32 algorithm for %s\n", sh->name);
            return 2;
        }
        LK(bench_lt_run(lt, &dref, &r0.algo, x, w[0], y_ref, workspace, LT_WORKSPACE, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(ref, y_ref, yn * 4, cudaMemcpyDeviceToHost));
        bench_lt_desc_destroy(&dref);
        const double rms = bench_rms(ref, yn);
        const double flop = 2.0 * m * sh->n * sh->k;
        double t0 = -1.0;
        for (int pi = 0; pi < num_splits; pi++) {
            const int splits = splits_list[pi];
            if (sh->k % splits != 0 || (sh->k / splits) % 8 != 0)
                continue;
            struct form f;
            form_make(&f, m, sh->n, sh->k, splits);
            char kernel[160];
            double err;
            if (splits == 1) { /* the baseline: the heuristic's first choice */
                cublasLtMatmulHeuristicResult_t h;
                const int found = bench_lt_heuristic(lt, &f.d, LT_WORKSPACE, 1, &h);
                struct config c0 = {h.algo, h.workspaceSize, h.wavesCount, 0.0};
                struct timing t = {lt, &f, &c0.algo, x, w, y, workspace, copies};
                CK(cudaMemset(y, 0xff, yn * 2));
                if (found < 1 || launch(&t, 0, s)) {
                    fprintf(stderr, "lt_search_bench: the heuristic's choice failed for %s\n",
                            sh->name);
                    return 2;
                }
                long bad = check(&f, y, ref, rms, m, sh->n, host, &err);
                wrong += bad != 0;
                t0 = bench_graph_median_ms(launch, &t, 20, 3, 15, s, kernel, sizeof kernel);
                print_config(sh->name, m, &f, 0, t0, t0, flop, &c0, bad, err, kernel);
            }
            const double start = now_s();
            int n = enumerate(lt, &f, configs, MAX_CONFIGS), timed = 0;
            printf("SEARCH shape=%s m=%d splits=%d accepted=%d enumerate_s=%.1f\n", sh->name, m,
                   splits, n, now_s() - start);
            fflush(stdout);
            /* Quick pass: 10 launches, 3 replays; failures sort last. */
            const double qstart = now_s();
            for (int ci = 0; ci < n; ci++) {
                configs[ci].quick_ms = 1e9;
                if (ci >= quick_max || now_s() - qstart > QUICK_BUDGET_S)
                    continue;
                struct timing t = {lt, &f, &configs[ci].algo, x, w, y, workspace, copies};
                if (launch(&t, 0, s) != 0 || cudaStreamSynchronize(s) != cudaSuccess) {
                    cudaGetLastError();
                    continue;
                }
                double ms = bench_graph_median_ms(launch, &t, 10, 1, 3, s, NULL, 0);
                configs[ci].quick_ms = ms > 0 ? ms : 1e9;
                timed++;
            }
            qsort(configs, (size_t)n, sizeof(struct config), cmp_quick);
            printf("SEARCH shape=%s m=%d splits=%d quick_timed=%d quick_s=%.1f\n", sh->name, m,
                   splits, timed, now_s() - qstart);
            double best = -1.0;
            int best_rank = -1;
            for (int ci = 0; ci < n && ci < top && configs[ci].quick_ms < 1e9; ci++) {
                struct timing t = {lt, &f, &configs[ci].algo, x, w, y, workspace, copies};
                CK(cudaMemset(y, 0xff, yn * (splits > 1 ? 4u * splits : 2u)));
                if (launch(&t, 0, s))
                    continue;
                long bad = check(&f, y, ref, rms, m, sh->n, host, &err);
                wrong += bad != 0;
                double ms = bench_graph_median_ms(launch, &t, 20, 3, 15, s, kernel, sizeof kernel);
                print_config(sh->name, m, &f, ci + 1, ms, t0, flop, &configs[ci], bad, err, kernel);
                if (bad == 0 && ms > 0 && (best < 0 || ms < best)) {
                    best = ms;
                    best_rank = ci + 1;
                }
            }
            printf("BEST shape=%s m=%d splits=%d rank=%d ms=%.5f first_ms=%.5f ratio=%.3f\n",
                   sh->name, m, splits, best_rank, best, t0, t0 > 0 ? best / t0 : 0.0);
            fflush(stdout);
            bench_lt_desc_destroy(&f.d);
        }
        bench_gemm_inputs_free(&in);
        CK(cudaFree(y));
        CK(cudaFree(y_ref));
        free(ref);
        free(host);
    }
    free(configs);
    printf("lt_search_bench: %d wrong\n", wrong);
    return wrong ? 1 : 0;
}
