/* The shared-memory ring: names and attach errors, empty and full, every
 * record size with wrap-around, zero-copy reserve/commit and peek/release,
 * writer and reader restarts (epochs, stale records, at-least-once), the
 * futex wake-ups across processes, and a corrupt ring. */
#include "check.h"
#include "shm_ring.h"

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The layout the ring documents: a 4 KiB header page, then the data area
 * whose first record header is { u32 length, u32 epoch }. */
#define HEADER_PAGE 4096

static char err[512];

static const char *ring_name(const char *what)
{
    static char name[128];
    snprintf(name, sizeof name, "/folio-test-ring-%d-%s", (int)getpid(), what);
    folio_ring_unlink(name, NULL, 0);
    return name;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void fill(unsigned char *p, uint32_t len, uint32_t tag)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = (unsigned char)(tag * 31 + i * 7);
}

static bool matches(const unsigned char *p, uint32_t len, uint32_t tag)
{
    for (uint32_t i = 0; i < len; i++)
        if (p[i] != (unsigned char)(tag * 31 + i * 7))
            return false;
    return true;
}

static bool contains(const char *s, const char *part)
{
    bool ok = strstr(s, part) != NULL;
    if (!ok)
        fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", s, part);
    return ok;
}

static void test_names_and_create(void)
{
    struct folio_ring *r;
    CHECK(folio_ring_create("", 4096, &r, err, sizeof err) == -1 && r == NULL);
    CHECK(contains(err, "empty"));
    CHECK(folio_ring_create("/", 4096, &r, err, sizeof err) == -1);
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK(folio_ring_create(longname, 4096, &r, err, sizeof err) == -1);
    CHECK(contains(err, "too long"));
    CHECK(folio_ring_create("/folio/x", 4096, &r, err, sizeof err) == -1);
    CHECK(contains(err, "'/'"));
    const char *name = ring_name("create");
    CHECK(folio_ring_create(name, (size_t)2 << 30, &r, err, sizeof err) == -1);
    CHECK(contains(err, "exceeds the maximum"));

    /* Rounded up to a power of two; a name with no '/' means the same segment. */
    CHECK(folio_ring_create(name + 1, 5000, &r, err, sizeof err) == 0);
    CHECK(folio_ring_capacity(r) == 8192);
    CHECK(folio_ring_max_record(r) == 8192 / 2 - 8);
    CHECK(strcmp(folio_ring_name(r), name) == 0);
    CHECK(folio_ring_role(r) == FOLIO_RING_OWNER);
    CHECK(folio_ring_writer_epoch(r) == 0);
    struct folio_ring *again;
    CHECK(folio_ring_create(name, 4096, &again, err, sizeof err) == -1);
    CHECK(contains(err, "already exists"));
    /* The owner holds no role. */
    void *p;
    CHECK(folio_ring_reserve(r, 8, &p, err, sizeof err) == -1);
    CHECK(contains(err, "writer handle"));
    folio_ring_close(r);
    /* Closing the owner unlinked the name. */
    CHECK(folio_ring_attach_reader(name, &r, err, sizeof err) == -1);
    CHECK(contains(err, name) && contains(err, "No such file"));
    CHECK(folio_ring_unlink(name, err, sizeof err) == 0); /* absent is fine */
}

/* Makes a segment with our own hands and checks attach refuses it. */
static void attach_refuses(const char *what, size_t size, void (*spoil)(unsigned char *),
                           const char *expect)
{
    const char *name = ring_name(what);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK(ftruncate(fd, (off_t)size) == 0);
    if (size) {
        unsigned char *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CHECK(m != MAP_FAILED);
        if (m != MAP_FAILED) {
            spoil(m);
            munmap(m, size);
        }
    }
    close(fd);
    struct folio_ring *r;
    CHECK(folio_ring_attach_writer(name, &r, err, sizeof err) == -1 && r == NULL);
    CHECK(contains(err, expect));
    CHECK(contains(err, name));
    folio_ring_unlink(name, NULL, 0);
}

