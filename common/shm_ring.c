/* The shared-memory SPSC ring of shm_ring.h.
 *
 * Positions (head, tail) are byte counts since creation (u64, never wrap in
 * practice); a position's place in the data area is pos & (capacity - 1).
 * The writer alone stores the tail, the reader alone stores the head, so
 * each side keeps its own position in the handle and a cached copy of the
 * other side's, reloading it only when the cache says "full" or "empty". */
#include "shm_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RING_MAGIC 0x474e524f494c4f46ull /* "FOLIORNG" read as little-endian */
#define RING_VERSION 1u
#define RING_HEADER_BYTES 4096u
/* 128, not 64: the adjacent-line prefetcher pulls lines in 128-byte pairs, so
 * 64-byte separation would still let head and tail ping-pong together. */
#define RING_LINE 128
#define RING_REC_HEADER 8u
#define RING_WRAP 0xffffffffu /* length of a wrap marker: the rest of the area is empty */
#define RING_NAME_MAX 250

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the ring needs lock-free 64-bit atomics");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the ring needs lock-free 32-bit atomics");

/* The header page, shared by every process that maps the ring. */
struct ring_header {
    /* Written once by the creator, magic last (release). */
    _Atomic uint64_t magic;
    uint32_t version;
    uint32_t header_bytes;
    uint64_t capacity;
    uint32_t max_record;
    uint32_t unused;
    /* The roles: written only at attach and close; read by the reader for
     * every record (writer_epoch), so kept away from the busy lines. */
    alignas(RING_LINE) _Atomic uint32_t writer_epoch;
    _Atomic int32_t writer_pid;
    _Atomic uint32_t reader_epoch;
    _Atomic int32_t reader_pid;
    /* The writer's line. reader_sleeping is the reader's futex word; it sits
     * here because the writer reads it after every commit. */
    alignas(RING_LINE) _Atomic uint64_t tail;
    _Atomic uint32_t reader_sleeping;
    /* The reader's line, mirrored. */
    alignas(RING_LINE) _Atomic uint64_t head;
    _Atomic uint32_t writer_sleeping;
};
_Static_assert(sizeof(struct ring_header) <= RING_HEADER_BYTES, "ring header exceeds its page");

