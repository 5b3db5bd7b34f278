/* bench/timeline_report.c: a decode step's wall time split among overlapping
 * kernels (what kernel_timeline prints), on hand-made traces. */
#include <math.h>

#include "check.h"
#include "timeline_report.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

/* The stats entry of one name (they come sorted by exposed time). */
static const struct timeline_name_stats *of(const struct timeline_name_stats *s, int n, int name)
{
    for (int i = 0; i < n; i++)
        if (s[i].name == name)
            return &s[i];
    return NULL;
}

int main(void)
{
    /* Two steps, out of order as CUPTI's buffers may give them. In ns:
     * step 7: A [0, 10000], B [5000, 20000] (starts under A: PDL), C [25000, 30000]
     *         after 5 us idle; step 9: A [100000, 104000], B [103000, 112000], C [112000,
     *         113000] inside nothing, and a second C [112500, 112800] wholly under the first. */
    struct timeline_kernel k[] = {
        {25000, 30000, 7, 2},   {100000, 104000, 9, 0}, {5000, 20000, 7, 1},
        {112500, 112800, 9, 2}, {0, 10000, 7, 0},       {103000, 112000, 9, 1},
        {112000, 113000, 9, 2},
    };
    struct timeline_summary sum;
    struct timeline_name_stats st[4];
    timeline_summarize(k, sizeof(k) / sizeof(k[0]), 4, &sum, st);

    CHECK(sum.steps == 2);
    /* walls 30 and 13 us, idle 5 and 0, kernel sums 30 and 14.3 */
    CHECK(NEAR(sum.wall_us, (30.0 + 13.0) / 2));
    CHECK(NEAR(sum.idle_us, 5.0 / 2));
    CHECK(NEAR(sum.busy_us, (25.0 + 13.0) / 2));
    CHECK(NEAR(sum.kernel_sum_us, (30.0 + 14.3) / 2));
    /* step 7's last end (30 us) to step 9's first start (100 us) */
    CHECK(NEAR(sum.between_us, 70.0));
    /* sorted (step, start): the middle step (index 1 of 2) is step 9, records 3..6 */
    CHECK(sum.mid_first == 3 && sum.mid_last == 7);
    CHECK(k[0].step == 7 && k[0].start == 0 && k[3].step == 9 && k[3].start == 100000);

    const struct timeline_name_stats *a = of(st, 4, 0), *b = of(st, 4, 1), *c = of(st, 4, 2),
                                     *none = of(st, 4, 3);
    CHECK(a && b && c && none);
    if (!a || !b || !c || !none)
        return check_report();
    /* A: exposed 10 + 4, duration 10 and 4, starts at the frontier */
    CHECK(NEAR(a->per_step, 1.0) && NEAR(a->exposed_us, 7.0) && NEAR(a->dur_us, 7.0));
    CHECK(NEAR(a->lead_us, 0.0));
    /* B: exposed 10 + 8, leads -5 and -1 */
    CHECK(NEAR(b->exposed_us, 9.0) && NEAR(b->lead_us, -3.0) && NEAR(b->dur_us, 12.0));
    /* C: 3 launches over 2 steps; exposed 5 + 1 + 0; leads +5, 0 and -0.5 */
    CHECK(NEAR(c->per_step, 1.5) && NEAR(c->exposed_us, 3.0));
    CHECK(NEAR(c->lead_us, (5.0 + 0.0 - 0.5) / 3) && NEAR(c->dur_us, (5.0 + 1.0 + 0.3) / 3));
    /* the exposed times and the idle time make the wall */
    CHECK(NEAR(a->exposed_us + b->exposed_us + c->exposed_us + sum.idle_us, sum.wall_us));
    /* sorted by exposed, largest first; a name never seen is last, with nothing */
    CHECK(st[0].name == 1 && st[1].name == 0 && st[2].name == 2 && st[3].name == 3);
    CHECK(NEAR(none->per_step, 0.0) && NEAR(none->exposed_us, 0.0));

    /* no kernels: no steps */
    timeline_summarize(k, 0, 4, &sum, st);
    CHECK(sum.steps == 0 && NEAR(sum.wall_us, 0.0) && NEAR(sum.between_us, 0.0));
    /* one step: nothing between */
    struct timeline_kernel one[] = {{0, 10000, 3, 0}};
    timeline_summarize(one, 1, 4, &sum, st);
    CHECK(sum.steps == 1 && NEAR(sum.between_us, 0.0) && NEAR(sum.wall_us, 10.0));
    return check_report();
}