static void spoil_nothing(unsigned char *m)
{
    (void)m;
}

static void spoil_junk(unsigned char *m)
{
    memcpy(m, "not a ring at all", 17);
}

static char spoil_source[128];

/* A real ring's header page, copied, with one field changed. */
static void spoil_version(unsigned char *m)
{
    int fd = shm_open(spoil_source, O_RDONLY, 0);
    CHECK(fd >= 0 && read(fd, m, HEADER_PAGE) == HEADER_PAGE);
    close(fd);
    m[8] = 99; /* the version follows the 8-byte magic */
}

static void spoil_capacity(unsigned char *m)
{
    int fd = shm_open(spoil_source, O_RDONLY, 0);
    CHECK(fd >= 0 && read(fd, m, HEADER_PAGE) == HEADER_PAGE);
    close(fd);
    m[16 + 2] ^= 0x10; /* capacity (at 16) no longer matches the segment size */
}

static void test_bad_attach(void)
{
    attach_refuses("empty", 0, spoil_nothing, "smaller than");
    attach_refuses("junk", 8192, spoil_junk, "bad magic");
    snprintf(spoil_source, sizeof spoil_source, "%s", ring_name("source"));
    struct folio_ring *src;
    CHECK(folio_ring_create(spoil_source, 4096, &src, err, sizeof err) == 0);
    attach_refuses("version", HEADER_PAGE + 4096, spoil_version, "version 99");
    attach_refuses("capacity", HEADER_PAGE + 4096, spoil_capacity, "inconsistent header");
    folio_ring_close(src);
}

static void test_roles(void)
{
    const char *name = ring_name("roles");
    struct folio_ring *own, *w, *w2, *rd, *rd2;
    CHECK(folio_ring_create(name, 4096, &own, err, sizeof err) == 0);
    CHECK(folio_ring_writer_pid(own) == 0 && folio_ring_reader_pid(own) == 0);
    CHECK(folio_ring_attach_writer(name, &w, err, sizeof err) == 0);
    CHECK(folio_ring_attach_reader(name, &rd, err, sizeof err) == 0);
    CHECK(folio_ring_epoch(w) == 1 && folio_ring_writer_epoch(rd) == 1);
    CHECK(folio_ring_writer_pid(own) == getpid() && folio_ring_reader_pid(own) == getpid());
    CHECK(folio_ring_attach_writer(name, &w2, err, sizeof err) == -1);
    CHECK(contains(err, "already has a writer attached"));
    CHECK(folio_ring_attach_reader(name, &rd2, err, sizeof err) == -1);
    CHECK(contains(err, "already has a reader attached"));
    struct folio_ring_record rec;
    CHECK(folio_ring_peek(w, &rec, err, sizeof err) == -1);
    CHECK(contains(err, "reader handle"));
    CHECK(folio_ring_try_write(rd, "x", 1, err, sizeof err) == -1);
    folio_ring_close(w);
    folio_ring_close(rd);
    CHECK(folio_ring_writer_pid(own) == 0 && folio_ring_reader_pid(own) == 0);

    /* A role held by a process that is killed comes free with it. */
    pid_t child = fork();
    if (child == 0) {
        struct folio_ring *cw;
        if (folio_ring_attach_writer(name, &cw, err, sizeof err))
            _exit(1);
        pause();
        _exit(0);
    }
    int tries = 0;
    while (folio_ring_writer_pid(own) != child && tries++ < 1000)
        usleep(1000);
    CHECK(folio_ring_writer_pid(own) == child);
    CHECK(folio_ring_attach_writer(name, &w2, err, sizeof err) == -1);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK(folio_ring_writer_pid(own) == 0);
    CHECK(folio_ring_attach_writer(name, &w2, err, sizeof err) == 0);
    CHECK(folio_ring_epoch(w2) == 3);
    folio_ring_close(w2);
    folio_ring_close(own);
}

