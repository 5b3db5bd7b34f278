/* The frontends' counters in one shared-memory block, so that a scrape of
 * any frontend gives the whole server's figures. With SO_REUSEPORT a scraper
 * reaches whichever frontend the kernel picks; if each answered with its own
 * counters, `--frontends 2` would make every counter jump back and forth.
 * Each frontend owns one slot (its --frontend-id) and publishes its own
 * counters there under a sequence lock; /metrics sums every slot in use.
 * A slot outlives its process, so a restarted frontend continues its
 * predecessor's counters and the sums never go backwards. (The block is
 * named after the instance; `folio serve` removes it with the rest.)
 *
 * The scheduler's counters go the same way: each slot also holds the latest
 * StatusReply its frontend got, and a scrape renders the newest of them (by
 * the scheduler's epoch and its count of replies), after publishing its own.
 * A scrape is thus never older than one answered before it by any frontend,
 * and the counters of one scheduler only grow; a restarted scheduler starts
 * its own from zero, once, as any restarted Prometheus target does. A scrape
 * that asked the scheduler for a fresh status would hold this frontend's
 * loop (every stream it serves) for a round trip, and its fallback on a
 * timeout, a cached status, would go backwards again. */
#ifndef FOLIO_METRICS_SHARED_H
#define FOLIO_METRICS_SHARED_H

#include <stdbool.h>

#include "metrics.h"

struct folio_metrics_block;

/* Maps (creating when needed) the block named name and takes slot id; when
 * the slot holds a predecessor's counters they are loaded into m (its
 * in-flight gauge excepted). NULL when shared memory is not available (the
 * caller then reports its own counters alone). */
struct folio_metrics_block *folio_metrics_block_attach(const char *name, uint32_t id,
                                                       struct folio_metrics *m, char *err,
                                                       size_t errlen);
void folio_metrics_block_detach(struct folio_metrics_block *b);

/* Copies m into this frontend's slot. */
void folio_metrics_block_publish(struct folio_metrics_block *b, const struct folio_metrics *m);

/* Whether this frontend's slot is FOLIO_METRICS_PUBLISH_S old: the HTTP loop
 * asks on every turn and then publishes, so other frontends' scrapes may lag
 * this one by that much (never backwards: a slot only grows). False for NULL. */
#define FOLIO_METRICS_PUBLISH_S 0.05
bool folio_metrics_block_due(const struct folio_metrics_block *b);

/* out = the sum of every slot in use (m's names and bounds), with the newest
 * scheduler status of any slot but m's own `valid` (whether this frontend
 * hears the scheduler now); m itself when b is NULL. Publishes m first, so
 * that the total never lags this frontend. */
void folio_metrics_block_total(struct folio_metrics_block *b, const struct folio_metrics *m,
                               struct folio_metrics *out);

#endif
