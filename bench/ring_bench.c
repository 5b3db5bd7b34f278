/* Throughput and latency of the shared-memory ring between two processes.
 *
 * Throughput: a forked writer fills N records (small: 16-64 bytes, large:
 * 4 KiB) in place as fast as it can, the reader copies each one out and
 * checks its sequence number; the clock runs from the writer's start (its
 * time travels in the records) to the reader's last record.
 * Latency: ping-pong over two rings with a 32-byte record. The echoing
 * process stamps the moment it received the ping (CLOCK_MONOTONIC, one clock
 * for the whole machine), so the one-way latency is measured directly; the
 * round trip halved is printed beside it.
 * Each is run with both sides busy-polling and with both sides sleeping on
 * the ring's futex when there is nothing to do. The two processes are pinned
 * to two different CPUs when the machine has them (busy-polling two
 * processes on one CPU measures the scheduler, not the ring).
 *
 * usage: ring_bench [--small N] [--large N] [--iters N] [--capacity BYTES]
 *                   [--no-pin]                                              */
#include "shm_ring.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t opt_small = 10000000, opt_large = 1000000;
static int opt_iters = 200000;
static size_t opt_capacity = 1 << 20;
static bool opt_pin = true;
static int cpu_a = -1, cpu_b = -1;
static char err[256];
/* Rings this run created, unlinked by die() so that a failed run leaves none. */
static char created[3][96];

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "ring_bench: %s: %s\n", what, err);
    for (int i = 0; i < 3; i++)
        if (created[i][0])
            folio_ring_unlink(created[i], NULL, 0);
    exit(1);
}

/* The first two CPUs this process may run on. */
static void choose_cpus(void)
{
    cpu_set_t set;
    if (!opt_pin || sched_getaffinity(0, sizeof set, &set))
        return;
    for (int c = 0; c < CPU_SETSIZE && cpu_b < 0; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        if (cpu_a < 0)
            cpu_a = c;
        else
            cpu_b = c;
    }
    if (cpu_b < 0)
        cpu_a = -1;
}

static void pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

/* The owner handle is kept for the run (closing it unlinks the name). */
static struct folio_ring *make_ring(char *name, size_t n, const char *what)
{
    snprintf(name, n, "/folio-ring-bench-%d-%s", (int)getpid(), what);
    for (int i = 0; i < 3; i++) {
        if (!created[i][0] || !strcmp(created[i], name)) {
            snprintf(created[i], sizeof created[i], "%s", name);
            break;
        }
    }
    struct folio_ring *owner = NULL;
    if (folio_ring_unlink(name, err, sizeof err) ||
        folio_ring_create(name, opt_capacity, &owner, err, sizeof err))
        die("create");
    return owner;
}

/* Waits for a record by spinning or on the futex. */
static void next_record(struct folio_ring *r, struct folio_ring_record *rec, bool sleep)
{
    for (;;) {
        int rc = folio_ring_peek(r, rec, err, sizeof err);
        if (rc == 1)
            return;
        if (rc < 0)
            die("peek");
        if (sleep) {
            if (folio_ring_wait(r, -1, err, sizeof err) < 0)
                die("wait");
        } else {
            cpu_relax();
        }
    }
}

static void *reserve(struct folio_ring *r, uint32_t len, bool sleep)
{
    for (;;) {
        void *p;
        int rc = folio_ring_reserve(r, len, &p, err, sizeof err);
        if (rc == 1)
            return p;
        if (rc < 0)
            die("reserve");
        if (sleep) {
            if (folio_ring_wait_space(r, len, -1, err, sizeof err) < 0)
                die("wait_space");
        } else {
            cpu_relax();
        }
    }
}

static void commit(struct folio_ring *r, uint32_t len)
{
    if (folio_ring_commit(r, len, err, sizeof err) != 1)
        die("commit");
}