/* Every payload size from 0 to the maximum, one at a time through a small
 * ring, so that records land at every offset and wrap in every way. */
static void test_all_sizes(void)
{
    const char *name = ring_name("sizes");
    struct folio_ring *own, *w, *rd;
    CHECK(folio_ring_create(name, 4096, &own, err, sizeof err) == 0);
    CHECK(folio_ring_attach_writer(name, &w, err, sizeof err) == 0);
    CHECK(folio_ring_attach_reader(name, &rd, err, sizeof err) == 0);
    uint32_t max = folio_ring_max_record(w);
    CHECK(max == 2040);
    unsigned char buf[4096], out[4096];
    int bad = 0;
    for (int round = 0; round < 2; round++) {
        for (uint32_t len = 0; len <= max; len++) {
            /* A filler of varying size first, so that the record starts at
             * ever different offsets and wraps in every way. */
            uint32_t filler = (len * 7 + (uint32_t)round * 13) % 61;
            fill(buf, filler, filler + 1);
            if (folio_ring_try_write(w, buf, filler, err, sizeof err) != 1)
                bad++;
            uint32_t got;
            if (folio_ring_try_read(rd, out, sizeof out, &got, err, sizeof err) != 1 ||
                got != filler || !matches(out, got, filler + 1))
                bad++;
            fill(buf, len, len);
            if (folio_ring_try_write(w, buf, len, err, sizeof err) != 1)
                bad++;
            struct folio_ring_record rec;
            if (folio_ring_peek(rd, &rec, err, sizeof err) != 1 || rec.len != len ||
                rec.epoch != 1 || ((uintptr_t)rec.data & 7) || !matches(rec.data, len, len))
                bad++;
            folio_ring_release(rd);
        }
    }
    CHECK(bad == 0);
    struct folio_ring_stats st;
    folio_ring_get_stats(rd, &st);
    CHECK(st.records == 4 * (uint64_t)(max + 1));
    CHECK(folio_ring_used_bytes(own) == 0);
    CHECK(folio_ring_try_write(w, buf, max + 1, err, sizeof err) == -1);
    CHECK(contains(err, "exceeds the maximum of 2040"));
    void *p;
    CHECK(folio_ring_reserve(w, max + 1, &p, err, sizeof err) == -1);
    CHECK(folio_ring_wait_space(w, max + 1, 0, err, sizeof err) == -1);
    folio_ring_close(w);
    folio_ring_close(rd);
    folio_ring_close(own);
}

