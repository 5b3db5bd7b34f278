/* Two-process stress test of the shared-memory ring, with crashes.
 *
 * The parent creates a ring and forks a writer and a reader, then SIGKILLs
 * one of them at random moments and starts a new one in its place, until
 * the writers together have committed --records records and the reader has
 * seen the final one. Every record is {seq, epoch, len, flags, checksum}
 * followed by bytes derived from (seed, epoch, seq), its length too, so the
 * reader can tell a torn, mixed-up or stale record from a good one. The
 * reader fails the run when:
 *   - a record's length, header, bytes or checksum differ from what its
 *     (epoch, seq) implies (torn or corrupt);
 *   - a record's epoch is older than the newest writer that had announced
 *     itself before the read began (stale);
 *   - within an epoch, sequence numbers are not consecutive; the first
 *     record seen of an epoch is not its seq 0; or epochs go backwards.
 *     The only repeat allowed is the first record a restarted reader sees,
 *     equal to the last one its predecessor took (at-least-once delivery of
 *     the record in hand).
 * The reader's progress lives in memory shared with the parent, so it
 * survives the reader's own deaths.
 *
 * usage: ring_stress [--records N] [--capacity BYTES] [--kill-every-ms M]
 *                    [--seed S] [--timeout-s T]                          */
#include "shm_ring.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FLAG_END 1u
#define FAIL_EXIT 2

struct payload_head {
    uint64_t seq;
    uint32_t epoch;
    uint32_t len;
    uint64_t flags;
    uint64_t checksum;
};

/* Memory shared by the parent and every child it forks. */
struct stress_state {
    _Atomic uint64_t committed;       /* records committed by all writers */
    _Atomic uint32_t announced_epoch; /* set by each writer right after it attaches */
    _Atomic uint64_t last;            /* reader: (epoch << 32) | seq of the last record taken */
    _Atomic uint64_t delivered, redelivered, stale_dropped, epochs_seen;
    char failure[512];
};

static struct stress_state *state;
static uint64_t opt_records = 1000000, opt_seed = 1;
static size_t opt_capacity = 64 * 1024;
static double opt_kill_ms = 20;
static double opt_timeout_s = 300;
static char ring[64];

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The state from which a record's length and bytes follow. */
static uint64_t record_key(uint32_t epoch, uint64_t seq)
{
    uint64_t k = opt_seed ^ ((uint64_t)epoch << 40) ^ seq;
    return splitmix64(&k);
}

/* Mostly small records, one in sixteen anywhere up to the ring's maximum. */
static uint32_t record_len(uint32_t epoch, uint64_t seq, uint32_t max_record)
{
    uint64_t k = record_key(epoch, seq);
    uint64_t h = splitmix64(&k);
    uint32_t min = sizeof(struct payload_head);
    if ((h & 15) == 0)
        return min + (uint32_t)((h >> 8) % (max_record - min + 1));
    return min + (uint32_t)((h >> 8) % 224);
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t record_checksum(const struct payload_head *ph, const unsigned char *body,
                                size_t body_len)
{
    uint64_t h = fnv1a(0xcbf29ce484222325ull, ph, offsetof(struct payload_head, checksum));
    return fnv1a(h, body, body_len);
}

static void fill_body(unsigned char *body, size_t n, uint32_t epoch, uint64_t seq)
{
    uint64_t k = record_key(epoch, seq) ^ 0x5555;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = splitmix64(&k);
        memcpy(body + i, &v, 8);
    }
    if (i < n) {
        uint64_t v = splitmix64(&k);
        memcpy(body + i, &v, n - i);
    }
}

static bool body_matches(const unsigned char *body, size_t n, uint32_t epoch, uint64_t seq)
{
    uint64_t k = record_key(epoch, seq) ^ 0x5555;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = splitmix64(&k);
        if (memcmp(body + i, &v, 8))
            return false;
    }
    if (i < n) {
        uint64_t v = splitmix64(&k);
        if (memcmp(body + i, &v, n - i))
            return false;
    }
    return true;
}

static void child_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void child_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(state->failure, sizeof state->failure, fmt, ap);
    va_end(ap);
    _exit(FAIL_EXIT);
}

