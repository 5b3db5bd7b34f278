/* sm_partition_probe: would a b256 decode step run faster as two half-batches
 * on two partitions of the SMs (green contexts), each half's attention (bound
 * by device memory) running beside the other half's GEMMs (bound by what each
 * SM can copy in from L2, plus a fixed cost a launch)?
 *
 *     sm_partition_probe [LAYERS] [CONTEXT] [SMS_A]
 *
 * A layer is the kernels a 129-256-row decode step runs on the cuBLASLt path,
 * on synthetic data: QKV, decode attention (folio_k_attention_decode over
 * CONTEXT keys a sequence), O, gate/up, SiLU * mul, down. Every layer has its
 * own weights and K/V cache (about 2.0 GB and 134 MB x LAYERS at 512 keys), so
 * both come from device memory as in a step. The RoPE, norms and residual adds
 * that the backend folds into these kernels are left out.
 *
 * Modes, each LAYERS layers launched eagerly and timed with events (the median
 * of 5 runs after 2 warm-ups), one line each:
 *     RESULT mode=one      256 rows on an ordinary stream, all SMs
 *     RESULT mode=half_a   128 rows on partition A alone (SMS_A SMs)
 *     RESULT mode=half_b   128 rows on partition B alone (the rest)
 *     RESULT mode=two      128 rows on each partition at once, B started once
 *                          A's first QKV is done (so B's GEMMs meet A's attention)
 *     RESULT mode=two_sync the same, both started together
 * with us_per_layer = the span over LAYERS. cuBLASLt is told each partition's
 * SM count (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET) and picks its heuristic's
 * first algorithm; the attention plan is made for that count too. */
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio_kernels.h"
#include "gemm_bench_common.h"

#define HIDDEN 2048
#define HEADS 32
#define KV_HEADS 4
#define HEAD_DIM 64
#define INTER 5632
#define QKV_N ((HEADS + 2 * KV_HEADS) * HEAD_DIM)
#define BATCH 256
#define LT_WS (32u << 20)
#define RUNS 5
#define WARMUP 2

static void cu_check(CUresult r, const char *call, int line)
{
    if (r != CUDA_SUCCESS) {
        const char *msg = NULL;
        cuGetErrorString(r, &msg);
        fprintf(stderr, "sm_partition_probe: %s (line %d): %s\n", call, line, msg ? msg : "?");
        exit(2);
    }
}
#define CUK(x) cu_check((x), #x, __LINE__)

struct layer_weights {
    void *qkv, *o, *gate_up, *down;
    folio_bf16_bits *k, *v; /* the cache of all BATCH sequences */
};

struct gemm {
    struct bench_lt_desc d;
    cublasLtMatmulAlgo_t algo;
};

/* One half (or the whole) of the batch: its rows, its stream and what its
 * kernels read and write. */
struct lane {
    int rows, sms;
    cudaStream_t s;
    struct gemm qkv, o, gate_up, down;
    void *x, *qkv_out, *attn, *h, *gu, *act, *lt_ws;
    struct folio_k_batch kb;
    struct folio_k_decode_plan plan;
    void *attn_ws;
    int *counters;
};

static cublasLtHandle_t lt;
static struct layer_weights *layers;
static int num_layers, context;

static void gemm_make(struct gemm *g, int m, int n, int k, int sms)
{
    bench_lt_desc_make(&g->d, m, n, k, 0);
    LK(cublasLtMatmulDescSetAttribute(g->d.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms,
                                      sizeof(sms)));
    cublasLtMatmulHeuristicResult_t r;
    if (bench_lt_heuristic(lt, &g->d, LT_WS, 1, &r) < 1) {
        fprintf(stderr, "sm_partition_probe: no cuBLASLt algorithm for %d x %d x %d\n", m, n, k);
        exit(2);
    }
    g->algo = r.algo;
}

static void gemm_run(struct lane *l, struct gemm *g, const void *x, const void *w, void *y)
{
    LK(bench_lt_run(lt, &g->d, &g->algo, x, w, y, l->lt_ws, LT_WS, l->s));
}

static void *dalloc(size_t bytes, unsigned char fill)
{
    void *p;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, fill, bytes));
    return p;
}

/* Rows [first, first + rows) of the batch: sequence i's blocks are scattered
 * over the whole cache, as decode_bench's attention mode scatters them. */
