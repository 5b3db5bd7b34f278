/* gemm_tma_bench: folio_k_gemm_tma (kernels/gemm_tma.cu, TMA + wgmma) against
 * cuBLASLt on TinyLlama's decode projections, checked and timed.
 *
 *     gemm_tma_bench [--m M] [NAME:N:K:SPLITS[,SPLITS] ...]
 *
 * For each shape (by default TinyLlama's QKV, O, gate/up as one GEMM of
 * 2 * 5632 rows, down; or those given, e.g. even264:16896:2048:1, a GEMM of
 * exactly two CTAs a SM), m in 8, 16, 32, 64 (or only M) and the K slices
 * listed per shape: x and w hold deterministic
 * pseudo-random bf16 values (x in [-1, 1], w in [-0.02, 0.02]); the reference
 * is cuBLASLt with f32 output (the layout of cuda_backend.c's gemm()). Check:
 * bf16 output within one bf16 ulp of the reference (or 1e-4 of its rms, where
 * a sum nearly cancels); f32 slices summed on the host within 1e-4 rms. err:
 * max |y - ref| over the rms of ref. Each case runs three ways: plain; with
 * programmatic dependent launch (each launch's first weight copies overlap the
 * previous one's tail); and so with x's map spanning 64 rows (TMA reads rows
 * past m instead of zero-filling them). (Weights re-laid as contiguous 64 x 64
 * tiles measured the same as row-major ones: 2026-11-29-cuda-round11.md.)
 * Timings: 20 launches back to back in a CUDA graph, as a
 * decode step runs them (timing launches one by one counted cuBLASLt's host
 * submission time, which favoured the kernel), the median over 15 replays
 * divided by 20; the weights rotate over copies of at least 256 MB, so that
 * they come from device memory as in a decode step (the H200's L2 is 50 MB).
 * ref_ms is cuBLASLt writing bf16, unsplit, over the same copies. One line per
 * case:
 *     RESULT name=tma[pdl|pdlx64]_<shape>_m<m>_s<splits> ms=... ref_ms=... GBps=... err=... ok=1
 * GBps: weight bytes over the kernel's time. Exit status 1 if a case fails. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio_kernels.h"
#include "gemm_bench_common.h"
#include "safetensors.h"

#define WARMUP 3
#define REPEATS 15
#define LT_WORKSPACE (32u << 20)

struct shape {
    const char *name;
    int n, k;
    int splits[3]; /* the K slices to run, 0-terminated */
};

/* y (n x m column-major, i.e. [m][n]) = w^T x as cuda_backend.c's gemm() asks
 * cuBLASLt, with the heuristic's first choice. */
struct lt_gemm {
    struct bench_lt_desc d;
    cublasLtMatmulAlgo_t algo;
};

static void lt_plan(cublasLtHandle_t lt, struct lt_gemm *g, int m, int n, int k, int out_f32)
{
    bench_lt_desc_make(&g->d, m, n, k, out_f32);
    cublasLtMatmulHeuristicResult_t res;
    if (bench_lt_heuristic(lt, &g->d, LT_WORKSPACE, 1, &res) < 1) {
        fprintf(stderr, "gemm_tma_bench: cuBLASLt has no algorithm for %dx%dx%d\n", m, n, k);
        exit(2);
    }
    g->algo = res.algo;
}

static void lt_run(cublasLtHandle_t lt, const struct lt_gemm *g, const void *x, const void *w,
                   void *y, void *workspace, cudaStream_t s)
{
    LK(bench_lt_run(lt, &g->d, &g->algo, x, w, y, workspace, LT_WORKSPACE, s));
}

/* What one timed launch runs: cuBLASLt bf16 (tma 0) or folio_k_gemm_tma (1,
 * with programmatic dependent launch if pdl); copy c of the weights. */
struct runner {
    int tma, pdl, m, n, k, splits, copies;
    const struct folio_k_tmap *xmap, *wmaps;
    void *y, *workspace;
    cublasLtHandle_t lt;
    const struct lt_gemm *g;
    const void *x;
    void *const *w;
};

