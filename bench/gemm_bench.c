/* gemm_bench: folio_k_gemm_skinny (kernels/gemm_skinny.cu) against cuBLASLt on
 * TinyLlama's decode projections, checked and timed.
 *
 *     gemm_bench            (env FOLIO_SKINNY_SPLITS=S forces the K slices)
 *
 * For each shape (QKV, O, down, gate/up with SiLU*mul; then O and down once
 * more in bf16 mode, as FOLIO_SKINNY_PROJ=bf16 runs them) and m in 8, 16, 32,
 * 64: x and w hold deterministic pseudo-random bf16 values (x in [-1, 1], w
 * in [-0.02, 0.02]); the reference is cuBLASLt in f32 (the layout of
 * cuda_backend.c's gemm()). Checks: PARTIALS summed on the host against the
 * f32 reference (max |error| over the rms of the reference), BF16 within one
 * bf16 ulp of the rounded reference, GLU against SiLU*mul applied on the host
 * to the bf16-rounded reference (one ulp; two allowed for at most 1e-4 of the
 * outputs, where the two f32 sums round gate or up to neighbouring bf16
 * values). Each kernel also runs again eagerly and as a CUDA graph replay:
 * the bits must match. Timings: CUDA events around each of 200 launches after
 * 20 warm-ups, median; the weights rotate over copies of at least 256 MB so
 * that they come from device memory as in a decode step (the H200's L2 is
 * 50 MB). ref_ms times what the backend's cuBLASLt path does for the shape:
 * bf16 out (QKV, o_bf16, down_bf16), 2 split-K f32 partials (O, down),
 * bf16 out + silu_mul (gate/up). One line per case:
 *     RESULT name=skinny_<shape>_m<m> ms=... ref_ms=... GBps=... max_err=... ok=1
 * GBps: weight + activation + output bytes of the skinny kernel over its
 * time. Exit status 1 if any case fails. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "folio_kernels.h"
#include "safetensors.h"

#define WARMUP 20
#define REPEATS 200
#define ROTATE_BYTES (256.0 * 1024 * 1024)
#define MAX_COPIES 64
#define LT_WORKSPACE (32u << 20)

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "gemm_bench: %s: %s (line %d)\n", #x, cudaGetErrorString(e_),          \
                    __LINE__);                                                                     \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

#define LK(x)                                                                                      \
    do {                                                                                           \
        cublasStatus_t s_ = (x);                                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "gemm_bench: %s: cuBLASLt status %d (line %d)\n", #x, (int)s_,         \
                    __LINE__);                                                                     \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

struct shape {
    const char *name;
    int n, k, mode; /* GLU: n outputs from 2n weight rows */
};

static uint64_t rng_state = 0x853c49e6748fea9bull;

static float next_uniform(void) /* [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (2.0 / 16777216.0) - 1.0);
}

static void fill_bf16(uint16_t *v, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        v[i] = folio_f32_to_bf16(scale * next_uniform());
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* bf16 bits on a monotonic integer scale, so that ulp distances cross zero. */
static int32_t bf16_order(uint16_t h)
{
    return h & 0x8000 ? -(int32_t)(h & 0x7fff) : (int32_t)h;
}

static float round_bf16(float f)
{
    return folio_bf16_to_f32(folio_f32_to_bf16(f));
}

/* One cuBLASLt matmul as cuda_backend.c describes it: column-major w is K x N
 * (op T), x is K x M, y is N x M; splits > 1 batches K slices into f32
 * partials [splits][m][n]. */
struct lt_gemm {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
};

static void lt_batch(cublasLtMatrixLayout_t l, int count, int64_t stride)
{
    LK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                        sizeof(count)));
    LK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                        sizeof(stride)));
}