static void test_empty_full(void)
{
    const char *name = ring_name("full");
    struct folio_ring *own, *w, *rd;
    CHECK(folio_ring_create(name, 4096, &own, err, sizeof err) == 0);
    CHECK(folio_ring_attach_writer(name, &w, err, sizeof err) == 0);
    CHECK(folio_ring_attach_reader(name, &rd, err, sizeof err) == 0);
    struct folio_ring_record rec;
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 0);
    CHECK(folio_ring_readable(rd, err, sizeof err) == 0);
    CHECK(folio_ring_wait(rd, 0, err, sizeof err) == 0);
    int64_t t0 = now_ns();
    CHECK(folio_ring_wait(rd, 2000000, err, sizeof err) == 0);
    CHECK(now_ns() - t0 >= 2000000);
    folio_ring_release(rd); /* nothing in hand: a no-op */

    /* 100-byte payloads take 112 bytes: 36 fit in 4096 (4032), the 37th not. */
    unsigned char buf[100];
    int written = 0;
    for (int i = 0; i < 100; i++) {
        fill(buf, sizeof buf, (uint32_t)i);
        int rc = folio_ring_try_write(w, buf, sizeof buf, err, sizeof err);
        if (rc != 1) {
            CHECK(rc == 0);
            break;
        }
        written++;
    }
    CHECK(written == 36);
    CHECK(folio_ring_wait(rd, INT64_MAX, err, sizeof err) == 1); /* no overflow of the deadline */
    CHECK(folio_ring_used_bytes(own) == 36 * 112);
    CHECK(folio_ring_wait_space(w, 100, 1000000, err, sizeof err) == 0);
    /* A record of 56 bytes (64 with its header) still fits at the end. */
    CHECK(folio_ring_try_write(w, buf, 56, err, sizeof err) == 1);
    CHECK(folio_ring_try_write(w, buf, 0, err, sizeof err) == 0);
    struct folio_ring_stats st;
    folio_ring_get_stats(w, &st);
    CHECK(st.full == 2);
    /* Freeing one record at the start lets a 100-byte one wrap to it. */
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 1 && matches(rec.data, 100, 0));
    folio_ring_release(rd);
    CHECK(folio_ring_wait_space(w, 100, 0, err, sizeof err) == 1);
    fill(buf, sizeof buf, 1000);
    CHECK(folio_ring_try_write(w, buf, sizeof buf, err, sizeof err) == 1);
    int order_ok = 1;
    for (int i = 1; i < 36; i++) {
        if (folio_ring_peek(rd, &rec, err, sizeof err) != 1 || !matches(rec.data, 100, (uint32_t)i))
            order_ok = 0;
        folio_ring_release(rd);
    }
    CHECK(order_ok);
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 1 && rec.len == 56);
    folio_ring_release(rd);
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 1 && rec.len == 100 &&
          matches(rec.data, 100, 1000));
    folio_ring_release(rd);
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 0);
    CHECK(folio_ring_used_bytes(own) == 0);
    folio_ring_close(w);
    folio_ring_close(rd);
    folio_ring_close(own);
}

static void test_zero_copy(void)
{
    const char *name = ring_name("zc");
    struct folio_ring *own, *w, *rd;
    CHECK(folio_ring_create(name, 4096, &own, err, sizeof err) == 0);
    CHECK(folio_ring_attach_writer(name, &w, err, sizeof err) == 0);
    CHECK(folio_ring_attach_reader(name, &rd, err, sizeof err) == 0);
    void *p, *q;
    CHECK(folio_ring_commit(w, 0, err, sizeof err) == -1);
    CHECK(contains(err, "without a reservation"));
    CHECK(folio_ring_reserve(w, 1000, &p, err, sizeof err) == 1 && ((uintptr_t)p & 7) == 0);
    CHECK(folio_ring_reserve(w, 10, &q, err, sizeof err) == -1);
    CHECK(contains(err, "reservation is open"));
    fill(p, 10, 77);
    /* Nothing is visible before commit. */
    CHECK(folio_ring_readable(rd, err, sizeof err) == 0);
    CHECK(folio_ring_commit(w, 1001, err, sizeof err) == -1);
    CHECK(contains(err, "exceeds the reservation"));
    CHECK(folio_ring_commit(w, 10, err, sizeof err) == 1);
    CHECK(folio_ring_used_bytes(own) == 24); /* shrunk to what was committed */
    struct folio_ring_record rec, again;
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 1 && rec.len == 10);
    CHECK(matches(rec.data, 10, 77));
    CHECK(folio_ring_peek(rd, &again, err, sizeof err) == 1 && again.data == rec.data);
    unsigned char small[4];
    uint32_t len = 0;
    folio_ring_release(rd);
    CHECK(folio_ring_try_write(w, "0123456789", 10, err, sizeof err) == 1);
    CHECK(folio_ring_try_read(rd, small, sizeof small, &len, err, sizeof err) == -1);
    CHECK(len == 10 && contains(err, "does not fit the 4-byte buffer"));
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 1 && rec.len == 10); /* still there */
    folio_ring_close(w);
    folio_ring_close(rd);
    folio_ring_close(own);
}

static int read_tags(struct folio_ring *rd, uint32_t *tags, int max)
{
    int n = 0;
    struct folio_ring_record rec;
    while (n < max && folio_ring_peek(rd, &rec, err, sizeof err) == 1) {
        tags[n++] = rec.len >= 4 ? *(const uint32_t *)rec.data : UINT32_MAX;
        folio_ring_release(rd);
    }
    return n;
}

