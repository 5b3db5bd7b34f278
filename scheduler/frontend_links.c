#include "frontend_links.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "shm_ring.h"

struct backlog_rec {
    struct backlog_rec *next;
    uint32_t len;
    uint64_t data[]; /* 8-byte aligned record */
};

static struct frontend_link *find(struct folio_frontend_links *l, uint32_t id)
{
    for (int i = 0; i < FOLIO_MAX_FRONTENDS; i++)
        if (l->links[i].used && l->links[i].id == id)
            return &l->links[i];
    return NULL;
}

bool folio_links_known(const struct folio_frontend_links *l, uint32_t id)
{
    return find((struct folio_frontend_links *)l, id) != NULL;
}

static void link_clear(struct frontend_link *k)
{
    while (k->head) {
        struct backlog_rec *r = k->head;
        k->head = r->next;
        free(r);
    }
    k->tail = NULL;
    k->backlog_bytes = 0;
    folio_ring_close(k->ring);
    k->ring = NULL;
    k->used = false;
}

void folio_links_remove(struct folio_frontend_links *l, uint32_t id)
{
    struct frontend_link *k = find(l, id);
    if (k)
        link_clear(k);
}

bool folio_links_same_process(const struct folio_frontend_links *l, uint32_t id, uint32_t pid,
                              uint32_t epoch)
{
    const struct frontend_link *k = find((struct folio_frontend_links *)l, id);
    return k && k->pid == pid && k->epoch == epoch;
}

int folio_links_register(struct folio_frontend_links *l, uint32_t id, uint32_t pid, uint32_t epoch,
                         const char *ring_name, char *err, size_t errlen)
{
    struct folio_ring *ring;
    /* The old link first: its writer role must be free for the new attach. */
    folio_links_remove(l, id);
    if (folio_ring_attach_writer(ring_name, &ring, err, errlen) != 0)
        return -1;
    for (int i = 0; i < FOLIO_MAX_FRONTENDS; i++) {
        struct frontend_link *k = &l->links[i];
        if (!k->used) {
            memset(k, 0, sizeof *k);
            k->used = true;
            k->id = id;
            k->pid = pid;
            k->epoch = epoch;
            k->ring = ring;
            return 0;
        }
    }
    folio_ring_close(ring);
    snprintf(err, errlen, "too many frontends (at most %d)", FOLIO_MAX_FRONTENDS);
    return -1;
}

/* memcpy that accepts an empty NULL source (memcpy itself must not get NULL). */
static char *put(char *p, const void *src, size_t len)
{
    if (len)
        memcpy(p, src, len);
    return p + len;
}

static void encode_event(void *dst, const struct folio_token_event *ev, uint32_t msg_len)
{
    struct folio_event_header *h = dst;
    uint32_t n = (uint32_t)ev->num_tokens, top = (uint32_t)ev->num_top;
    *h = (struct folio_event_header){.magic = FOLIO_EVENT_MAGIC,
                                     .num_tokens = n,
                                     .request_id = ev->request_id,
                                     .finish_reason = ev->finish,
                                     .status = ev->status,
                                     .prompt_tokens = ev->prompt_tokens,
                                     .completion_tokens = ev->completion_tokens,
                                     .cached_tokens = ev->cached_tokens,
                                     .num_top = top,
                                     .message_len = msg_len,
                                     .retry_after_s = ev->retry_after_s,
                                     .num_prompt_lp = (uint32_t)ev->num_prompt_lp};
    char *p = (char *)(h + 1);
    p = put(p, ev->token_ids, n * 4u);
    p = put(p, ev->logprobs, n * 4u);
    p = put(p, ev->top_ids, (size_t)n * top * 4u);
    p = put(p, ev->top_logprobs, (size_t)n * top * 4u);
    uint32_t np = (uint32_t)ev->num_prompt_lp;
    p = put(p, ev->prompt_ids, np * 4u);
    p = put(p, ev->prompt_logprobs, np * 4u);
    p = put(p, ev->prompt_top_ids, (size_t)np * top * 4u);
    p = put(p, ev->prompt_top_logprobs, (size_t)np * top * 4u);
    put(p, ev->message, msg_len);
}