struct folio_ring {
    char name[RING_NAME_MAX + 2];
    enum folio_ring_role role;
    int fd;
    struct ring_header *h;
    unsigned char *data;
    size_t map_bytes;
    uint64_t capacity, mask;
    uint32_t max_record;
    uint32_t epoch;
    uint64_t pos;    /* writer: its unpublished tail; reader: its head */
    uint64_t cached; /* writer: last head seen; reader: last tail seen */
    /* writer: the open reservation */
    bool reserved;
    uint64_t res_pos;
    uint32_t res_len;
    /* reader: the record in hand (its padded size), 0 when none */
    uint64_t peeked_total;
    struct folio_ring_stats stats;
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static uint64_t padded_total(uint32_t len)
{
    return RING_REC_HEADER + (((uint64_t)len + 7) & ~(uint64_t)7);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The absolute deadline of a wait; a timeout too long to add to the clock
 * (INT64_MAX, say) becomes "for ever" (-1) instead of an overflow. */
static int64_t deadline_of(int64_t *timeout_ns)
{
    if (*timeout_ns < 0)
        return 0;
    int64_t now = now_ns();
    if (*timeout_ns > INT64_MAX - now) {
        *timeout_ns = -1;
        return 0;
    }
    return now + *timeout_ns;
}

/* Shared (not FUTEX_PRIVATE): the word lives in memory mapped by two processes. */
static void futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t timeout_ns)
{
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tsp = &ts;
    }
    /* EINTR, EAGAIN (the word changed) and ETIMEDOUT all send the caller
     * back to re-check the ring, so the result is not needed. */
    (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, tsp, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
    (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Called right after publishing a position: wakes the peer only when it said
 * it sleeps. The fence orders our publish before the flag load, pairing with
 * the sleeper's fence between raising the flag and re-checking the ring. */
static void wake_peer(struct folio_ring *r, _Atomic uint32_t *sleeping)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(sleeping, memory_order_relaxed) &&
        atomic_exchange_explicit(sleeping, 0, memory_order_relaxed)) {
        futex_wake(sleeping);
        r->stats.wakes++;
    }
}

static int normalize_name(const char *name, char *out, char *err, size_t errlen)
{
    if (!name || !*name) {
        set_err(err, errlen, "ring name is empty");
        return -1;
    }
    const char *base = name[0] == '/' ? name + 1 : name;
    size_t n = strlen(base);
    if (n == 0) {
        set_err(err, errlen, "ring name \"%s\" is empty after its '/'", name);
        return -1;
    }
    if (n > RING_NAME_MAX) {
        set_err(err, errlen, "ring name is too long (%zu bytes, at most %d)", n, RING_NAME_MAX);
        return -1;
    }
    if (strchr(base, '/')) {
        set_err(err, errlen, "ring name \"%s\" has a '/' after its first character", name);
        return -1;
    }
    out[0] = '/';
    memcpy(out + 1, base, n + 1);
    return 0;
}

static const char *role_name(enum folio_ring_role role)
{
    switch (role) {
    case FOLIO_RING_WRITER:
        return "writer";
    case FOLIO_RING_READER:
        return "reader";
    default:
        return "owner";
    }
}

static int need_role(const struct folio_ring *r, enum folio_ring_role role, const char *fn,
                     char *err, size_t errlen)
{
    if (r->role == role)
        return 0;
    set_err(err, errlen, "ring %s: %s needs the %s handle, this one is the %s", r->name, fn,
            role_name(role), role_name(r->role));
    return -1;
}

int folio_ring_unlink(const char *name, char *err, size_t errlen)
{
    char path[RING_NAME_MAX + 2];
    if (normalize_name(name, path, err, errlen))
        return -1;
    if (shm_unlink(path) && errno != ENOENT) {
        set_err(err, errlen, "shm_unlink %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int folio_ring_create(const char *name, size_t capacity_bytes, struct folio_ring **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    char path[RING_NAME_MAX + 2];
    if (normalize_name(name, path, err, errlen))
        return -1;
    if (capacity_bytes > FOLIO_RING_MAX_CAPACITY) {
        set_err(err, errlen, "ring %s: capacity %zu bytes exceeds the maximum of %u", path,
                capacity_bytes, FOLIO_RING_MAX_CAPACITY);
        return -1;
    }
    uint64_t cap = FOLIO_RING_MIN_CAPACITY;
    while (cap < capacity_bytes)
        cap <<= 1;

    struct folio_ring *r = calloc(1, sizeof *r);
    if (!r) {
        set_err(err, errlen, "ring %s: out of memory", path);
        return -1;
    }
    strcpy(r->name, path);
    r->role = FOLIO_RING_OWNER;
    r->fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (r->fd < 0) {
        if (errno == EEXIST)
            set_err(err, errlen,
                    "ring %s already exists (left by a crashed run? folio_ring_unlink removes it)",
                    path);
        else
            set_err(err, errlen, "shm_open %s: %s", path, strerror(errno));
        free(r);
        return -1;
    }
    r->map_bytes = RING_HEADER_BYTES + cap;
    if (ftruncate(r->fd, (off_t)r->map_bytes)) {
        set_err(err, errlen, "ring %s: ftruncate to %zu bytes: %s", path, r->map_bytes,
                strerror(errno));
        goto fail;
    }
    void *map = mmap(NULL, r->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (map == MAP_FAILED) {
        set_err(err, errlen, "ring %s: mmap of %zu bytes: %s", path, r->map_bytes, strerror(errno));
        goto fail;
    }
    r->h = map;
    r->data = (unsigned char *)map + RING_HEADER_BYTES;
    r->capacity = cap;
    r->mask = cap - 1;
    r->max_record = (uint32_t)(cap / 2 - RING_REC_HEADER);
    /* ftruncate zero-filled the segment: positions, epochs and flags start at 0. */
    r->h->version = RING_VERSION;
    r->h->header_bytes = RING_HEADER_BYTES;
    r->h->capacity = cap;
    r->h->max_record = r->max_record;
    atomic_store_explicit(&r->h->magic, RING_MAGIC, memory_order_release);
    *out = r;
    return 0;
fail:
    shm_unlink(path);
    close(r->fd);
    free(r);
    return -1;
}

static int attach(const char *name, enum folio_ring_role role, struct folio_ring **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    char path[RING_NAME_MAX + 2];
    if (normalize_name(name, path, err, errlen))
        return -1;
    struct folio_ring *r = calloc(1, sizeof *r);
    if (!r) {
        set_err(err, errlen, "ring %s: out of memory", path);
        return -1;
    }
    strcpy(r->name, path);
    r->role = role;
    r->fd = shm_open(path, O_RDWR, 0);
    if (r->fd < 0) {
        set_err(err, errlen, "shm_open %s: %s", path, strerror(errno));
        free(r);
        return -1;
    }
    struct stat st;
    if (fstat(r->fd, &st)) {
        set_err(err, errlen, "ring %s: fstat: %s", path, strerror(errno));
        goto fail;
    }
    if (st.st_size < (off_t)RING_HEADER_BYTES) {
        set_err(err, errlen,
                "ring %s: segment of %lld bytes is smaller than the %u-byte header (not a Folio "
                "ring, or its creator has not finished)",
                path, (long long)st.st_size, RING_HEADER_BYTES);
        goto fail;
    }
    r->map_bytes = (size_t)st.st_size;
    void *map = mmap(NULL, r->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (map == MAP_FAILED) {
        set_err(err, errlen, "ring %s: mmap of %zu bytes: %s", path, r->map_bytes, strerror(errno));
        goto fail;
    }
    r->h = map;
    r->data = (unsigned char *)map + RING_HEADER_BYTES;
    struct ring_header *h = r->h;
    uint64_t magic = atomic_load_explicit(&h->magic, memory_order_acquire);
    if (magic != RING_MAGIC) {
        set_err(err, errlen,
                "ring %s: bad magic 0x%016llx (not a Folio ring, or its creator has not finished)",
                path, (unsigned long long)magic);
        goto fail_unmap;
    }
    if (h->version != RING_VERSION) {
        set_err(err, errlen, "ring %s: layout version %u, this build reads version %u", path,
                h->version, RING_VERSION);
        goto fail_unmap;
    }
    uint64_t cap = h->capacity;
    if (h->header_bytes != RING_HEADER_BYTES || cap < FOLIO_RING_MIN_CAPACITY ||
        cap > FOLIO_RING_MAX_CAPACITY || (cap & (cap - 1)) ||
        r->map_bytes != RING_HEADER_BYTES + cap || h->max_record != cap / 2 - RING_REC_HEADER) {
        set_err(err, errlen,
                "ring %s: inconsistent header (header %u bytes, capacity %llu, max record %u) for "
                "a segment of %zu bytes",
                path, h->header_bytes, (unsigned long long)cap, h->max_record, r->map_bytes);
        goto fail_unmap;
    }
    r->capacity = cap;
    r->mask = cap - 1;
    r->max_record = h->max_record;

    /* The role is a one-byte lock on the segment, owned by this open file
     * description: the kernel drops it when the holder exits or is killed. */
    struct flock fl = {.l_type = F_WRLCK,
                       .l_whence = SEEK_SET,
                       .l_start = role == FOLIO_RING_WRITER ? 0 : 1,
                       .l_len = 1};
    if (fcntl(r->fd, F_OFD_SETLK, &fl)) {
        if (errno == EAGAIN || errno == EACCES) {
            _Atomic int32_t *pid = role == FOLIO_RING_WRITER ? &h->writer_pid : &h->reader_pid;
            set_err(err, errlen, "ring %s already has a %s attached (pid %d)", path,
                    role_name(role), (int)atomic_load(pid));
        } else {
            set_err(err, errlen, "ring %s: locking the %s role: %s", path, role_name(role),
                    strerror(errno));
        }
        goto fail_unmap;
    }

    uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
    if (tail < head || tail - head > cap) {
        set_err(err, errlen, "ring %s: corrupt positions (head %llu, tail %llu, capacity %llu)",
                path, (unsigned long long)head, (unsigned long long)tail, (unsigned long long)cap);
        goto fail_unmap;
    }
    if (role == FOLIO_RING_WRITER) {
        /* The new epoch, taken before anything is written, makes every record
         * a previous writer published stale. Epoch 0 means "no writer". */
        uint32_t e;
        do
            e = atomic_fetch_add(&h->writer_epoch, 1) + 1;
        while (e == 0);
        r->epoch = e;
        atomic_store(&h->writer_pid, (int32_t)getpid());
        atomic_store(&h->writer_sleeping, 0);
        /* Continue from the published tail: whatever a killed writer left
         * beyond it was never visible and is overwritten. */
        r->pos = tail;
        r->cached = head;
    } else {
        r->epoch = atomic_fetch_add(&h->reader_epoch, 1) + 1;
        atomic_store(&h->reader_pid, (int32_t)getpid());
        atomic_store(&h->reader_sleeping, 0);
        r->pos = head;
        r->cached = tail;
    }
    *out = r;
    return 0;
fail_unmap:
    munmap(r->h, r->map_bytes);
fail:
    close(r->fd);
    free(r);
    return -1;
}

int folio_ring_attach_writer(const char *name, struct folio_ring **out, char *err, size_t errlen)
{
    return attach(name, FOLIO_RING_WRITER, out, err, errlen);
}

int folio_ring_attach_reader(const char *name, struct folio_ring **out, char *err, size_t errlen)
{
    return attach(name, FOLIO_RING_READER, out, err, errlen);
}

void folio_ring_close(struct folio_ring *r)
{
    if (!r)
        return;
    int32_t me = (int32_t)getpid();
    if (r->role == FOLIO_RING_WRITER)
        atomic_compare_exchange_strong(&r->h->writer_pid, &me, 0);
    else if (r->role == FOLIO_RING_READER)
        atomic_compare_exchange_strong(&r->h->reader_pid, &me, 0);
    munmap(r->h, r->map_bytes);
    close(r->fd); /* drops the role lock */
    if (r->role == FOLIO_RING_OWNER)
        shm_unlink(r->name);
    free(r);
}

/* ---- writer ------------------------------------------------------------- */

/* Bytes the next record of `total` bytes takes from the writer's position:
 * itself, plus the end of the area when it must wrap. */
static uint64_t bytes_needed(const struct folio_ring *r, uint64_t total)
{
    uint64_t rem = r->capacity - (r->pos & r->mask);
    return rem < total ? rem + total : total;
}

/* 1 fits, 0 full, -1 the reader published an impossible head. */
static int writer_fits(struct folio_ring *r, uint64_t need, char *err, size_t errlen)
{
    if (r->pos + need - r->cached <= r->capacity)
        return 1;
    uint64_t head = atomic_load_explicit(&r->h->head, memory_order_acquire);
    if (head > r->pos || r->pos - head > r->capacity) {
        set_err(err, errlen, "ring %s: corrupt head %llu (writer at %llu, capacity %llu)", r->name,
                (unsigned long long)head, (unsigned long long)r->pos,
                (unsigned long long)r->capacity);
        return -1;
    }
    r->cached = head;
    return r->pos + need - head <= r->capacity;
}

static int check_len(const struct folio_ring *r, uint32_t len, char *err, size_t errlen)
{
    if (len <= r->max_record)
        return 0;
    set_err(err, errlen, "ring %s: record of %u bytes exceeds the maximum of %u", r->name, len,
            r->max_record);
    return -1;
}

int folio_ring_reserve(struct folio_ring *r, uint32_t len, void **out, char *err, size_t errlen)
{
    *out = NULL;
    if (need_role(r, FOLIO_RING_WRITER, "reserve", err, errlen) || check_len(r, len, err, errlen))
        return -1;
    if (r->reserved) {
        set_err(err, errlen, "ring %s: reserve while a reservation is open (commit it first)",
                r->name);
        return -1;
    }
    uint64_t total = padded_total(len);
    int fits = writer_fits(r, bytes_needed(r, total), err, errlen);
    if (fits <= 0) {
        if (fits == 0)
            r->stats.full++;
        return fits;
    }
    uint64_t idx = r->pos & r->mask;
    uint64_t rem = r->capacity - idx;
    uint64_t at = r->pos;
    if (rem < total) {
        uint32_t *marker = (uint32_t *)(r->data + idx);
        marker[0] = RING_WRAP;
        marker[1] = r->epoch;
        at += rem;
    }
    r->reserved = true;
    r->res_pos = at;
    r->res_len = len;
    *out = r->data + (at & r->mask) + RING_REC_HEADER;
    return 1;
}

int folio_ring_commit(struct folio_ring *r, uint32_t len, char *err, size_t errlen)
{
    if (need_role(r, FOLIO_RING_WRITER, "commit", err, errlen))
        return -1;
    if (!r->reserved || len > r->res_len) {
        set_err(err, errlen, "ring %s: commit of %u bytes %s", r->name, len,
                r->reserved ? "exceeds the reservation" : "without a reservation");
        return -1;
    }
    uint32_t *rec = (uint32_t *)(r->data + (r->res_pos & r->mask));
    rec[0] = len;
    rec[1] = r->epoch;
    r->pos = r->res_pos + padded_total(len);
    r->reserved = false;
    /* The release store makes the record (and any wrap marker before it)
     * visible as a whole; nothing before this point is seen by the reader. */
    atomic_store_explicit(&r->h->tail, r->pos, memory_order_release);
    r->stats.records++;
    r->stats.bytes += len;
    wake_peer(r, &r->h->reader_sleeping);
    return 1;
}

int folio_ring_try_write(struct folio_ring *r, const void *data, uint32_t len, char *err,
                         size_t errlen)
{
    void *dst;
    int rc = folio_ring_reserve(r, len, &dst, err, errlen);
    if (rc <= 0)
        return rc;
    if (len)
        memcpy(dst, data, len);
    return folio_ring_commit(r, len, err, errlen);
}

int folio_ring_wait_space(struct folio_ring *r, uint32_t len, int64_t timeout_ns, char *err,
                          size_t errlen)
{
    if (need_role(r, FOLIO_RING_WRITER, "wait_space", err, errlen) ||
        check_len(r, len, err, errlen))
        return -1;
    uint64_t need = bytes_needed(r, padded_total(len));
    int64_t deadline = deadline_of(&timeout_ns);
    _Atomic uint32_t *sleeping = &r->h->writer_sleeping;
    for (;;) {
        int fits = writer_fits(r, need, err, errlen);
        if (fits)
            return fits;
        atomic_store(sleeping, 1);
        atomic_thread_fence(memory_order_seq_cst);
        fits = writer_fits(r, need, err, errlen);
        if (fits) {
            atomic_store(sleeping, 0);
            return fits;
        }
        int64_t left = -1;
        if (timeout_ns >= 0) {
            left = deadline - now_ns();
            if (left <= 0) {
                atomic_store(sleeping, 0);
                return 0;
            }
        }
        r->stats.sleeps++;
        futex_wait(sleeping, 1, left);
    }
}

/* ---- reader ------------------------------------------------------------- */

static void publish_head(struct folio_ring *r)
{
    atomic_store_explicit(&r->h->head, r->pos, memory_order_release);
    wake_peer(r, &r->h->writer_sleeping);
}

/* Moves the reader to the next record of the current writer epoch, past
 * wrap markers and stale records (whose space is handed back at once).
 * 1: a record starts at r->pos; 0: nothing published; -1: corrupt.
 * Only a record in hand (peeked) is exempt from the epoch check; one that
 * readable() or wait() merely saw is checked again by the next peek, since
 * a new writer may have attached in between. */
static int reader_next(struct folio_ring *r, char *err, size_t errlen)
{
    if (r->peeked_total)
        return 1;
    bool skipped = false;
    int rc;
    for (;;) {
        if (r->pos == r->cached) {
            uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_acquire);
            if (tail < r->pos || tail - r->pos > r->capacity) {
                set_err(err, errlen, "ring %s: corrupt tail %llu (reader at %llu, capacity %llu)",
                        r->name, (unsigned long long)tail, (unsigned long long)r->pos,
                        (unsigned long long)r->capacity);
                rc = -1;
                break;
            }
            r->cached = tail;
            if (r->pos == tail) {
                rc = 0;
                break;
            }
        }
        uint64_t idx = r->pos & r->mask;
        uint64_t avail = r->cached - r->pos;
        const uint32_t *rec = (const uint32_t *)(r->data + idx);
        uint32_t len = rec[0];
        if (len == RING_WRAP) {
            uint64_t rest = r->capacity - idx;
            if (rest > avail) {
                set_err(err, errlen, "ring %s: wrap marker at %llu crosses the tail", r->name,
                        (unsigned long long)r->pos);
                rc = -1;
                break;
            }
            r->pos += rest;
            skipped = true;
            continue;
        }
        uint64_t total = padded_total(len);
        if (len > r->max_record || total > avail || total > r->capacity - idx) {
            set_err(err, errlen,
                    "ring %s: corrupt record of %u bytes at %llu (%llu bytes published, max "
                    "record %u)",
                    r->name, len, (unsigned long long)r->pos, (unsigned long long)avail,
                    r->max_record);
            rc = -1;
            break;
        }
        /* Relaxed is enough: acquiring the tail that covers this record
         * already made its writer's epoch increment visible. */
        if (rec[1] != atomic_load_explicit(&r->h->writer_epoch, memory_order_relaxed)) {
            r->pos += total;
            r->stats.stale_dropped++;
            skipped = true;
            continue;
        }
        rc = 1;
        break;
    }
    if (skipped)
        publish_head(r);
    return rc;
}

int folio_ring_peek(struct folio_ring *r, struct folio_ring_record *rec, char *err, size_t errlen)
{
    if (need_role(r, FOLIO_RING_READER, "peek", err, errlen))
        return -1;
    int rc = reader_next(r, err, errlen);
    if (rc <= 0)
        return rc;
    const uint32_t *hdr = (const uint32_t *)(r->data + (r->pos & r->mask));
    r->peeked_total = padded_total(hdr[0]);
    rec->len = hdr[0];
    rec->epoch = hdr[1];
    rec->data = hdr + 2;
    return 1;
}

void folio_ring_release(struct folio_ring *r)
{
    if (r->role != FOLIO_RING_READER || !r->peeked_total)
        return;
    const uint32_t *hdr = (const uint32_t *)(r->data + (r->pos & r->mask));
    r->stats.records++;
    r->stats.bytes += hdr[0];
    r->pos += r->peeked_total;
    r->peeked_total = 0;
    publish_head(r);
}

int folio_ring_try_read(struct folio_ring *r, void *buf, uint32_t cap, uint32_t *len, char *err,
                        size_t errlen)
{
    struct folio_ring_record rec;
    int rc = folio_ring_peek(r, &rec, err, errlen);
    if (rc <= 0)
        return rc;
    *len = rec.len;
    if (rec.len > cap) {
        set_err(err, errlen, "ring %s: record of %u bytes does not fit the %u-byte buffer", r->name,
                rec.len, cap);
        return -1;
    }
    if (rec.len)
        memcpy(buf, rec.data, rec.len);
    folio_ring_release(r);
    return 1;
}

int folio_ring_readable(struct folio_ring *r, char *err, size_t errlen)
{
    if (need_role(r, FOLIO_RING_READER, "readable", err, errlen))
        return -1;
    return reader_next(r, err, errlen);
}

int folio_ring_wait(struct folio_ring *r, int64_t timeout_ns, char *err, size_t errlen)
{
    if (need_role(r, FOLIO_RING_READER, "wait", err, errlen))
        return -1;
    int64_t deadline = deadline_of(&timeout_ns);
    _Atomic uint32_t *sleeping = &r->h->reader_sleeping;
    for (;;) {
        int rc = reader_next(r, err, errlen);
        if (rc)
            return rc;
        /* Announce the sleep, then look again: a commit that missed the flag
         * is seen here; one that comes later sees the flag and wakes us. */
        atomic_store(sleeping, 1);
        atomic_thread_fence(memory_order_seq_cst);
        rc = reader_next(r, err, errlen);
        if (rc) {
            atomic_store(sleeping, 0);
            return rc;
        }
        int64_t left = -1;
        if (timeout_ns >= 0) {
            left = deadline - now_ns();
            if (left <= 0) {
                atomic_store(sleeping, 0);
                return 0;
            }
        }
        r->stats.sleeps++;
        futex_wait(sleeping, 1, left);
    }
}

/* ---- introspection ------------------------------------------------------ */

const char *folio_ring_name(const struct folio_ring *r)
{
    return r->name;
}

enum folio_ring_role folio_ring_role(const struct folio_ring *r)
{
    return r->role;
}

size_t folio_ring_capacity(const struct folio_ring *r)
{
    return (size_t)r->capacity;
}

uint32_t folio_ring_max_record(const struct folio_ring *r)
{
    return r->max_record;
}

uint32_t folio_ring_epoch(const struct folio_ring *r)
{
    return r->epoch;
}

uint32_t folio_ring_writer_epoch(const struct folio_ring *r)
{
    return atomic_load(&r->h->writer_epoch);
}

/* The recorded pid, or 0 when the role's lock is free (its holder died
 * without closing). Our own role's lock does not conflict with us. */
static int role_pid(const struct folio_ring *r, enum folio_ring_role role, _Atomic int32_t *pid)
{
    if (r->role == role)
        return (int)getpid();
    struct flock fl = {.l_type = F_WRLCK,
                       .l_whence = SEEK_SET,
                       .l_start = role == FOLIO_RING_WRITER ? 0 : 1,
                       .l_len = 1};
    if (fcntl(r->fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK)
        return 0;
    return (int)atomic_load(pid);
}

int folio_ring_writer_pid(const struct folio_ring *r)
{
    return role_pid(r, FOLIO_RING_WRITER, &r->h->writer_pid);
}

int folio_ring_reader_pid(const struct folio_ring *r)
{
    return role_pid(r, FOLIO_RING_READER, &r->h->reader_pid);
}

size_t folio_ring_used_bytes(const struct folio_ring *r)
{
    uint64_t head = atomic_load_explicit(&r->h->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_acquire);
    return tail >= head ? (size_t)(tail - head) : 0;
}

void folio_ring_get_stats(const struct folio_ring *r, struct folio_ring_stats *s)
{
    *s = r->stats;
}
