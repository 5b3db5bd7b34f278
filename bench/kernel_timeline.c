/* kernel_timeline: where a decode step's wall time goes when its kernels
 * overlap (programmatic dependent launch), which Nsight Compute cannot show
 * (it serializes kernels) and Nsight Systems cannot run on the device machine.
 * A CUPTI injection library: any CUDA program loads it through
 *
 *     CUDA_INJECTION64_PATH=bundle/bin/libkernel_timeline.so \
 *         bundle/bin/decode_bench /tmp/tl decode 64 512 50
 *
 * It records every kernel's GPU start and end (CUPTI's concurrent-kernel
 * activity) between the program's cudaProfilerStart and cudaProfilerStop
 * (decode_bench brackets its steady-state steps so), groups the kernels of
 * each CUDA graph launch into a step, and at cudaProfilerStop prints:
 *
 *     TIMELINE steps=S wall_us=W busy_us=B kernel_sum_us=K idle_us=I between_us=G
 *     TIMELINE_KERNEL name=N per_step=C dur_us=D exposed_us=E lead_us=L
 *
 * per step, averaged over the steps. wall: first start to last end; busy: the
 * union of the kernels' intervals; idle: wall - busy; between: from a step's
 * last end to the next step's first start (copies and launches between the
 * graphs, which idle does not see). For each kernel (in start order) exposed
 * is how far its end moves the step's frontier (the latest end so far)
 * forward, so the exposed times and the idle time add up to the wall; lead is
 * its start minus the frontier (negative: it started while an earlier kernel
 * still ran). Kernel lines come sorted by exposed time.
 * KERNEL_TIMELINE_DETAIL=1 also prints the middle step's kernels in order
 * (TIMELINE_STEP lines: start offset, duration, exposed). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "timeline_report.h"

/* libstdc++'s demangler (the CUDA kernels are C++). */
char *__cxa_demangle(const char *mangled, char *out, size_t *length, int *status);

#define BUFFER_BYTES (8u << 20)
#define NAME_CHARS 72

static struct {
    struct timeline_kernel *recs; /* graph-launched kernels in the window */
    size_t n, cap, outside;       /* outside: kernels launched outside graphs */
    char (*names)[NAME_CHARS];
    int num_names, cap_names;
    uint64_t t_start, t_stop;
    int recording;
} tl;

#define CUPTI_CALL(x)                                                                              \
    do {                                                                                           \
        CUptiResult r_ = (x);                                                                      \
        if (r_ != CUPTI_SUCCESS) {                                                                 \
            const char *s_ = NULL;                                                                 \
            cuptiGetResultString(r_, &s_);                                                         \
            fprintf(stderr, "kernel_timeline: %s: %s\n", #x, s_ ? s_ : "?");                       \
            return 0;                                                                              \
        }                                                                                          \
    } while (0)

/* The demangled name up to its parameter list, "void " dropped, at most
 * NAME_CHARS - 1 characters; the same index for the same name. */
static int name_index(const char *mangled)
{
    char buf[NAME_CHARS];
    int status = -1;
    char *d = mangled ? __cxa_demangle(mangled, NULL, NULL, &status) : NULL;
    const char *s = status == 0 && d ? d : mangled ? mangled : "?";
    if (!strncmp(s, "void ", 5))
        s += 5;
    if (!strncmp(s, "(anonymous namespace)::", 23)) /* gemm_tma.cu's kernel: name it */
        s += 23;
    size_t len = strcspn(s, "(");
    if (len >= NAME_CHARS)
        len = NAME_CHARS - 1;
    memcpy(buf, s, len);
    buf[len] = 0;
    free(d);
    for (int i = 0; i < tl.num_names; i++)
        if (!strcmp(tl.names[i], buf))
            return i;
    if (tl.num_names == tl.cap_names) {
        int cap = tl.cap_names ? 2 * tl.cap_names : 64;
        void *p = realloc(tl.names, sizeof(*tl.names) * (size_t)cap);
        if (!p)
            return -1;
        tl.names = p;
        tl.cap_names = cap;
    }
    memcpy(tl.names[tl.num_names], buf, len + 1);
    return tl.num_names++;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        if (k->start < tl.t_start || (tl.t_stop && k->end > tl.t_stop))
            continue;
        if (k->graphId == 0) {
            tl.outside++;
            continue;
        }
        if (tl.n == tl.cap) {
            size_t cap = tl.cap ? 2 * tl.cap : 4096;
            void *p = realloc(tl.recs, sizeof(*tl.recs) * cap);
            if (!p)
                break;
            tl.recs = p;
            tl.cap = cap;
        }
        int name = name_index(k->name);
        if (name < 0)
            break;
        tl.recs[tl.n++] = (struct timeline_kernel){k->start, k->end, k->correlationId, name};
    }
    free(buffer);
}

