/* The CPU backend's threads: a pool that lives as long as the backend, whose threads take the
 * chunks of one job from a shared counter (the caller's thread too), so that a thread the
 * machine has descheduled delays no one: the others take its share. Idle threads spin a little
 * (a step's next job comes within microseconds), then sleep on a futex. */
#ifndef FOLIO_CPU_POOL_H
#define FOLIO_CPU_POOL_H

/* One chunk of a job; thread is in [0, the pool's threads), for per-thread scratch. */
typedef void (*cpu_chunk_fn)(void *arg, int chunk, int thread);

struct cpu_pool;

/* A pool of nthreads threads counting the caller's (nthreads - 1 started), or NULL. */
struct cpu_pool *cpu_pool_new(int nthreads);
void cpu_pool_free(struct cpu_pool *p);

/* Runs fn(arg, c, thread) for every c in [0, nchunks) and returns when all are done. Jobs of
 * one chunk, or a pool of one thread, run on the caller alone. */
void cpu_pool_run(struct cpu_pool *p, int nchunks, cpu_chunk_fn fn, void *arg);

#endif