static void build_record(unsigned char *dst, uint32_t len, uint32_t epoch, uint64_t seq, bool end)
{
    struct payload_head ph = {.seq = seq, .epoch = epoch, .len = len, .flags = end ? FLAG_END : 0};
    unsigned char *body = dst + sizeof ph;
    size_t body_len = len - sizeof ph;
    fill_body(body, body_len, epoch, seq);
    ph.checksum = record_checksum(&ph, body, body_len);
    memcpy(dst, &ph, sizeof ph);
}

static void run_writer(void)
{
    char err[256];
    struct folio_ring *w = NULL;
    /* The parent reaps a killed writer before starting the next, so the role
     * is free; retry briefly all the same rather than fail on a slow exit. */
    for (int i = 0; folio_ring_attach_writer(ring, &w, err, sizeof err); i++) {
        if (i == 1000)
            child_fail("writer: %s", err);
        usleep(1000);
    }
    uint32_t epoch = folio_ring_epoch(w);
    uint32_t max = folio_ring_max_record(w);
    atomic_store_explicit(&state->announced_epoch, epoch, memory_order_release);
    unsigned char *copy = malloc(max);
    if (!copy)
        child_fail("writer: out of memory");
    for (uint64_t seq = 0;; seq++) {
        bool end = atomic_load(&state->committed) >= opt_records;
        uint32_t len = record_len(epoch, seq, max);
        for (;;) {
            int rc;
            if (seq % 4 == 3) { /* the copying path, one record in four */
                build_record(copy, len, epoch, seq, end);
                rc = folio_ring_try_write(w, copy, len, err, sizeof err);
            } else {
                void *dst;
                rc = folio_ring_reserve(w, len, &dst, err, sizeof err);
                if (rc == 1) {
                    build_record(dst, len, epoch, seq, end);
                    rc = folio_ring_commit(w, len, err, sizeof err);
                }
            }
            if (rc < 0)
                child_fail("writer epoch %u seq %llu: %s", epoch, (unsigned long long)seq, err);
            if (rc == 1)
                break;
            if (folio_ring_wait_space(w, len, 100000000, err, sizeof err) < 0)
                child_fail("writer: %s", err);
        }
        if (end) {
            folio_ring_close(w);
            _exit(0);
        }
        atomic_fetch_add(&state->committed, 1);
    }
}

static void check_record(const struct folio_ring_record *rec, uint32_t announced, bool first,
                         uint32_t max)
{
    struct payload_head ph;
    if (rec->len < sizeof ph)
        child_fail("record of %u bytes (epoch %u) is shorter than its head", rec->len, rec->epoch);
    memcpy(&ph, rec->data, sizeof ph);
    unsigned long long seq = (unsigned long long)ph.seq;
    if (ph.epoch != rec->epoch || ph.len != rec->len)
        child_fail("torn record: ring says epoch %u len %u, payload says epoch %u len %u seq %llu",
                   rec->epoch, rec->len, ph.epoch, ph.len, seq);
    if (ph.seq > UINT32_MAX || rec->len != record_len(ph.epoch, ph.seq, max))
        child_fail("torn record: epoch %u seq %llu has %u bytes, expected %u", ph.epoch, seq,
                   rec->len, record_len(ph.epoch, ph.seq, max));
    const unsigned char *body = (const unsigned char *)rec->data + sizeof ph;
    size_t body_len = rec->len - sizeof ph;
    if (ph.checksum != record_checksum(&ph, body, body_len) ||
        !body_matches(body, body_len, ph.epoch, ph.seq))
        child_fail("torn record: epoch %u seq %llu (%u bytes) fails its checksum", ph.epoch, seq,
                   rec->len);
    if (rec->epoch < announced)
        child_fail("stale record: epoch %u seq %llu read after writer epoch %u attached",
                   rec->epoch, seq, announced);

    uint64_t last = atomic_load(&state->last);
    uint32_t last_epoch = (uint32_t)(last >> 32), last_seq = (uint32_t)last;
    if (last && rec->epoch == last_epoch && ph.seq == last_seq) {
        if (!first)
            child_fail("epoch %u seq %llu delivered twice to one reader", rec->epoch, seq);
        atomic_fetch_add(&state->redelivered, 1);
        return;
    }
    if (last && rec->epoch == last_epoch) {
        if (ph.seq != (uint64_t)last_seq + 1)
            child_fail("epoch %u: seq %llu follows seq %u", rec->epoch, seq, last_seq);
    } else if (last && rec->epoch < last_epoch) {
        child_fail("epoch went backwards: %u after %u", rec->epoch, last_epoch);
    } else {
        if (ph.seq != 0)
            child_fail("epoch %u begins at seq %llu, not 0", rec->epoch, seq);
        atomic_fetch_add(&state->epochs_seen, 1);
    }
    atomic_store(&state->last, ((uint64_t)rec->epoch << 32) | ph.seq);
    atomic_fetch_add(&state->delivered, 1);
}