/* The summary over the graph launches recorded (kernels outside graphs are
 * counted, not placed in steps). */
static void report(void)
{
    struct timeline_summary sum;
    struct timeline_name_stats *stats =
        calloc((size_t)(tl.num_names > 0 ? tl.num_names : 1), sizeof(*stats));
    if (!stats)
        return;
    timeline_summarize(tl.recs, tl.n, tl.num_names, &sum, stats);
    if (sum.steps == 0) {
        printf("TIMELINE steps=0 (no graph launches between cudaProfilerStart and Stop; %zu "
               "kernels outside graphs)\n",
               tl.outside);
        free(stats);
        return;
    }
    printf("TIMELINE steps=%d wall_us=%.2f busy_us=%.2f kernel_sum_us=%.2f idle_us=%.2f "
           "between_us=%.2f outside_graphs=%zu\n",
           sum.steps, sum.wall_us, sum.busy_us, sum.kernel_sum_us, sum.idle_us, sum.between_us,
           tl.outside);
    for (int i = 0; i < tl.num_names; i++) {
        const struct timeline_name_stats *s = &stats[i];
        if (s->per_step > 0)
            printf("TIMELINE_KERNEL name=%s per_step=%.1f dur_us=%.2f exposed_us=%.2f "
                   "lead_us=%.2f\n",
                   tl.names[s->name], s->per_step, s->dur_us, s->exposed_us, s->lead_us);
    }
    const char *detail = getenv("KERNEL_TIMELINE_DETAIL");
    if (detail && !strcmp(detail, "1")) {
        uint64_t first = tl.recs[sum.mid_first].start, frontier = first;
        for (size_t r = sum.mid_first; r < sum.mid_last; r++) {
            const struct timeline_kernel *k = &tl.recs[r];
            uint64_t from = k->start > frontier ? k->start : frontier;
            printf("TIMELINE_STEP i=%zu name=%s start_us=%.2f dur_us=%.2f exposed_us=%.2f\n",
                   r - sum.mid_first, tl.names[k->name], (double)(k->start - first) * 1e-3,
                   (double)(k->end - k->start) * 1e-3,
                   k->end > from ? (double)(k->end - from) * 1e-3 : 0.0);
            if (k->end > frontier)
                frontier = k->end;
        }
    }
    fflush(stdout);
    free(stats);
}

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                            const void *data)
{
    (void)userdata;
    const CUpti_CallbackData *cb = data;
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API)
        return;
    if (id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000 &&
        cb->callbackSite == CUPTI_API_EXIT && !tl.recording) {
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* drop what ran before */
        tl.n = 0;
        tl.outside = 0;
        cuptiGetTimestamp(&tl.t_start);
        tl.t_stop = 0;
        tl.recording = 1;
    } else if (id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000 &&
               cb->callbackSite == CUPTI_API_ENTER && tl.recording) {
        cuptiGetTimestamp(&tl.t_stop); /* decode_bench stops after its last step's results */
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        tl.recording = 0;
        report();
        tl.n = 0;
        tl.t_start = UINT64_MAX;
    }
}

/* Called by the CUDA driver when CUDA_INJECTION64_PATH names this library. */
int InitializeInjection(void)
{
    CUpti_SubscriberHandle sub;
    tl.t_start = UINT64_MAX; /* nothing counts before cudaProfilerStart */
    CUPTI_CALL(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    CUPTI_CALL(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTI_CALL(cuptiSubscribe(&sub, on_api, NULL));
    CUPTI_CALL(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                                   CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000));
    CUPTI_CALL(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                                   CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000));
    return 1;
}
