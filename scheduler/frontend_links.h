/* The frontends registered with the scheduler, and the token-event ring of
 * each (the frontend creates and reads it; the scheduler attaches as its
 * writer). An event that does not fit because the ring is full waits in the
 * frontend's backlog and is retried on every turn of the loop, in order:
 * nothing is dropped. A backlog past its bound makes the scheduler stop
 * planning until it drains (back-pressure reaches the worker, not memory). */
#ifndef FOLIO_FRONTEND_LINKS_H
#define FOLIO_FRONTEND_LINKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define FOLIO_MAX_FRONTENDS 256
#define FOLIO_FRONTEND_BACKLOG_BYTES (8u << 20)

struct backlog_rec;

struct frontend_link {
    bool used;
    uint32_t id;
    uint32_t pid;
    uint32_t epoch; /* the frontend process's own (Register.epoch) */
    struct folio_ring *ring;
    struct backlog_rec *head, *tail;
    size_t backlog_bytes;
    uint64_t events, backlogged;
};

struct folio_frontend_links {
    struct frontend_link links[FOLIO_MAX_FRONTENDS];
    uint64_t dropped_unknown; /* events for a frontend that is not registered */
};

/* Attaches to ring_name as its writer (a new epoch): a frontend that
 * registers again replaces its old link, whose backlog is discarded (its
 * reader is gone with the old process). Returns 0 or -1. */
int folio_links_register(struct folio_frontend_links *l, uint32_t id, uint32_t pid, uint32_t epoch,
                         const char *ring_name, char *err, size_t errlen);
/* Whether frontend id is registered as this very process (pid and epoch):
 * one that registers again after a StatusReply it missed, whose requests
 * and ring are still there. */
bool folio_links_same_process(const struct folio_frontend_links *l, uint32_t id, uint32_t pid,
                              uint32_t epoch);
void folio_links_remove(struct folio_frontend_links *l, uint32_t id);
bool folio_links_known(const struct folio_frontend_links *l, uint32_t id);

/* Encodes the event and writes it to its frontend's ring, or to the backlog. */
void folio_links_send(struct folio_frontend_links *l, const struct folio_token_event *ev);
/* Retries the backlogs. */
void folio_links_flush(struct folio_frontend_links *l);
bool folio_links_pending(const struct folio_frontend_links *l);
bool folio_links_over_bound(const struct folio_frontend_links *l);
/* Frontends whose ring has lost its reader while events wait: the process is
 * gone. Fills ids, returns how many. */
int folio_links_dead(const struct folio_frontend_links *l, uint32_t *ids, int max);
void folio_links_close_all(struct folio_frontend_links *l);

#endif
