/* The arithmetic of bench/kernel_timeline.c, apart from CUPTI so that a unit
 * test can check it (tests/unit/test_timeline_report.c). */
#ifndef FOLIO_TIMELINE_REPORT_H
#define FOLIO_TIMELINE_REPORT_H

#include <stddef.h>
#include <stdint.h>

struct timeline_kernel {
    uint64_t start, end; /* ns, GPU clock */
    uint32_t step;       /* kernels of one step share it (a graph launch's correlation id) */
    int name;            /* 0 .. num_names - 1 */
};

/* Per step, averaged over the steps. wall: first start to last end; busy:
 * the union of the kernels' intervals; idle = wall - busy. between: from one
 * step's last end to the next step's first start (averaged over the steps
 * after the first): what lies between the graphs, such as copies on the
 * compute stream, which idle does not see. */
struct timeline_summary {
    int steps;
    double wall_us, busy_us, kernel_sum_us, idle_us, between_us;
    size_t mid_first, mid_last; /* the middle step's kernels: [mid_first, mid_last) */
};

/* Per kernel name. In a step, kernels taken in start order: exposed is how far
 * a kernel's end moves the step's frontier (the latest end so far) forward,
 * so a step's exposed times plus its idle time make its wall; lead is its
 * start minus the frontier (negative: it started while an earlier kernel ran). */
struct timeline_name_stats {
    int name;
    double per_step;   /* launches a step */
    double dur_us;     /* mean duration of one launch */
    double exposed_us; /* a step */
    double lead_us;    /* mean over launches */
};

/* Sorts k by (step, start), fills sum and stats[0 .. num_names) (sorted by
 * exposed time, largest first; names never seen have per_step 0). */
void timeline_summarize(struct timeline_kernel *k, size_t n, int num_names,
                        struct timeline_summary *sum, struct timeline_name_stats *stats);

#endif