static void write_tag(struct folio_ring *w, uint32_t tag)
{
    CHECK(folio_ring_try_write(w, &tag, sizeof tag, err, sizeof err) == 1);
}

static void test_epochs(void)
{
    const char *name = ring_name("epochs");
    struct folio_ring *own, *w, *rd;
    CHECK(folio_ring_create(name, 4096, &own, err, sizeof err) == 0);
    CHECK(folio_ring_attach_writer(name, &w, err, sizeof err) == 0);
    CHECK(folio_ring_attach_reader(name, &rd, err, sizeof err) == 0);
    for (uint32_t i = 0; i < 5; i++)
        write_tag(w, i);
    uint32_t tags[16];
    CHECK(read_tags(rd, tags, 2) == 2 && tags[0] == 0 && tags[1] == 1);
    /* A clean close leaves the writer's records current. */
    folio_ring_close(w);
    CHECK(read_tags(rd, tags, 1) == 1 && tags[0] == 2);

    /* A new writer: records 3 and 4 of the old epoch are never delivered. */
    CHECK(folio_ring_attach_writer(name, &w, err, sizeof err) == 0);
    CHECK(folio_ring_epoch(w) == 2 && folio_ring_writer_epoch(rd) == 2);
    CHECK(folio_ring_readable(rd, err, sizeof err) == 0);
    struct folio_ring_stats st;
    folio_ring_get_stats(rd, &st);
    CHECK(st.stale_dropped == 2);
    CHECK(folio_ring_used_bytes(own) == 0); /* the stale space is handed back at once */
    write_tag(w, 100);

    /* A writer killed mid-write: reserved and filled, never committed. Its
     * successor writes over that space; the half-record never appears. */
    void *p;
    CHECK(folio_ring_reserve(w, 2000, &p, err, sizeof err) == 1);
    memset(p, 0xab, 2000);
    folio_ring_close(w);
    CHECK(folio_ring_attach_writer(name, &w, err, sizeof err) == 0);
    CHECK(folio_ring_epoch(w) == 3);
    write_tag(w, 200);
    write_tag(w, 201);
    struct folio_ring_record rec;
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 1);
    CHECK(rec.epoch == 3 && rec.len == 4 && *(const uint32_t *)rec.data == 200);
    folio_ring_get_stats(rd, &st);
    CHECK(st.stale_dropped == 3); /* tag 100 went with epoch 2 */

    /* A reader that dies holding a record: its successor gets it again. */
    folio_ring_close(rd);
    CHECK(folio_ring_attach_reader(name, &rd, err, sizeof err) == 0);
    CHECK(folio_ring_epoch(rd) == 2);
    CHECK(read_tags(rd, tags, 16) == 2 && tags[0] == 200 && tags[1] == 201);

    /* A record readable() saw is checked again by peek: a writer that
     * attached in between makes it stale. One already in hand stays. */
    write_tag(w, 300);
    CHECK(folio_ring_readable(rd, err, sizeof err) == 1);
    folio_ring_close(w);
    CHECK(folio_ring_attach_writer(name, &w, err, sizeof err) == 0);
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 0);
    write_tag(w, 400);
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 1 && rec.epoch == 4);
    folio_ring_close(w);
    CHECK(folio_ring_attach_writer(name, &w, err, sizeof err) == 0);
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 1 && rec.epoch == 4 &&
          *(const uint32_t *)rec.data == 400);
    folio_ring_release(rd);
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 0);
    folio_ring_close(w);
    folio_ring_close(rd);
    folio_ring_close(own);
}

/* The reader sleeps on the futex and a writer in another process wakes it;
 * then the writer sleeps on a full ring and the reader wakes it. */