static void lane_make(struct lane *l, int first, int rows, int sms, cudaStream_t s)
{
    const int nb = (context + 15) / 16, nblocks = BATCH * nb;
    l->rows = rows;
    l->sms = sms;
    l->s = s;
    gemm_make(&l->qkv, rows, QKV_N, HIDDEN, sms);
    gemm_make(&l->o, rows, HIDDEN, HIDDEN, sms);
    gemm_make(&l->gate_up, rows, 2 * INTER, HIDDEN, sms);
    gemm_make(&l->down, rows, HIDDEN, INTER, sms);
    l->x = dalloc((size_t)rows * HIDDEN * 2, 0x3c);
    l->qkv_out = dalloc((size_t)rows * QKV_N * 2, 0x3c);
    l->attn = dalloc((size_t)rows * HIDDEN * 2, 0);
    l->h = dalloc((size_t)rows * HIDDEN * 2, 0);
    l->gu = dalloc((size_t)rows * 2 * INTER * 2, 0);
    l->act = dalloc((size_t)rows * INTER * 2, 0);
    l->lt_ws = dalloc(LT_WS, 0);
    int32_t *meta = malloc(sizeof(int32_t) * (size_t)(3 * rows + rows * nb));
    if (!meta)
        exit(2);
    int32_t *seq = meta, *pos = seq + rows, *ctxl = pos + rows, *tables = ctxl + rows;
    for (int i = 0; i < rows; i++) {
        seq[i] = i;
        pos[i] = context - 1;
        ctxl[i] = context;
        for (int j = 0; j < nb; j++)
            tables[i * nb + j] = (int32_t)(((int64_t)(first + i) * nb + j) * 7919 % nblocks);
    }
    int32_t *d_meta = dalloc(sizeof(int32_t) * (size_t)(3 * rows + rows * nb), 0);
    CK(cudaMemcpy(d_meta, meta, sizeof(int32_t) * (size_t)(3 * rows + rows * nb),
                  cudaMemcpyHostToDevice));
    free(meta);
    l->kb = (struct folio_k_batch){
        rows, rows, d_meta, d_meta + rows, d_meta + 2 * rows, d_meta + 3 * rows, nb};
    l->plan = folio_k_attention_decode_plan(rows, KV_HEADS, HEAD_DIM, sms, 4, 0, 0);
    size_t ws = folio_k_attention_decode_workspace_bytes(rows, l->plan, HEADS, HEAD_DIM);
    l->attn_ws = ws ? dalloc(ws, 0) : NULL;
    l->counters = dalloc(sizeof(int) * (size_t)rows * KV_HEADS, 0);
}

static void lane_layer(struct lane *l, int i, int qkv_too, int rest_too)
{
    const struct layer_weights *w = &layers[i];
    if (qkv_too)
        gemm_run(l, &l->qkv, l->x, w->qkv, l->qkv_out);
    if (!rest_too)
        return;
    CK(folio_k_attention_decode(
        l->attn, l->qkv_out, w->k, w->v, l->kb, l->plan, l->attn_ws, l->counters, HEADS, KV_HEADS,
        HEAD_DIM, NULL, (struct folio_k_row_norm){0}, (struct folio_k_l2_drop){0}, 0, l->s));
    gemm_run(l, &l->o, l->attn, w->o, l->h);
    gemm_run(l, &l->gate_up, l->h, w->gate_up, l->gu);
    CK(folio_k_silu_mul(l->act, l->gu, l->rows, INTER, (struct folio_k_row_norm){0},
                        (struct folio_k_l2_drop){0}, l->s));
    gemm_run(l, &l->down, l->act, w->down, l->x);
}

/* All layers of lane a (and b, if given) from one start on `origin`;
 * stagger: b starts once a's first QKV GEMM is done. Returns us a layer. */
static double run(cudaStream_t origin, struct lane *a, struct lane *b, int stagger)
{
    cudaEvent_t ev[5]; /* start (the lanes' fork), end, a's first QKV done, a done, b done */
    for (int i = 0; i < 5; i++)
        CK(cudaEventCreate(&ev[i]));
    cudaEvent_t e0 = ev[0], e1 = ev[1], a_qkv = ev[2], a_done = ev[3], b_done = ev[4];
    double t[RUNS];
    for (int r = 0; r < WARMUP + RUNS; r++) {
        CK(cudaStreamSynchronize(origin));
        CK(cudaEventRecord(e0, origin));
        CK(cudaStreamWaitEvent(a->s, e0, 0));
        if (b)
            CK(cudaStreamWaitEvent(b->s, e0, 0));
        lane_layer(a, 0, 1, 0);
        CK(cudaEventRecord(a_qkv, a->s));
        if (b && stagger)
            CK(cudaStreamWaitEvent(b->s, a_qkv, 0));
        for (int i = 0; i < num_layers; i++) {
            lane_layer(a, i, i > 0, 1);
            if (b)
                lane_layer(b, i, 1, 1);
        }
        CK(cudaEventRecord(a_done, a->s));
        CK(cudaStreamWaitEvent(origin, a_done, 0));
        if (b) {
            CK(cudaEventRecord(b_done, b->s));
            CK(cudaStreamWaitEvent(origin, b_done, 0));
        }
        CK(cudaEventRecord(e1, origin));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= WARMUP)
            t[r - WARMUP] = ms * 1000.0 / num_layers;
    }
    for (int i = 0; i < 5; i++)
        CK(cudaEventDestroy(ev[i]));
    for (int i = 1; i < RUNS; i++) /* insertion sort: the median */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[RUNS / 2];
}