/* 1 written, 0 ring full, -1 error. */
static int ring_put(struct frontend_link *k, const void *rec, uint32_t len)
{
    char err[256];
    int rc = folio_ring_try_write(k->ring, rec, len, err, sizeof err);
    if (rc < 0)
        folio_log_error(0, "frontend %u: event ring: %s", k->id, err);
    return rc;
}

void folio_links_send(struct folio_frontend_links *l, const struct folio_token_event *ev)
{
    struct frontend_link *k = find(l, ev->frontend_id);
    if (!k) {
        l->dropped_unknown++;
        folio_log_warn(ev->request_id, "event for frontend %u, which is not registered",
                       ev->frontend_id);
        return;
    }
    uint32_t msg_len = ev->message ? (uint32_t)strlen(ev->message) : 0;
    size_t len = folio_event_size((uint32_t)ev->num_tokens, (uint32_t)ev->num_top,
                                  (uint32_t)ev->num_prompt_lp, msg_len);
    k->events++;
    if (!k->head) {
        void *dst;
        char err[256];
        int rc = folio_ring_reserve(k->ring, (uint32_t)len, &dst, err, sizeof err);
        if (rc == 1) {
            encode_event(dst, ev, msg_len);
            folio_ring_commit(k->ring, (uint32_t)len, err, sizeof err);
            return;
        }
        if (rc < 0) {
            folio_log_error(ev->request_id, "frontend %u: event ring: %s", k->id, err);
            return;
        }
    }
    struct backlog_rec *r = malloc(sizeof *r + len + 8);
    if (!r) {
        folio_log_error(ev->request_id, "frontend %u: out of memory for the event backlog", k->id);
        return;
    }
    r->next = NULL;
    r->len = (uint32_t)len;
    encode_event(r->data, ev, msg_len);
    if (k->tail)
        k->tail->next = r;
    else
        k->head = r;
    k->tail = r;
    k->backlog_bytes += len;
    k->backlogged++;
}

void folio_links_flush(struct folio_frontend_links *l)
{
    for (int i = 0; i < FOLIO_MAX_FRONTENDS; i++) {
        struct frontend_link *k = &l->links[i];
        while (k->used && k->head) {
            struct backlog_rec *r = k->head;
            int rc = ring_put(k, r->data, r->len);
            if (rc == 0)
                break;
            k->head = r->next;
            if (!k->head)
                k->tail = NULL;
            k->backlog_bytes -= r->len;
            free(r);
        }
    }
}

bool folio_links_pending(const struct folio_frontend_links *l)
{
    for (int i = 0; i < FOLIO_MAX_FRONTENDS; i++)
        if (l->links[i].used && l->links[i].head)
            return true;
    return false;
}

bool folio_links_over_bound(const struct folio_frontend_links *l)
{
    for (int i = 0; i < FOLIO_MAX_FRONTENDS; i++)
        if (l->links[i].used && l->links[i].backlog_bytes > FOLIO_FRONTEND_BACKLOG_BYTES)
            return true;
    return false;
}

int folio_links_dead(const struct folio_frontend_links *l, uint32_t *ids, int max)
{
    int n = 0;
    for (int i = 0; i < FOLIO_MAX_FRONTENDS && n < max; i++) {
        const struct frontend_link *k = &l->links[i];
        if (k->used && k->head && folio_ring_reader_pid(k->ring) == 0)
            ids[n++] = k->id;
    }
    return n;
}

void folio_links_close_all(struct folio_frontend_links *l)
{
    for (int i = 0; i < FOLIO_MAX_FRONTENDS; i++)
        if (l->links[i].used)
            link_clear(&l->links[i]);
}