static void test_wakeups(void)
{
    const char *name = ring_name("wake");
    struct folio_ring *own, *rd;
    CHECK(folio_ring_create(name, 4096, &own, err, sizeof err) == 0);
    CHECK(folio_ring_attach_reader(name, &rd, err, sizeof err) == 0);
    pid_t child = fork();
    if (child == 0) {
        struct folio_ring *w;
        if (folio_ring_attach_writer(name, &w, err, sizeof err))
            _exit(1);
        usleep(200000);
        uint32_t tag = 42;
        if (folio_ring_try_write(w, &tag, 4, err, sizeof err) != 1)
            _exit(2);
        /* Now fill the ring and wait for space: the parent frees it. */
        unsigned char buf[1000] = {0};
        while (folio_ring_try_write(w, buf, sizeof buf, err, sizeof err) == 1)
            ;
        int64_t t0 = now_ns();
        if (folio_ring_wait_space(w, sizeof buf, 10LL * 1000000000, err, sizeof err) != 1)
            _exit(3);
        if (now_ns() - t0 > 5000000000LL) /* woken by the timeout, not by the reader */
            _exit(5);
        struct folio_ring_stats st;
        folio_ring_get_stats(w, &st);
        if (st.sleeps < 1)
            _exit(4);
        _exit(0);
    }
    int64_t t0 = now_ns();
    CHECK(folio_ring_wait(rd, 10LL * 1000000000, err, sizeof err) == 1);
    int64_t waited = now_ns() - t0;
    CHECK(waited >= 100000000 && waited < 5000000000LL);
    struct folio_ring_stats st;
    folio_ring_get_stats(rd, &st);
    CHECK(st.sleeps >= 1);
    uint32_t tags[1];
    CHECK(read_tags(rd, tags, 1) == 1 && tags[0] == 42);
    /* Let the child fill the ring (4 records of 1008 bytes after the first
     * 16) and go to sleep waiting for space. */
    for (int i = 0; i < 5000 && folio_ring_used_bytes(own) < 4032; i++)
        usleep(1000);
    CHECK(folio_ring_used_bytes(own) == 4032);
    usleep(200000);
    struct folio_ring_record rec;
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 1);
    folio_ring_release(rd);
    int status = -1;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    folio_ring_get_stats(rd, &st);
    CHECK(st.wakes >= 1);
    folio_ring_close(rd);
    folio_ring_close(own);
}

/* A ring whose memory says something no writer could have published is an
 * error with a message, never an out-of-bounds read. */
static void test_corrupt(void)
{
    const char *name = ring_name("corrupt");
    struct folio_ring *own, *w, *rd;
    CHECK(folio_ring_create(name, 4096, &own, err, sizeof err) == 0);
    CHECK(folio_ring_attach_writer(name, &w, err, sizeof err) == 0);
    CHECK(folio_ring_attach_reader(name, &rd, err, sizeof err) == 0);
    write_tag(w, 1);
    int fd = shm_open(name, O_RDWR, 0);
    unsigned char *m = mmap(NULL, HEADER_PAGE + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED)
        return;
    uint32_t *first = (uint32_t *)(m + HEADER_PAGE);
    CHECK(first[0] == 4 && first[1] == 1);
    first[0] = 3000; /* longer than the maximum record */
    struct folio_ring_record rec;
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == -1);
    CHECK(contains(err, "corrupt record of 3000 bytes"));
    first[0] = 100; /* within the maximum but past the published tail */
    CHECK(folio_ring_readable(rd, err, sizeof err) == -1);
    CHECK(contains(err, "corrupt record"));
    first[0] = 4;
    CHECK(folio_ring_peek(rd, &rec, err, sizeof err) == 1);
    munmap(m, HEADER_PAGE + 4096);
    folio_ring_close(w);
    folio_ring_close(rd);
    folio_ring_close(own);
}

int main(void)
{
    test_names_and_create();
    test_bad_attach();
    test_roles();
    test_all_sizes();
    test_empty_full();
    test_zero_copy();
    test_epochs();
    test_wakeups();
    test_corrupt();
    return check_report();
}