static void lt_plan(cublasLtHandle_t lt, struct lt_gemm *g, int m, int n, int k, int out_f32,
                    int splits)
{
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    int ks = k / splits;
    LK(cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LK(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    LK(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    LK(cublasLtMatrixLayoutCreate(&g->a, CUDA_R_16BF, ks, n, k));
    LK(cublasLtMatrixLayoutCreate(&g->b, CUDA_R_16BF, ks, m, k));
    LK(cublasLtMatrixLayoutCreate(&g->c, out_f32 ? CUDA_R_32F : CUDA_R_16BF, n, m, n));
    if (splits > 1) {
        lt_batch(g->a, splits, ks);
        lt_batch(g->b, splits, ks);
        lt_batch(g->c, splits, (int64_t)m * n);
    }
    cublasLtMatmulPreference_t pref;
    size_t ws = LT_WORKSPACE;
    LK(cublasLtMatmulPreferenceCreate(&pref));
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                            sizeof(ws)));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    LK(cublasLtMatmulAlgoGetHeuristic(lt, g->desc, g->a, g->b, g->c, g->c, pref, 1, &res, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found < 1) {
        fprintf(stderr, "gemm_bench: cuBLASLt has no algorithm for %dx%dx%d\n", m, n, k);
        exit(2);
    }
    g->algo = res.algo;
}

static void lt_run(cublasLtHandle_t lt, const struct lt_gemm *g, const void *x, const void *w,
                   void *y, void *workspace, cudaStream_t s)
{
    const float alpha = 1.0f, beta = 0.0f;
    LK(cublasLtMatmul(lt, g->desc, &alpha, w, g->a, x, g->b, &beta, y, g->c, y, g->c, &g->algo,
                      workspace, LT_WORKSPACE, s));
}

static void lt_destroy(struct lt_gemm *g)
{
    cublasLtMatrixLayoutDestroy(g->a);
    cublasLtMatrixLayoutDestroy(g->b);
    cublasLtMatrixLayoutDestroy(g->c);
    cublasLtMatmulDescDestroy(g->desc);
}

/* Everything one case launches. */
struct bench_case {
    const struct shape *sh;
    int m, splits, wrows, copies;
    uint16_t *x, *w[MAX_COPIES];
    void *y, *y_ref, *gate_up;
    float *partials_ref;
    struct lt_gemm ref, ref_time;
    cublasLtHandle_t lt;
    void *workspace;
    cudaStream_t s;
};

static void launch_skinny(struct bench_case *c, int copy)
{
    CK(folio_k_gemm_skinny(c->y, c->x, c->w[copy], c->m, c->sh->n, c->sh->k, c->sh->mode, c->splits,
                           c->s));
}

/* The backend's cuBLASLt path for the shape. */
static void launch_ref(struct bench_case *c, int copy)
{
    if (c->sh->mode == FOLIO_K_SKINNY_GLU) {
        lt_run(c->lt, &c->ref_time, c->x, c->w[copy], c->gate_up, c->workspace, c->s);
        CK(folio_k_silu_mul((folio_bf16_bits *)c->y_ref, c->gate_up, c->m, c->sh->n, c->s));
    } else if (c->sh->mode == FOLIO_K_SKINNY_PARTIALS) {
        lt_run(c->lt, &c->ref_time, c->x, c->w[copy], c->partials_ref, c->workspace, c->s);
    } else {
        lt_run(c->lt, &c->ref_time, c->x, c->w[copy], c->y_ref, c->workspace, c->s);
    }
}

static double time_median(struct bench_case *c, void (*fn)(struct bench_case *, int))
{
    cudaEvent_t ev[REPEATS + 1];
    for (int i = 0; i <= REPEATS; i++)
        CK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < WARMUP; i++)
        fn(c, i % c->copies);
    CK(cudaEventRecord(ev[0], c->s));
    for (int i = 0; i < REPEATS; i++) {
        fn(c, (WARMUP + i) % c->copies);
        CK(cudaEventRecord(ev[i + 1], c->s));
    }
    CK(cudaStreamSynchronize(c->s));
    float t[REPEATS];
    for (int i = 0; i < REPEATS; i++)
        CK(cudaEventElapsedTime(&t[i], ev[i], ev[i + 1]));
    for (int i = 0; i <= REPEATS; i++)
        CK(cudaEventDestroy(ev[i]));
    qsort(t, REPEATS, sizeof(float), cmp_float);
    return 0.5 * (t[REPEATS / 2 - 1] + t[REPEATS / 2]);
}

/* The skinny kernel's output once more, eagerly and as a graph replay, must
 * equal the first result bit for bit. */
static int check_repeatable(struct bench_case *c, const void *first, size_t bytes)
{
    void *again = malloc(bytes);
    if (!again) {
        fprintf(stderr, "gemm_bench: out of host memory\n");
        exit(2);
    }
    int ok = 1;
    CK(cudaMemsetAsync(c->y, 0xff, bytes, c->s));
    launch_skinny(c, 0);
    CK(cudaMemcpyAsync(again, c->y, bytes, cudaMemcpyDeviceToHost, c->s));
    CK(cudaStreamSynchronize(c->s));
    if (memcmp(again, first, bytes) != 0) {
        fprintf(stderr, "gemm_bench: %s m=%d: a second eager run differs\n", c->sh->name, c->m);
        ok = 0;
    }
    CK(cudaMemsetAsync(c->y, 0xff, bytes, c->s));
    CK(cudaStreamSynchronize(c->s));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal));
    launch_skinny(c, 0);
    CK(cudaStreamEndCapture(c->s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    CK(cudaGraphLaunch(exec, c->s));
    CK(cudaMemcpyAsync(again, c->y, bytes, cudaMemcpyDeviceToHost, c->s));
    CK(cudaStreamSynchronize(c->s));
    if (memcmp(again, first, bytes) != 0) {
        fprintf(stderr, "gemm_bench: %s m=%d: the graph replay differs from the eager run\n",
                c->sh->name, c->m);
        ok = 0;
    }
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    free(again);
    return ok;
}

/* Compares the skinny result with the f32 reference; *max_err: see the top. */
static int check(struct bench_case *c, const float *ref, const void *out, double *max_err)
{
    const int m = c->m, n = c->sh->n, ldr = c->wrows; /* ref is [m][wrows] */
    int ok = 1;
    if (c->sh->mode == FOLIO_K_SKINNY_PARTIALS) {
        const float *p = out;
        double ss = 0.0, worst = 0.0;
        for (int r = 0; r < m; r++)
            for (int j = 0; j < n; j++) {
                double v = ref[(size_t)r * ldr + j];
                ss += v * v;
                float sum = 0.0f;
                for (int s = 0; s < c->splits; s++)
                    sum += p[(size_t)s * m * n + (size_t)r * n + j];
                double d = fabs(sum - v);
                if (d > worst || isnan(sum))
                    worst = isnan(sum) ? INFINITY : d;
            }
        double rms = sqrt(ss / ((double)m * n));
        *max_err = rms > 0 ? worst / rms : worst;
        return *max_err <= 1e-4;
    }
    const uint16_t *y = out;
    int max_ulp = 0;
    long over1 = 0;
    for (int r = 0; r < m; r++)
        for (int j = 0; j < n; j++) {
            float want;
            if (c->sh->mode == FOLIO_K_SKINNY_GLU) {
                float gate = round_bf16(ref[(size_t)r * ldr + j]);
                float up = round_bf16(ref[(size_t)r * ldr + n + j]);
                float act = round_bf16(gate / (1.0f + expf(-gate)));
                want = act * up;
            } else {
                want = ref[(size_t)r * ldr + j];
            }
            uint16_t got = y[(size_t)r * n + j];
            int d = abs(bf16_order(got) - bf16_order(folio_f32_to_bf16(want)));
            if ((got & 0x7fff) > 0x7f80) /* NaN */
                d = 1 << 20;
            if (d > max_ulp)
                max_ulp = d;
            if (d > 1)
                over1++;
        }
    *max_err = max_ulp;
    if (c->sh->mode == FOLIO_K_SKINNY_GLU)
        ok = max_ulp <= 1 || (max_ulp <= 2 && over1 <= (long)m * n / 10000);
    else
        ok = max_ulp <= 1;
    if (over1 > 0)
        fprintf(stderr, "gemm_bench: %s m=%d: %ld outputs more than 1 ulp off (max %d)\n",
                c->sh->name, c->m, over1, max_ulp);
    return ok;
}

static int run_case(const struct shape *sh, int m, int forced_splits, int num_sms,
                    cublasLtHandle_t lt, void *workspace, cudaStream_t s)
{
    struct bench_case c = {0};
    c.sh = sh;
    c.m = m;
    c.lt = lt;
    c.workspace = workspace;
    c.s = s;
    c.wrows = sh->mode == FOLIO_K_SKINNY_GLU ? 2 * sh->n : sh->n;
    c.splits = folio_k_gemm_skinny_splits(m, sh->n, sh->k, sh->mode, num_sms);
    if (forced_splits > 0 && sh->k % (64 * forced_splits) == 0)
        c.splits = forced_splits;
    else if (forced_splits > 0)
        fprintf(stderr, "gemm_bench: %s: k %d does not take %d slices of 64s; %d instead\n",
                sh->name, sh->k, forced_splits, c.splits);
    const size_t wcount = (size_t)c.wrows * sh->k, xcount = (size_t)m * sh->k;
    const double wbytes = 2.0 * wcount;
    c.copies = (int)ceil(ROTATE_BYTES / wbytes);
    if (c.copies > MAX_COPIES)
        c.copies = MAX_COPIES;

    /* Inputs: the same pseudo-random stream for every run of the program. */
    uint16_t *hx = malloc(sizeof(uint16_t) * xcount), *hw = malloc(sizeof(uint16_t) * wcount);
    size_t out_bytes = sh->mode == FOLIO_K_SKINNY_PARTIALS
                           ? sizeof(float) * (size_t)c.splits * m * sh->n
                           : sizeof(uint16_t) * (size_t)m * sh->n;
    size_t ref_bytes = sizeof(float) * (size_t)m * c.wrows;
    float *href = malloc(ref_bytes);
    void *hout = malloc(out_bytes);
    if (!hx || !hw || !href || !hout) {
        fprintf(stderr, "gemm_bench: out of host memory\n");
        exit(2);
    }
    fill_bf16(hx, xcount, 1.0f);
    fill_bf16(hw, wcount, 0.02f);
    CK(cudaMalloc((void **)&c.x, sizeof(uint16_t) * xcount));
    CK(cudaMemcpy(c.x, hx, sizeof(uint16_t) * xcount, cudaMemcpyHostToDevice));
    for (int i = 0; i < c.copies; i++) {
        CK(cudaMalloc((void **)&c.w[i], sizeof(uint16_t) * wcount));
        if (i == 0)
            CK(cudaMemcpy(c.w[0], hw, sizeof(uint16_t) * wcount, cudaMemcpyHostToDevice));
        else
            CK(cudaMemcpy(c.w[i], c.w[0], sizeof(uint16_t) * wcount, cudaMemcpyDeviceToDevice));
    }
    float *d_ref;
    CK(cudaMalloc((void **)&d_ref, ref_bytes));
    CK(cudaMalloc(&c.y, out_bytes));
    CK(cudaMalloc(&c.y_ref, sizeof(uint16_t) * (size_t)m * c.wrows));
    CK(cudaMalloc(&c.gate_up, sizeof(uint16_t) * (size_t)m * c.wrows));
    CK(cudaMalloc((void **)&c.partials_ref, sizeof(float) * 2 * (size_t)m * sh->n));

    /* The f32 reference, then the skinny kernel once. */
    lt_plan(lt, &c.ref, m, c.wrows, sh->k, 1, 1);
    lt_run(lt, &c.ref, c.x, c.w[0], d_ref, workspace, s);
    CK(cudaMemsetAsync(c.y, 0xff, out_bytes, s));
    launch_skinny(&c, 0);
    CK(cudaMemcpyAsync(href, d_ref, ref_bytes, cudaMemcpyDeviceToHost, s));
    CK(cudaMemcpyAsync(hout, c.y, out_bytes, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    double max_err = 0.0;
    int ok = check(&c, href, hout, &max_err);
    ok = check_repeatable(&c, hout, out_bytes) && ok;

    /* Timings. */
    if (sh->mode == FOLIO_K_SKINNY_GLU)
        lt_plan(lt, &c.ref_time, m, c.wrows, sh->k, 0, 1);
    else if (sh->mode == FOLIO_K_SKINNY_PARTIALS)
        lt_plan(lt, &c.ref_time, m, sh->n, sh->k, 1, 2);
    else
        lt_plan(lt, &c.ref_time, m, sh->n, sh->k, 0, 1);
    double ms = time_median(&c, launch_skinny);
    double ref_ms = time_median(&c, launch_ref);
    double bytes = wbytes + 2.0 * xcount + (double)out_bytes;
    printf("RESULT name=skinny_%s_m%d ms=%.5f ref_ms=%.5f GBps=%.1f max_err=%.3g splits=%d "
           "ok=%d\n",
           sh->name, m, ms, ref_ms, bytes / (ms * 1e-3) / 1e9, max_err, c.splits, ok);
    fflush(stdout);

    lt_destroy(&c.ref);
    lt_destroy(&c.ref_time);
    for (int i = 0; i < c.copies; i++)
        CK(cudaFree(c.w[i]));
    CK(cudaFree(c.x));
    CK(cudaFree(d_ref));
    CK(cudaFree(c.y));
    CK(cudaFree(c.y_ref));
    CK(cudaFree(c.gate_up));
    CK(cudaFree(c.partials_ref));
    free(hx);
    free(hw);
    free(href);
    free(hout);
    return ok;
}

int main(void)
{
    static const struct shape shapes[] = {
        {"qkv", 2560, 2048, FOLIO_K_SKINNY_BF16},       {"o", 2048, 2048, FOLIO_K_SKINNY_PARTIALS},
        {"down", 2048, 5632, FOLIO_K_SKINNY_PARTIALS},  {"gateup", 5632, 2048, FOLIO_K_SKINNY_GLU},
        {"o_bf16", 2048, 2048, FOLIO_K_SKINNY_BF16},    /* FOLIO_SKINNY_PROJ=bf16 */
        {"down_bf16", 2048, 5632, FOLIO_K_SKINNY_BF16}, /* the same */
    };
    static const int ms[] = {8, 16, 32, 64};
    const char *sv = getenv("FOLIO_SKINNY_SPLITS");
    int forced = sv ? atoi(sv) : 0;
    if (sv && (forced < 1 || forced > 8)) {
        fprintf(stderr, "gemm_bench: FOLIO_SKINNY_SPLITS=%s: want 1..8\n", sv);
        return 2;
    }
    int num_sms = 0;
    CK(cudaSetDevice(0));
    CK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0));
    folio_k_set_smem_carveout(100); /* as the worker sets it */
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cublasLtHandle_t lt;
    LK(cublasLtCreate(&lt));
    void *workspace;
    CK(cudaMalloc(&workspace, LT_WORKSPACE));
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        for (size_t j = 0; j < sizeof(ms) / sizeof(ms[0]); j++) {
            if (run_case(&shapes[i], ms[j], forced, num_sms, lt, workspace, s))
                passed++;
            else
                failed++;
        }
    printf("gemm_bench: %d ok, %d failed\n", passed, failed);
    CK(cudaFree(workspace));
    cublasLtDestroy(lt);
    CK(cudaStreamDestroy(s));
    return failed ? 1 : 0;
}