static void run_reader(void)
{
    char err[256];
    struct folio_ring *r = NULL;
    for (int i = 0; folio_ring_attach_reader(ring, &r, err, sizeof err); i++) {
        if (i == 1000)
            child_fail("reader: %s", err);
        usleep(1000);
    }
    uint32_t max = folio_ring_max_record(r);
    uint64_t stale_seen = 0;
    bool first = true;
    for (;;) {
        /* Read before the peek: every writer announced by now had attached,
         * so a record older than it must have been dropped. */
        uint32_t announced = atomic_load_explicit(&state->announced_epoch, memory_order_acquire);
        struct folio_ring_record rec;
        int rc = folio_ring_peek(r, &rec, err, sizeof err);
        if (rc < 0)
            child_fail("reader: %s", err);
        struct folio_ring_stats st;
        folio_ring_get_stats(r, &st);
        atomic_fetch_add(&state->stale_dropped, st.stale_dropped - stale_seen);
        stale_seen = st.stale_dropped;
        if (rc == 0) {
            if (folio_ring_wait(r, 100000000, err, sizeof err) < 0)
                child_fail("reader: %s", err);
            continue;
        }
        check_record(&rec, announced, first, max);
        first = false;
        struct payload_head ph;
        memcpy(&ph, rec.data, sizeof ph);
        /* The end record is left in the ring: a reader killed between taking
         * it and exiting would otherwise leave its successor waiting for a
         * record no writer will send (CI saw that as a 300 s timeout with
         * every record accounted for). */
        if (ph.flags & FLAG_END)
            _exit(0);
        folio_ring_release(r);
    }
}

static pid_t spawn(void (*fn)(void))
{
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "ring_stress: fork: %s\n", strerror(errno));
        exit(1);
    }
    if (pid == 0)
        fn();
    return pid;
}

