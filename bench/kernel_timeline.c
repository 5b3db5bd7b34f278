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
 *     TIMELINE steps=S wall_us=W busy_us=B kernel_sum_us=K idle_us=I
 *     TIMELINE_KERNEL name=N per_step=C dur_us=D exposed_us=E lead_us=L
 *
 * per step, averaged over the steps. wall: first start to last end; busy: the
 * union of the kernels' intervals; idle: wall - busy. For each kernel (in
 * start order) exposed is how far its end moves the step's frontier (the
 * latest end so far) forward, so the exposed times and the idle time add up
 * to the wall; lead is its start minus the frontier (negative: it started
 * while an earlier kernel still ran). Kernel lines come sorted by exposed time.
 * KERNEL_TIMELINE_DETAIL=1 also prints the middle step's kernels in order
 * (TIMELINE_STEP lines: start offset, duration, exposed). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

/* libstdc++'s demangler (the CUDA kernels are C++). */
char *__cxa_demangle(const char *mangled, char *out, size_t *length, int *status);

#define BUFFER_BYTES (8u << 20)
#define NAME_CHARS 72

struct kernel_rec {
    uint64_t start, end;
    uint32_t correlation; /* the cudaGraphLaunch (one step) it ran under */
    uint32_t graph;       /* 0: launched outside a graph */
    int name;             /* index into names */
};

static struct {
    struct kernel_rec *recs;
    size_t n, cap;
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
        tl.recs[tl.n++] = (struct kernel_rec){k->start, k->end, k->correlationId, k->graphId, name};
    }
    free(buffer);
}

static int by_step_then_start(const void *a, const void *b)
{
    const struct kernel_rec *x = a, *y = b;
    if (x->correlation != y->correlation)
        return x->correlation < y->correlation ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

struct name_sum {
    int name;
    double count, dur, exposed, lead;
};

static int by_exposed(const void *a, const void *b)
{
    const struct name_sum *x = a, *y = b;
    return x->exposed > y->exposed ? -1 : x->exposed < y->exposed;
}

/* The summary over the graph launches recorded (kernels outside graphs are
 * counted, not placed in steps). */
static void report(void)
{
    size_t n = 0, outside = 0;
    for (size_t i = 0; i < tl.n; i++) { /* graph kernels first, in place */
        if (tl.recs[i].graph)
            tl.recs[n++] = tl.recs[i];
        else
            outside++;
    }
    qsort(tl.recs, n, sizeof(*tl.recs), by_step_then_start);
    struct name_sum *sums = calloc((size_t)(tl.num_names > 0 ? tl.num_names : 1), sizeof(*sums));
    if (!sums)
        return;
    for (int i = 0; i < tl.num_names; i++)
        sums[i].name = i;
    int steps = 0;
    double wall = 0, busy = 0, ksum = 0;
    size_t mid_first = 0, mid_last = 0;
    size_t num_groups = 0;
    for (size_t i = 0; i < n;) { /* count the steps, to find the middle one */
        size_t j = i;
        while (j < n && tl.recs[j].correlation == tl.recs[i].correlation)
            j++;
        num_groups++;
        i = j;
    }
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && tl.recs[j].correlation == tl.recs[i].correlation)
            j++;
        uint64_t first = tl.recs[i].start, frontier = tl.recs[i].start;
        for (size_t r = i; r < j; r++) {
            const struct kernel_rec *k = &tl.recs[r];
            struct name_sum *s = &sums[k->name];
            s->count += 1;
            s->dur += (double)(k->end - k->start);
            s->lead += (double)k->start - (double)frontier;
            if (k->start > frontier)
                busy -= (double)(k->start - frontier); /* idle: subtracted from the wall below */
            if (k->end > frontier) {
                s->exposed += (double)(k->end - (k->start > frontier ? k->start : frontier));
                frontier = k->end;
            }
            ksum += (double)(k->end - k->start);
        }
        wall += (double)(frontier - first);
        busy += (double)(frontier - first);
        if ((size_t)steps == num_groups / 2) {
            mid_first = i;
            mid_last = j;
        }
        steps++;
        i = j;
    }
    if (steps == 0) {
        printf("TIMELINE steps=0 (no graph launches between cudaProfilerStart and Stop; %zu "
               "kernels outside graphs)\n",
               outside);
        free(sums);
        return;
    }
    const double us = 1e-3 / steps; /* ns summed over the steps -> us a step */
    printf("TIMELINE steps=%d wall_us=%.2f busy_us=%.2f kernel_sum_us=%.2f idle_us=%.2f "
           "outside_graphs=%zu\n",
           steps, wall * us, busy * us, ksum * us, (wall - busy) * us, outside);
    qsort(sums, (size_t)tl.num_names, sizeof(*sums), by_exposed);
    for (int i = 0; i < tl.num_names; i++) {
        const struct name_sum *s = &sums[i];
        if (s->count == 0)
            continue;
        printf("TIMELINE_KERNEL name=%s per_step=%.1f dur_us=%.2f exposed_us=%.2f lead_us=%.2f\n",
               tl.names[s->name], s->count / steps, s->dur * 1e-3 / s->count, s->exposed * us,
               s->lead * 1e-3 / s->count);
    }
    const char *detail = getenv("KERNEL_TIMELINE_DETAIL");
    if (detail && !strcmp(detail, "1")) {
        uint64_t first = tl.recs[mid_first].start, frontier = first;
        for (size_t r = mid_first; r < mid_last; r++) {
            const struct kernel_rec *k = &tl.recs[r];
            uint64_t from = k->start > frontier ? k->start : frontier;
            printf("TIMELINE_STEP i=%zu name=%s start_us=%.2f dur_us=%.2f exposed_us=%.2f\n",
                   r - mid_first, tl.names[k->name], (double)(k->start - first) * 1e-3,
                   (double)(k->end - k->start) * 1e-3,
                   k->end > from ? (double)(k->end - from) * 1e-3 : 0.0);
            if (k->end > frontier)
                frontier = k->end;
        }
    }
    fflush(stdout);
    free(sums);
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