int main(int argc, char **argv)
{
    num_layers = argc > 1 ? atoi(argv[1]) : 22;
    context = argc > 2 ? atoi(argv[2]) : 512;
    int sms_a = argc > 3 ? atoi(argv[3]) : 66;
    if (num_layers < 1 || context < 1 || sms_a < 8) {
        fprintf(stderr, "usage: sm_partition_probe [LAYERS] [CONTEXT] [SMS_A]\n");
        return 2;
    }
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    LK(cublasLtCreate(&lt));
    folio_k_set_smem_carveout(100); /* as cuda_backend.c sets it */
    CK(folio_k_attention_prepare(HEAD_DIM));

    /* Partition A: sms_a SMs (rounded as the driver requires); B: the rest. */
    CUdevice dev;
    CUK(cuDeviceGet(&dev, 0));
    CUdevResource all, part[2];
    unsigned int groups = 1;
    CUK(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
    CUK(cuDevSmResourceSplitByCount(&part[0], &groups, &all, &part[1], 0, (unsigned)sms_a));
    cudaStream_t ps[2];
    for (int p = 0; p < 2; p++) {
        CUdevResourceDesc desc;
        CUgreenCtx g;
        CUstream st;
        CUK(cuDevResourceGenerateDesc(&desc, &part[p], 1));
        CUK(cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
        CUK(cuGreenCtxStreamCreate(&st, g, CU_STREAM_NON_BLOCKING, 0));
        ps[p] = (cudaStream_t)st;
    }
    const int sms[2] = {(int)part[0].sm.smCount, (int)part[1].sm.smCount};
    int total_sms;
    CK(cudaDeviceGetAttribute(&total_sms, cudaDevAttrMultiProcessorCount, 0));
    printf("PARTITIONS all=%d a=%d b=%d\n", total_sms, sms[0], sms[1]);

    const int nb = (context + 15) / 16;
    const size_t cache = (size_t)BATCH * nb * KV_HEADS * 16 * HEAD_DIM * 2;
    layers = calloc((size_t)num_layers, sizeof(*layers));
    if (!layers)
        return 2;
    for (int i = 0; i < num_layers; i++) {
        layers[i].qkv = dalloc((size_t)QKV_N * HIDDEN * 2, 0x3c);
        layers[i].o = dalloc((size_t)HIDDEN * HIDDEN * 2, 0x3c);
        layers[i].gate_up = dalloc((size_t)2 * INTER * HIDDEN * 2, 0x3c);
        layers[i].down = dalloc((size_t)HIDDEN * INTER * 2, 0x3c);
        layers[i].k = dalloc(cache, 0x3c);
        layers[i].v = dalloc(cache, 0x3c);
    }
    cudaStream_t origin, plain;
    CK(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&plain, cudaStreamNonBlocking));
    struct lane whole, half[2];
    lane_make(&whole, 0, BATCH, total_sms, plain);
    lane_make(&half[0], 0, BATCH / 2, sms[0], ps[0]);
    lane_make(&half[1], BATCH / 2, BATCH / 2, sms[1], ps[1]);
    printf("PLAN whole splits=%d warps=%d; a splits=%d warps=%d; b splits=%d warps=%d\n",
           whole.plan.splits, whole.plan.warps, half[0].plan.splits, half[0].plan.warps,
           half[1].plan.splits, half[1].plan.warps);

    for (int round = 0; round < 2; round++) {
        printf("RESULT round=%d mode=one us_per_layer=%.2f\n", round, run(origin, &whole, NULL, 0));
        printf("RESULT round=%d mode=half_a us_per_layer=%.2f\n", round,
               run(origin, &half[0], NULL, 0));
        printf("RESULT round=%d mode=half_b us_per_layer=%.2f\n", round,
               run(origin, &half[1], NULL, 0));
        printf("RESULT round=%d mode=two us_per_layer=%.2f\n", round,
               run(origin, &half[0], &half[1], 1));
        printf("RESULT round=%d mode=two_sync us_per_layer=%.2f\n", round,
               run(origin, &half[0], &half[1], 0));
    }
    CK(cudaDeviceSynchronize());
    return 0;
}