static int run_one(void *ctx, int i, cudaStream_t s)
{
    const struct runner *r = ctx;
    const int c = i % r->copies;
    if (r->tma == 0)
        lt_run(r->lt, r->g, r->x, r->w[c], r->y, r->workspace, s);
    else
        CK(folio_k_gemm_tma(r->xmap, &r->wmaps[c], r->y, r->m, r->n, r->k, r->splits, 0, r->pdl,
                            s));
    return 0;
}

/* Median ms of one launch: BATCH launches back to back in a CUDA graph (the
 * weights rotating over the copies), as a decode step runs them, so that no
 * host submission time counts; median over REPEATS replays. */
#define BATCH 20
static double time_median(struct runner *r, cudaStream_t s)
{
    return bench_graph_median_ms(run_one, r, BATCH, WARMUP, REPEATS, s, NULL, 0);
}

int main(int argc, char **argv)
{
    struct shape shapes[16] = {
        {"qkv", 2560, 2048, {1, 4, 0}},
        {"o", 2048, 2048, {1, 4, 0}},
        {"gateup", 11264, 2048, {1, 2, 0}},
        {"down", 2048, 5632, {4, 8, 0}},
    };
    size_t num_shapes = 4;
    int ms_list[] = {8, 16, 32, 64}, num_ms = 4;
    static char names[16][32];
    for (int i = 1, given = 0; i < argc; i++) {
        int n, k, s1, s2 = 0, m;
        if (strcmp(argv[i], "--m") == 0 && i + 1 < argc && sscanf(argv[i + 1], "%d", &m) == 1 &&
            m >= 1 && m <= 64) {
            ms_list[0] = m;
            num_ms = 1;
            i++;
        } else if (given < 16 &&
                   sscanf(argv[i], "%31[^:]:%d:%d:%d,%d", names[given], &n, &k, &s1, &s2) >= 4 &&
                   n > 0 && k > 0 && s1 > 0 && s2 >= 0) {
            shapes[given] = (struct shape){names[given], n, k, {s1, s2, 0}};
            num_shapes = (size_t)++given;
        } else {
            fprintf(stderr, "usage: gemm_tma_bench [--m M] [NAME:N:K:SPLITS[,SPLITS] ...]\n");
            return 2;
        }
    }
    cublasLtHandle_t lt;
    LK(cublasLtCreate(&lt));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    void *workspace;
    CK(cudaMalloc(&workspace, LT_WORKSPACE));
    int failed = 0, ok_count = 0;
    for (size_t si = 0; si < num_shapes; si++) {
        const struct shape *sh = &shapes[si];
        const size_t wn = (size_t)sh->n * sh->k;
        struct bench_gemm_inputs in;
        bench_gemm_inputs_make(&in, sh->n, sh->k, 64);
        void *const *w = in.w, *x = in.x;
        const int copies = in.copies;
        void *y, *y_ref;
        CK(cudaMalloc(&y, (size_t)8 * 64 * sh->n * 4));
        CK(cudaMalloc(&y_ref, (size_t)64 * sh->n * 4));
        float *ref = malloc((size_t)64 * sh->n * 4), *out = malloc((size_t)8 * 64 * sh->n * 4);
        for (int mi = 0; mi < num_ms; mi++) {
            const int m = ms_list[mi];
            /* maps: [0, copies) weights, [copies] x of m rows, [copies + 1] x of 64 rows */
            struct folio_k_tmap *maps = aligned_alloc(64, sizeof(*maps) * (copies + 2));
            int bad = folio_k_tmap_encode(&maps[copies], x, m, sh->k, FOLIO_K_TMA_MAX_ROWS);
            bad |= folio_k_tmap_encode(&maps[copies + 1], x, 64, sh->k, FOLIO_K_TMA_MAX_ROWS);
            for (int c = 0; c < copies; c++)
                bad |= folio_k_tmap_encode(&maps[c], w[c], sh->n, sh->k, FOLIO_K_TMA_NT);
            if (bad) {
                fprintf(stderr, "gemm_tma_bench: no tensor map for %s m=%d\n", sh->name, m);
                return 2;
            }
            struct lt_gemm g_ref, g_time;
            lt_plan(lt, &g_ref, m, sh->n, sh->k, 1);
            lt_plan(lt, &g_time, m, sh->n, sh->k, 0);
            lt_run(lt, &g_ref, x, w[0], y_ref, workspace, s);
            CK(cudaStreamSynchronize(s));
            CK(cudaMemcpy(ref, y_ref, (size_t)m * sh->n * 4, cudaMemcpyDeviceToHost));
            const double rms = bench_rms(ref, (size_t)m * sh->n);
            struct runner run = {.tma = 0,
                                 .m = m,
                                 .n = sh->n,
                                 .k = sh->k,
                                 .splits = 1,
                                 .copies = copies,
                                 .xmap = &maps[copies],
                                 .wmaps = maps,
                                 .y = y_ref,
                                 .workspace = workspace,
                                 .lt = lt,
                                 .g = &g_time,
                                 .x = x,
                                 .w = w};
            double ref_ms = time_median(&run, s);
            run.y = y;
            /* each listed split: plain; with PDL; with PDL and x read as 64 rows */
            for (int v = 0; v < 9; v++) {
                const int splits = sh->splits[v % 3], variant = v / 3;
                if (!splits)
                    continue;
                const struct folio_k_tmap *xm = &maps[copies + (variant == 2)];
                CK(cudaMemset(y, 0xff, (size_t)splits * m * sh->n * 4)); /* NaN where unwritten */
                CK(folio_k_gemm_tma(xm, &maps[0], y, m, sh->n, sh->k, splits, 0, 0, s));
                CK(cudaStreamSynchronize(s));
                double err = 0.0;
                long ulp_bad = 0;
                if (splits == 1) {
                    uint16_t *o16 = (uint16_t *)out;
                    CK(cudaMemcpy(o16, y, (size_t)m * sh->n * 2, cudaMemcpyDeviceToHost));
                    for (size_t i = 0; i < (size_t)m * sh->n; i++)
                        ulp_bad += bench_off_ulp(folio_bf16_to_f32(o16[i]), ref[i], rms, &err);
                } else {
                    CK(cudaMemcpy(out, y, (size_t)splits * m * sh->n * 4, cudaMemcpyDeviceToHost));
                    for (size_t i = 0; i < (size_t)m * sh->n; i++) {
                        double v = 0.0;
                        for (int p = 0; p < splits; p++)
                            v += out[(size_t)p * m * sh->n + i];
                        double e = fabs(v - ref[i]);
                        err = isnan(e) || e > err ? (isnan(e) ? INFINITY : e) : err;
                    }
                }
                err /= rms;
                const int ok = splits == 1 ? ulp_bad == 0 : err < 1e-4;
                run.tma = 1;
                run.pdl = variant > 0;
                run.xmap = xm;
                run.splits = splits;
                double t = time_median(&run, s);
                printf("RESULT name=tma%s_%s_m%d_s%d ms=%.5f ref_ms=%.5f ratio=%.2f GBps=%.1f "
                       "err=%.2e ok=%d\n",
                       variant == 0   ? ""
                       : variant == 1 ? "pdl"
                                      : "pdlx64",
                       sh->name, m, splits, t, ref_ms, t / ref_ms, wn * 2.0 / (t * 1e6), err, ok);
                fflush(stdout);
                failed += !ok;
                ok_count += ok;
            }
            bench_lt_desc_destroy(&g_ref.d);
            bench_lt_desc_destroy(&g_time.d);
            free(maps);
        }
        bench_gemm_inputs_free(&in);
        CK(cudaFree(y));
        CK(cudaFree(y_ref));
        free(ref);
        free(out);
    }
    printf("gemm_tma_bench: %d ok, %d failed\n", ok_count, failed);
    return failed ? 1 : 0;
}
