#include "cpu_pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Polls of the job counter before an idle thread sleeps: long enough to span the gap between
 * two products of one step, short enough that a waiting server does not burn a core. */
#define POOL_SPINS 5000

struct cpu_pool {
    int nthreads;
    pthread_t *threads;
    /* The job: written before gen is bumped, read after it is seen. */
    cpu_chunk_fn fn;
    void *arg;
    int nchunks;
    /* The job's number (high 32 bits) and its next chunk: a thread still finishing one job
     * cannot take a chunk of the next, whose number differs. */
    _Atomic uint64_t next;
    atomic_int done;
    atomic_int gen; /* the job's number, bumped once per job; the futex idle threads sleep on */
    atomic_int sleepers;
    atomic_bool stop;
};

struct worker_arg {
    struct cpu_pool *p;
    int index;
};

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void take_chunks(struct cpu_pool *p, int job, int thread)
{
    uint64_t v = atomic_load(&p->next);
    for (;;) {
        if ((uint32_t)(v >> 32) != (uint32_t)job || (uint32_t)v >= (uint32_t)p->nchunks)
            return;
        if (atomic_compare_exchange_weak(&p->next, &v, v + 1)) {
            p->fn(p->arg, (int)(uint32_t)v, thread);
            atomic_fetch_add(&p->done, 1);
            v = atomic_load(&p->next);
        }
    }
}

static void *worker(void *v)
{
    struct worker_arg *wa = v;
    struct cpu_pool *p = wa->p;
    int thread = wa->index, seen = 0;
    free(wa);
    for (;;) {
        int g;
        for (int spin = 0; (g = atomic_load(&p->gen)) == seen; spin++) {
            if (spin < POOL_SPINS) {
                cpu_relax();
                continue;
            }
            atomic_fetch_add(&p->sleepers, 1);
            if (atomic_load(&p->gen) == seen)
                syscall(SYS_futex, &p->gen, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
            atomic_fetch_sub(&p->sleepers, 1);
            spin = 0;
        }
        seen = g;
        if (atomic_load(&p->stop))
            return NULL;
        take_chunks(p, g, thread);
    }
}

struct cpu_pool *cpu_pool_new(int nthreads)
{
    struct cpu_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->nthreads = nthreads < 1 ? 1 : nthreads;
    p->threads = calloc((size_t)p->nthreads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    for (int i = 1; i < p->nthreads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (wa)
            *wa = (struct worker_arg){p, i};
        if (!wa || pthread_create(&p->threads[i], NULL, worker, wa) != 0) {
            free(wa);
            p->nthreads = i;
            cpu_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void cpu_pool_free(struct cpu_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, true);
    atomic_fetch_add(&p->gen, 1);
    syscall(SYS_futex, &p->gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    for (int i = 1; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p);
}

void cpu_pool_run(struct cpu_pool *p, int nchunks, cpu_chunk_fn fn, void *arg)
{
    if (nchunks <= 0)
        return;
    if (p->nthreads == 1 || nchunks == 1) {
        for (int c = 0; c < nchunks; c++)
            fn(arg, c, 0);
        return;
    }
    int job = (int)((unsigned)atomic_load(&p->gen) + 1u);
    /* The last job closed before its fields change: a thread still in take_chunks for it could
     * otherwise read the new nchunks against the old counter, claim one more chunk of it, and
     * run the new fn on a mix of the two jobs' fields. */
    atomic_store(&p->next, (uint64_t)(uint32_t)job << 32 | UINT32_MAX);
    p->fn = fn;
    p->arg = arg;
    p->nchunks = nchunks;
    atomic_store(&p->done, 0);
    atomic_store(&p->next, (uint64_t)(uint32_t)job << 32);
    atomic_store(&p->gen, job);
    if (atomic_load(&p->sleepers) > 0)
        syscall(SYS_futex, &p->gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    take_chunks(p, job, 0);
    /* The chunks others took: spin while they run, yield if they were descheduled. */
    for (int spin = 0; atomic_load(&p->done) < nchunks; spin++) {
        if (spin < POOL_SPINS)
            cpu_relax();
        else
            sched_yield();
    }
}
