/* See timeline_report.h. */
#include "timeline_report.h"

#include <stdlib.h>
#include <string.h>

static int by_step_then_start(const void *a, const void *b)
{
    const struct timeline_kernel *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int by_exposed(const void *a, const void *b)
{
    const struct timeline_name_stats *x = a, *y = b;
    return x->exposed_us > y->exposed_us ? -1 : x->exposed_us < y->exposed_us;
}

void timeline_summarize(struct timeline_kernel *k, size_t n, int num_names,
                        struct timeline_summary *sum, struct timeline_name_stats *stats)
{
    memset(sum, 0, sizeof(*sum));
    for (int i = 0; i < num_names; i++)
        stats[i] = (struct timeline_name_stats){.name = i};
    qsort(k, n, sizeof(*k), by_step_then_start);
    size_t steps = 0;
    for (size_t i = 0; i < n; steps++) /* count them first, to find the middle one */
        for (uint32_t s = k[i].step; i < n && k[i].step == s;)
            i++;
    double wall = 0, idle = 0, ksum = 0, between = 0; /* ns, summed over the steps */
    uint64_t prev_end = 0;
    size_t step = 0;
    for (size_t i = 0; i < n; step++) {
        size_t j = i;
        while (j < n && k[j].step == k[i].step)
            j++;
        uint64_t first = k[i].start, frontier = k[i].start;
        for (size_t r = i; r < j; r++) {
            struct timeline_name_stats *s = &stats[k[r].name];
            s->per_step += 1;
            s->dur_us += (double)(k[r].end - k[r].start);
            s->lead_us += (double)k[r].start - (double)frontier;
            ksum += (double)(k[r].end - k[r].start);
            if (k[r].start > frontier)
                idle += (double)(k[r].start - frontier);
            uint64_t from = k[r].start > frontier ? k[r].start : frontier;
            if (k[r].end > from) {
                s->exposed_us += (double)(k[r].end - from);
                frontier = k[r].end;
            }
        }
        wall += (double)(frontier - first);
        if (step > 0)
            between += (double)first - (double)prev_end;
        prev_end = frontier;
        if (step == steps / 2) {
            sum->mid_first = i;
            sum->mid_last = j;
        }
        i = j;
    }
    sum->steps = (int)steps;
    if (steps == 0)
        return;
    const double per = 1e-3 / (double)steps; /* ns summed over the steps -> us a step */
    sum->wall_us = wall * per;
    sum->idle_us = idle * per;
    sum->busy_us = (wall - idle) * per;
    sum->kernel_sum_us = ksum * per;
    sum->between_us = steps > 1 ? between * 1e-3 / (double)(steps - 1) : 0.0;
    for (int i = 0; i < num_names; i++) {
        struct timeline_name_stats *s = &stats[i];
        if (s->per_step > 0) {
            s->dur_us = s->dur_us * 1e-3 / s->per_step;
            s->lead_us = s->lead_us * 1e-3 / s->per_step;
        }
        s->exposed_us *= per;
        s->per_step /= (double)steps;
    }
    qsort(stats, (size_t)num_names, sizeof(*stats), by_exposed);
}
