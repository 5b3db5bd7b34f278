/* A single-producer single-consumer ring of variable-length records in POSIX
 * shared memory (shm_open + mmap): the data plane between Folio's processes
 * (scheduler -> worker step plans, worker -> scheduler results, scheduler ->
 * frontend token events).
 *
 * Layout of the segment: one 4 KiB header page, then the data area (a power
 * of two bytes). The header holds the magic, version and capacity, the
 * writer's and reader's epochs and pids, the tail (written by the writer) and
 * the head (written by the reader) on separate 128-byte lines. Records are
 * { u32 length, u32 epoch } followed by the payload, padded to 8 bytes, and
 * never split: a record that does not fit before the end of the data area is
 * preceded by a wrap marker and placed at the start. Payloads are 8-byte
 * aligned. The largest payload is folio_ring_max_record() = capacity/2 - 8,
 * which always fits once the reader has caught up.
 *
 * Roles and restarts. At most one writer and one reader are attached at a
 * time; each role is an open-file-description lock on the segment, so the
 * kernel frees it when its holder dies, whatever the pid namespace.
 * - Each writer attach increments the writer epoch in the header, and every
 *   record carries the epoch of the writer that wrote it. The reader consumes
 *   only records of the current writer epoch: when a writer is restarted, the
 *   records its predecessor published but the reader had not yet read are
 *   dropped (counted in stats.stale_dropped), never delivered.
 * - The tail is published (release) only after a record is complete, so a
 *   writer killed mid-write leaves nothing visible; the next writer continues
 *   from the published tail and overwrites the unpublished space.
 * - The head is published when a record is released. A reader killed after
 *   peek and before release sees that record again when restarted: delivery
 *   is at-least-once for the record in hand, exactly-once otherwise.
 * - A writer that closes cleanly leaves its records current; the reader still
 *   consumes them until another writer attaches.
 *
 * Wake-ups. The reader sleeps on a futex in the header only when the ring is
 * empty, after raising a "reader sleeping" flag; the writer calls FUTEX_WAKE
 * only when it finds the flag raised, so a busy ring makes no system call.
 * The same protocol, mirrored, lets a writer wait for space when the ring is
 * full (back-pressure: try_write says "full", nothing is ever dropped).
 *
 * Event loops. folio_ring_readable() is a cheap check with no system call.
 * A single-threaded loop that also waits on sockets either (a) polls its
 * sockets with a short timeout (about 1 ms) while it has work in flight and
 * checks folio_ring_readable() on every turn, or (b) runs one thread that
 * blocks in folio_ring_wait() and hands records (or a wake-up) to the loop
 * through the loop's own notification mechanism.
 *
 * Return values: the try functions return 1 (done), 0 (empty / full), -1
 * (error, with a message in err). Create and attach return 0 or -1. None of
 * the functions is thread-safe on one handle; one thread per role. */
#ifndef FOLIO_SHM_RING_H
#define FOLIO_SHM_RING_H

#include <stddef.h>
#include <stdint.h>

struct folio_ring;

enum folio_ring_role { FOLIO_RING_OWNER = 0, FOLIO_RING_WRITER, FOLIO_RING_READER };

#define FOLIO_RING_MIN_CAPACITY 4096u
#define FOLIO_RING_MAX_CAPACITY (1u << 30)

/* A record handed out by folio_ring_peek: valid until folio_ring_release. */
struct folio_ring_record {
    const void *data; /* 8-byte aligned, inside the shared mapping */
    uint32_t len;
    uint32_t epoch; /* the writer epoch that wrote it (always the current one) */
};

/* Counters of this handle (not shared, reset by attach). */
struct folio_ring_stats {
    uint64_t records;       /* written (writer) or released (reader) */
    uint64_t bytes;         /* payload bytes of those records */
    uint64_t stale_dropped; /* reader: records of a replaced writer skipped */
    uint64_t full;          /* writer: reserve attempts that found the ring full */
    uint64_t sleeps;        /* futex waits entered */
    uint64_t wakes;         /* futex wakes sent to the peer */
};

/* Creates the segment `name` ("/folio-x" or "folio-x"; at most 250 bytes, no
 * other '/'), capacity_bytes rounded up to a power of two within
 * [FOLIO_RING_MIN_CAPACITY, FOLIO_RING_MAX_CAPACITY]. Fails if the name
 * exists: a segment left by a crashed run is removed with folio_ring_unlink.
 * The returned owner handle holds no role; closing it unlinks the name
 * (attached processes keep their mappings until they close). */