static void kill_and_reap(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* Until a new writer has announced its epoch (or 2 s have passed: a writer
 * that cannot attach fails on its own and the main loop reports it). */
static void wait_announced(uint32_t before)
{
    for (int i = 0; i < 10000 && atomic_load(&state->announced_epoch) == before; i++)
        usleep(200);
}

static int usage(void)
{
    fprintf(stderr, "usage: ring_stress [--records N] [--capacity BYTES] [--kill-every-ms M] "
                    "[--seed S] [--timeout-s T]\n");
    return 2;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return usage();
        const char *v = argv[++i];
        char *end;
        double d = strtod(v, &end);
        if (*end || d < 0) {
            fprintf(stderr, "ring_stress: %s needs a non-negative number, got \"%s\"\n",
                    argv[i - 1], v);
            return 2;
        }
        if (!strcmp(argv[i - 1], "--records"))
            opt_records = (uint64_t)d;
        else if (!strcmp(argv[i - 1], "--capacity"))
            opt_capacity = (size_t)d;
        else if (!strcmp(argv[i - 1], "--kill-every-ms"))
            opt_kill_ms = d;
        else if (!strcmp(argv[i - 1], "--seed"))
            opt_seed = (uint64_t)d;
        else if (!strcmp(argv[i - 1], "--timeout-s"))
            opt_timeout_s = d;
        else
            return usage();
    }
    if (opt_records < 1 || opt_records > UINT32_MAX) {
        fprintf(stderr, "ring_stress: --records must be in 1..%u\n", UINT32_MAX);
        return 2;
    }
    state = mmap(NULL, sizeof *state, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (state == MAP_FAILED) {
        perror("ring_stress: mmap");
        return 1;
    }
    snprintf(ring, sizeof ring, "/folio-ring-stress-%d", (int)getpid());
    char err[256];
    struct folio_ring *owner;
    if (folio_ring_unlink(ring, err, sizeof err) ||
        folio_ring_create(ring, opt_capacity, &owner, err, sizeof err)) {
        fprintf(stderr, "ring_stress: %s\n", err);
        return 1;
    }
    printf("ring_stress: %llu records, ring of %zu bytes (max record %u), a kill every ~%.0f ms\n",
           (unsigned long long)opt_records, folio_ring_capacity(owner),
           folio_ring_max_record(owner), opt_kill_ms);
    fflush(stdout);

    uint64_t rng = opt_seed * 7919 + 1;
    pid_t writer = spawn(run_writer), reader = spawn(run_reader);
    bool writer_done = false, ok = false;
    uint64_t writer_kills = 0, reader_kills = 0, reader_stops = 0;
    int64_t start = now_ns();
    int64_t next_kill = start;
    if (opt_kill_ms > 0)
        next_kill += (int64_t)((double)(splitmix64(&rng) % 2001) / 1000.0 * opt_kill_ms * 1e6);
    const char *why = NULL;
    uint64_t progress_at_kill = 0;
    while (!why) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            if (!clean) {
                why = state->failure[0] ? state->failure : "a child died on its own";
                if (pid == writer)
                    writer = 0;
                if (pid == reader)
                    reader = 0;
                break;
            }
            if (pid == writer) {
                writer = 0;
                writer_done = true;
            } else if (pid == reader) {
                reader = 0;
                ok = true;
                break;
            }
            continue;
        }
        int64_t now = now_ns();
        if (now - start > (int64_t)(opt_timeout_s * 1e9)) {
            why = "timed out";
            break;
        }
        /* Kill only after the ring made progress since the last kill: on a
         * loaded machine a fresh child may not even be scheduled within the
         * kill interval, and killing it again would stall the run. */
        uint64_t progress = atomic_load(&state->committed) + atomic_load(&state->delivered);
        if (opt_kill_ms > 0 && now >= next_kill && progress > progress_at_kill) {
            progress_at_kill = progress;
            /* Kill the writer or the reader, at random, and start another.
             * A reader that keeps up drains a dead writer's records before
             * the next writer attaches, so two modes make sure stale records
             * meet a reader: the reader is stopped (or dead) while the
             * writer is replaced, and resumes only once the new writer has
             * announced its epoch. */
            int mode = writer_done ? 1 : (int)(splitmix64(&rng) % 4);
            uint32_t before = atomic_load(&state->announced_epoch);
            if (mode == 0) {
                kill_and_reap(writer);
                writer = spawn(run_writer);
                writer_kills++;
            } else if (mode == 1) {
                kill_and_reap(reader);
                reader = spawn(run_reader);
                reader_kills++;
            } else if (mode == 2) {
                kill(reader, SIGSTOP);
                kill_and_reap(writer);
                writer = spawn(run_writer);
                wait_announced(before);
                kill(reader, SIGCONT);
                writer_kills++;
                reader_stops++;
            } else {
                kill_and_reap(reader);
                kill_and_reap(writer);
                writer = spawn(run_writer);
                wait_announced(before);
                reader = spawn(run_reader);
                writer_kills++;
                reader_kills++;
            }
            next_kill =
                now + (int64_t)((double)(splitmix64(&rng) % 2001) / 1000.0 * opt_kill_ms * 1e6);
            continue;
        }
        usleep(500);
    }
    kill_and_reap(writer);
    kill_and_reap(reader);
    double secs = (double)(now_ns() - start) / 1e9;
    folio_ring_close(owner);
    printf("ring_stress: %.1f s: %llu committed, %llu delivered, %llu redelivered after a reader "
           "restart, %llu stale dropped; %llu writer epochs seen; %llu writer and %llu reader "
           "kills, %llu reader stops\n",
           secs, (unsigned long long)atomic_load(&state->committed),
           (unsigned long long)atomic_load(&state->delivered),
           (unsigned long long)atomic_load(&state->redelivered),
           (unsigned long long)atomic_load(&state->stale_dropped),
           (unsigned long long)atomic_load(&state->epochs_seen), (unsigned long long)writer_kills,
           (unsigned long long)reader_kills, (unsigned long long)reader_stops);
    if (!ok) {
        fprintf(stderr, "ring_stress: FAILED: %s\n", why ? why : "unknown");
        return 1;
    }
    if (opt_kill_ms > 0 && (writer_kills == 0 || reader_kills == 0)) {
        fprintf(stderr, "ring_stress: FAILED: the run ended before both sides were killed at "
                        "least once; raise --records\n");
        return 1;
    }
    printf("ring_stress: OK\n");
    return 0;
}