static void throughput(const char *label, uint32_t min_len, uint32_t max_len, uint64_t n,
                       bool sleep)
{
    char name[96];
    struct folio_ring *owner = make_ring(name, sizeof name, "tput");
    pid_t child = fork();
    if (child == 0) {
        pin(cpu_b);
        struct folio_ring *w;
        if (folio_ring_attach_writer(name, &w, err, sizeof err))
            die("attach writer");
        /* Start once the reader is there, so the clock covers both ends. */
        while (!folio_ring_reader_pid(w))
            usleep(100);
        uint64_t x = 12345;
        int64_t start = now_ns();
        for (uint64_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t len = min_len + (uint32_t)((x >> 33) % (max_len - min_len + 1));
            unsigned char *p = reserve(w, len, sleep);
            /* The whole payload is written: seq, the start time, then bytes. */
            memcpy(p, &i, sizeof i);
            memcpy(p + 8, &start, sizeof start);
            memset(p + 16, (int)(i & 0xff), len - 16);
            commit(w, len);
        }
        folio_ring_close(w);
        _exit(0);
    }
    pin(cpu_a);
    struct folio_ring *r;
    if (folio_ring_attach_reader(name, &r, err, sizeof err))
        die("attach reader");
    int64_t t0 = 0;
    uint64_t bytes = 0;
    unsigned char *copy = malloc(max_len);
    if (!copy) {
        snprintf(err, sizeof err, "out of memory");
        die("throughput");
    }
    for (uint64_t i = 0; i < n; i++) {
        struct folio_ring_record rec;
        next_record(r, &rec, sleep);
        /* The whole payload is read: copied out, as a consumer would. */
        memcpy(copy, rec.data, rec.len);
        folio_ring_release(r);
        uint64_t seq;
        memcpy(&seq, copy, sizeof seq);
        if (i == 0)
            memcpy(&t0, copy + 8, sizeof t0);
        if (seq != i || (rec.len > 16 && copy[rec.len - 1] != (unsigned char)(i & 0xff))) {
            snprintf(err, sizeof err, "record %llu arrived as %llu", (unsigned long long)i,
                     (unsigned long long)seq);
            die("throughput");
        }
        bytes += rec.len;
    }
    free(copy);
    double secs = (double)(now_ns() - t0) / 1e9;
    struct folio_ring_stats st;
    folio_ring_get_stats(r, &st);
    waitpid(child, NULL, 0);
    folio_ring_close(r);
    folio_ring_close(owner);
    printf("throughput %-22s %-10s %9llu records in %.3f s: %7.2f M records/s, %6.2f GB/s "
           "(reader slept %llu times)\n",
           label, sleep ? "futex" : "busy-poll", (unsigned long long)n, secs,
           (double)n / secs / 1e6, (double)bytes / secs / 1e9, (unsigned long long)st.sleeps);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct_us(const int64_t *sorted, int n, double p)
{
    int i = (int)(p * (n - 1) + 0.5);
    return (double)sorted[i] / 1000.0;
}

struct ping {
    int64_t sent;     /* by the pinger, just before commit */
    int64_t received; /* by the echoer, as soon as its peek returned */
    uint64_t seq;
    uint64_t pad;
};

static void latency(int iters, bool sleep)
{
    char ping_name[96], pong_name[96];
    struct folio_ring *own_ping = make_ring(ping_name, sizeof ping_name, "ping");
    struct folio_ring *own_pong = make_ring(pong_name, sizeof pong_name, "pong");
    int warmup = iters / 10 + 100, total = iters + warmup;
    pid_t child = fork();
    if (child == 0) {
        pin(cpu_b);
        struct folio_ring *in, *out;
        if (folio_ring_attach_reader(ping_name, &in, err, sizeof err) ||
            folio_ring_attach_writer(pong_name, &out, err, sizeof err))
            die("attach echo");
        for (int i = 0; i < total; i++) {
            struct folio_ring_record rec;
            next_record(in, &rec, sleep);
            int64_t received = now_ns();
            struct ping p;
            memcpy(&p, rec.data, sizeof p);
            folio_ring_release(in);
            p.received = received;
            memcpy(reserve(out, sizeof p, sleep), &p, sizeof p);
            commit(out, sizeof p);
        }
        folio_ring_close(in);
        folio_ring_close(out);
        _exit(0);
    }
    pin(cpu_a);
    struct folio_ring *out, *in;
    if (folio_ring_attach_writer(ping_name, &out, err, sizeof err) ||
        folio_ring_attach_reader(pong_name, &in, err, sizeof err))
        die("attach ping");
    int64_t *one_way = malloc(sizeof(int64_t) * (size_t)iters);
    int64_t *half_rtt = malloc(sizeof(int64_t) * (size_t)iters);
    if (!one_way || !half_rtt) {
        snprintf(err, sizeof err, "out of memory");
        die("latency");
    }
    for (int i = 0; i < total; i++) {
        struct ping *p = reserve(out, sizeof *p, sleep);
        p->seq = (uint64_t)i;
        p->received = 0;
        p->pad = 0;
        p->sent = now_ns();
        commit(out, sizeof *p);
        struct folio_ring_record rec;
        next_record(in, &rec, sleep);
        int64_t back = now_ns();
        struct ping got;
        memcpy(&got, rec.data, sizeof got);
        folio_ring_release(in);
        if (got.seq != (uint64_t)i) {
            snprintf(err, sizeof err, "pong %llu for ping %d", (unsigned long long)got.seq, i);
            die("latency");
        }
        if (i >= warmup) {
            one_way[i - warmup] = got.received - got.sent;
            half_rtt[i - warmup] = (back - got.sent) / 2;
        }
    }
    waitpid(child, NULL, 0);
    qsort(one_way, (size_t)iters, sizeof *one_way, cmp_i64);
    qsort(half_rtt, (size_t)iters, sizeof *half_rtt, cmp_i64);
    printf("latency    32-byte records         %-10s %7d round trips: one-way p50 %6.2f us "
           "p99 %6.2f us; rtt/2 p50 %6.2f us p99 %6.2f us\n",
           sleep ? "futex" : "busy-poll", iters, pct_us(one_way, iters, 0.50),
           pct_us(one_way, iters, 0.99), pct_us(half_rtt, iters, 0.50),
           pct_us(half_rtt, iters, 0.99));
    free(one_way);
    free(half_rtt);
    folio_ring_close(out);
    folio_ring_close(in);
    folio_ring_close(own_ping);
    folio_ring_close(own_pong);
}

static int usage(void)
{
    fprintf(stderr, "usage: ring_bench [--small N] [--large N] [--iters N] [--capacity BYTES] "
                    "[--no-pin]\n");
    return 2;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-pin")) {
            opt_pin = false;
            continue;
        }
        if (i + 1 >= argc)
            return usage();
        char *end;
        double v = strtod(argv[i + 1], &end);
        if (*end || v < 1) {
            fprintf(stderr, "ring_bench: %s needs a positive number, got \"%s\"\n", argv[i],
                    argv[i + 1]);
            return 2;
        }
        if (!strcmp(argv[i], "--small"))
            opt_small = (uint64_t)v;
        else if (!strcmp(argv[i], "--large"))
            opt_large = (uint64_t)v;
        else if (!strcmp(argv[i], "--iters"))
            opt_iters = (int)v;
        else if (!strcmp(argv[i], "--capacity"))
            opt_capacity = (size_t)v;
        else
            return usage();
        i++;
    }
    choose_cpus();
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("ring_bench: ring of %zu bytes, %ld CPUs online, %s\n", opt_capacity, ncpu,
           cpu_a >= 0 ? "processes pinned to two CPUs" : "processes not pinned");
    fflush(stdout);
    throughput("small (16-64 B)", 16, 64, opt_small, false);
    throughput("small (16-64 B)", 16, 64, opt_small, true);
    throughput("large (4096 B)", 4096, 4096, opt_large, false);
    throughput("large (4096 B)", 4096, 4096, opt_large, true);
    latency(opt_iters, false);
    latency(opt_iters / 4 > 0 ? opt_iters / 4 : 1, true);
    return 0;
}