int folio_ring_create(const char *name, size_t capacity_bytes, struct folio_ring **out, char *err,
                      size_t errlen);

/* Attaches to an existing segment as its writer (a new epoch; fails while
 * another writer is attached) or its reader (continues from the published
 * head; fails while another reader is attached). Checks magic, version and
 * sizes, so a foreign or truncated segment is an error. */
int folio_ring_attach_writer(const char *name, struct folio_ring **out, char *err, size_t errlen);
int folio_ring_attach_reader(const char *name, struct folio_ring **out, char *err, size_t errlen);

/* Unmaps and gives up the role; the owner handle also unlinks the name.
 * NULL is accepted. */
void folio_ring_close(struct folio_ring *r);

/* Removes the name; 0 also when it did not exist. */
int folio_ring_unlink(const char *name, char *err, size_t errlen);

/* ---- writer ------------------------------------------------------------- */

/* Zero-copy write: reserve room for a payload of up to len bytes, fill *out,
 * then commit the bytes actually written (<= len). Nothing is visible to the
 * reader before commit. Returns 1 reserved, 0 full, -1 len too large or a
 * reservation already open. */
int folio_ring_reserve(struct folio_ring *r, uint32_t len, void **out, char *err, size_t errlen);
int folio_ring_commit(struct folio_ring *r, uint32_t len, char *err, size_t errlen);

/* Copying write built on reserve/commit: 1 written, 0 full, -1 error. */
int folio_ring_try_write(struct folio_ring *r, const void *data, uint32_t len, char *err,
                         size_t errlen);

/* Waits until a payload of len bytes fits (1), timeout_ns passes (0; a
 * negative timeout waits for ever) or len can never fit (-1). */
int folio_ring_wait_space(struct folio_ring *r, uint32_t len, int64_t timeout_ns, char *err,
                          size_t errlen);

/* ---- reader ------------------------------------------------------------- */

/* Zero-copy read: the oldest current record stays in place until released.
 * Peeking again before release returns the same record. Returns 1 record,
 * 0 empty, -1 corrupt ring (a length or position no writer could publish). */
int folio_ring_peek(struct folio_ring *r, struct folio_ring_record *rec, char *err, size_t errlen);
void folio_ring_release(struct folio_ring *r);

/* Copying read built on peek/release: 1 read (*len set), 0 empty, -1 error.
 * A record larger than cap stays in the ring, *len says its size. */
int folio_ring_try_read(struct folio_ring *r, void *buf, uint32_t cap, uint32_t *len, char *err,
                        size_t errlen);

/* 1 when a current record is ready, 0 when not, -1 corrupt ring. No system
 * call; it discards stale records and wrap markers on the way. */
int folio_ring_readable(struct folio_ring *r, char *err, size_t errlen);

/* Waits until a record is ready (1), timeout_ns passes (0; negative waits
 * for ever) or the ring is corrupt (-1). Sleeps on the futex, without
 * spinning first. */
int folio_ring_wait(struct folio_ring *r, int64_t timeout_ns, char *err, size_t errlen);

/* ---- introspection ------------------------------------------------------ */

const char *folio_ring_name(const struct folio_ring *r);
enum folio_ring_role folio_ring_role(const struct folio_ring *r);
size_t folio_ring_capacity(const struct folio_ring *r);
uint32_t folio_ring_max_record(const struct folio_ring *r);
/* Writer handle: its own epoch. Reader handle: its own (reader) epoch. */
uint32_t folio_ring_epoch(const struct folio_ring *r);
/* The current writer epoch in the shared header (0: no writer ever attached). */
uint32_t folio_ring_writer_epoch(const struct folio_ring *r);
/* Pid of the attached writer / reader as they recorded it, 0 when none. */
int folio_ring_writer_pid(const struct folio_ring *r);
int folio_ring_reader_pid(const struct folio_ring *r);
/* Bytes published and not yet released (records, padding, markers). */
size_t folio_ring_used_bytes(const struct folio_ring *r);
void folio_ring_get_stats(const struct folio_ring *r, struct folio_ring_stats *s);

#endif
