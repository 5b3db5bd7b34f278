/* The clocks every process reads: monotonic time for intervals and
 * deadlines, wall-clock (Unix) time for stamps that cross processes, such as
 * a plan's plan_unix_ns. */
#ifndef FOLIO_CLOCK_H
#define FOLIO_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t folio_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double folio_mono_s(void)
{
    return (double)folio_mono_ns() * 1e-9;
}

static inline uint64_t folio_unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
