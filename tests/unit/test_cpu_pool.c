/* worker/cpu_pool.c: every chunk of every job runs exactly once, with its own job's function
 * and argument, while jobs of few and of many chunks follow each other (a thread still leaving
 * one job must not take a chunk of the next). */
#include <stdatomic.h>
#include <stdint.h>

#include "check.h"
#include "cpu_pool.h"

#define MAX_CHUNKS 9

struct job {
    uint32_t magic;
    int id;
    atomic_int runs[MAX_CHUNKS];
    atomic_int wrong;
};

static void chunk_fn(void *arg, int c, int thread)
{
    (void)thread;
    struct job *j = arg;
    if (j->magic != 0x600dcafe || c < 0 || c >= MAX_CHUNKS)
        atomic_fetch_add(&j->wrong, 1);
    else
        atomic_fetch_add(&j->runs[c], 1);
}

int main(void)
{
    struct cpu_pool *p = cpu_pool_new(3);
    CHECK(p != NULL);
    int bad = 0;
    for (int k = 0; p && k < 200000; k++) {
        struct job j = {.magic = 0x600dcafe, .id = k};
        int n = k % 2 ? MAX_CHUNKS : 2;
        for (int c = 0; c < MAX_CHUNKS; c++)
            atomic_init(&j.runs[c], 0);
        atomic_init(&j.wrong, 0);
        cpu_pool_run(p, n, chunk_fn, &j);
        for (int c = 0; c < MAX_CHUNKS; c++)
            bad += atomic_load(&j.runs[c]) != (c < n ? 1 : 0);
        bad += atomic_load(&j.wrong);
        j.magic = 0; /* a late run on this job sees it */
    }
    CHECK(bad == 0);
    cpu_pool_free(p);
    return check_report();
}
