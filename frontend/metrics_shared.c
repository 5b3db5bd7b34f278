#include "metrics_shared.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "program_flags.h"

#define BLOCK_MAGIC 0x464d4554u /* "FMET" */

/* One frontend's counters. seq is odd while the owner writes. The copy keeps
 * the owner's name and help pointers, which mean nothing to other processes:
 * only numbers are read back. */
struct slot {
    uint64_t seq;
    uint32_t in_use;
    uint32_t layout; /* sizeof(struct folio_metrics) of the writer */
    struct folio_metrics m;
};

struct shared_block {
    uint32_t magic, num_slots;
    uint32_t id, pad;
    struct slot slots[FOLIO_MAX_FRONTENDS];
};

/* This process's handle on the block. */
struct folio_metrics_block {
    struct shared_block *shm;
    double published_at;
};

struct folio_metrics_block *folio_metrics_block_attach(const char *name, uint32_t id,
                                                       struct folio_metrics *m, char *err,
                                                       size_t errlen)
{
    if (id >= FOLIO_MAX_FRONTENDS) {
        snprintf(err, errlen, "frontend id %u has no metrics slot", id);
        return NULL;
    }
    int fd = shm_open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "shm_open %s: %s", name, strerror(errno));
        return NULL;
    }
    /* Every frontend sizes it the same; a new segment reads as zeros. */
    size_t size = sizeof(struct shared_block);
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && ((size_t)st.st_size == size || ftruncate(fd, (off_t)size) == 0))
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "map %s: %s", name, strerror(errno));
        return NULL;
    }
    struct shared_block *b = p;
    struct folio_metrics_block *h = malloc(sizeof *h);
    if (!h) {
        munmap(p, size);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->shm = b;
    h->published_at = 0;
    uint32_t zero = 0;
    __atomic_compare_exchange_n(&b->magic, &zero, BLOCK_MAGIC, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) != BLOCK_MAGIC) {
        munmap(p, size);
        free(h);
        snprintf(err, errlen, "%s is not a Folio metrics block", name);
        return NULL;
    }
    struct slot *s = &b->slots[id];
    if (__atomic_load_n(&s->in_use, __ATOMIC_ACQUIRE) && s->layout == sizeof *m) {
        /* A predecessor's counters: go on from them. */
        int64_t in_flight = m->requests_in_flight;
        struct folio_histogram h[4] = {m->ttft, m->itl, m->e2e, m->queue};
        struct folio_histogram r[2] = {m->request_prompt_tokens, m->request_generation_tokens};
        *m = s->m;
        m->requests_in_flight = in_flight;
        /* names and help strings are this process's */
        struct folio_histogram *dst[6] = {&m->ttft,
                                          &m->itl,
                                          &m->e2e,
                                          &m->queue,
                                          &m->request_prompt_tokens,
                                          &m->request_generation_tokens};
        struct folio_histogram *src[6] = {&h[0], &h[1], &h[2], &h[3], &r[0], &r[1]};
        for (int i = 0; i < 6; i++) {
            dst[i]->name = src[i]->name;
            dst[i]->help = src[i]->help;
        }
    }
    b->id = id; /* informational only */
    s->layout = sizeof *m;
    folio_metrics_block_publish(h, m);
    __atomic_store_n(&s->in_use, 1, __ATOMIC_RELEASE);
    return h;
}

void folio_metrics_block_detach(struct folio_metrics_block *b)
{
    if (!b)
        return;
    munmap(b->shm, sizeof *b->shm);
    free(b);
}

bool folio_metrics_block_due(const struct folio_metrics_block *b)
{
    return b && folio_mono_s() - b->published_at >= FOLIO_METRICS_PUBLISH_S;
}

void folio_metrics_block_publish(struct folio_metrics_block *b, const struct folio_metrics *m)
{
    if (!b)
        return;
    b->published_at = folio_mono_s();
    struct slot *s = &b->shm->slots[m->frontend_id];
    uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(&s->m, m, sizeof *m);
    __atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
}

/* A consistent copy of a slot another process writes (seqlock reader). */
static bool read_slot(const struct slot *s, struct folio_metrics *out)
{
    for (int tries = 0; tries < 1000; tries++) {
        uint64_t a = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        if (a & 1)
            continue;
        memcpy(out, &s->m, sizeof *out);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) == a)
            return true;
    }
    return false;
}

static void add_hist(struct folio_histogram *to, const struct folio_histogram *h)
{
    for (int i = 0; i <= to->num_bounds; i++)
        to->counts[i] += h->counts[i];
    to->sum += h->sum;
    to->count += h->count;
}

static void add_metrics(struct folio_metrics *to, const struct folio_metrics *o)
{
    for (int i = 0; i < FOLIO_METRICS_STATUSES; i++)
        to->responses[i] += o->responses[i];
    to->requests_submitted += o->requests_submitted;
    to->finished_stop += o->finished_stop;
    to->finished_length += o->finished_length;
    to->finished_abort += o->finished_abort;
    to->finished_error += o->finished_error;
    to->finished_rejected += o->finished_rejected;
    to->prompt_tokens += o->prompt_tokens;
    to->generation_tokens += o->generation_tokens;
    to->client_disconnects += o->client_disconnects;
    to->requests_in_flight += o->requests_in_flight;
    to->admit_seconds += o->admit_seconds;
    to->events_seconds += o->events_seconds;
    to->cpu_seconds += o->cpu_seconds;
    add_hist(&to->ttft, &o->ttft);
    add_hist(&to->itl, &o->itl);
    add_hist(&to->e2e, &o->e2e);
    add_hist(&to->queue, &o->queue);
    add_hist(&to->request_prompt_tokens, &o->request_prompt_tokens);
    add_hist(&to->request_generation_tokens, &o->request_generation_tokens);
}

/* Whether a is a newer StatusReply than b: a later scheduler's (an epoch is
 * its start in ms, compared modulo 2^32) or the same one's later reply. A
 * status never received (seq 0) is never the newer. */
static bool status_newer(const struct folio_link_status *a, const struct folio_link_status *b)
{
    if (a->status_seq == 0 || b->status_seq == 0)
        return b->status_seq == 0 && a->status_seq != 0;
    if (a->status_epoch != b->status_epoch)
        return (int32_t)(a->status_epoch - b->status_epoch) > 0;
    return a->status_seq > b->status_seq;
}

void folio_metrics_block_total(struct folio_metrics_block *b, const struct folio_metrics *m,
                               struct folio_metrics *out)
{
    *out = *m;
    if (!b)
        return;
    folio_metrics_block_publish(b, m);
    /* Every frontend adds the slots in the same order, its own in its place,
     * so that floating-point sums of the same counts are the same numbers. */
    folio_metrics_init(out, m->frontend_id);
    out->sched = m->sched;
    for (uint32_t id = 0; id < FOLIO_MAX_FRONTENDS; id++) {
        const struct slot *s = &b->shm->slots[id];
        struct folio_metrics o;
        if (id == m->frontend_id) {
            add_metrics(out, m);
            continue;
        }
        if (!__atomic_load_n(&s->in_use, __ATOMIC_ACQUIRE) || s->layout != sizeof o ||
            !read_slot(s, &o))
            continue;
        add_metrics(out, &o);
        if (status_newer(&o.sched, &out->sched))
            out->sched = o.sched;
    }
    out->sched.valid = m->sched.valid; /* whether this frontend hears the scheduler */
}
