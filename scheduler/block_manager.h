/* The scheduler's view of the worker's paged KV pool: which 16-token blocks
 * are free, who holds each one (reference counts), and which hold a known
 * prefix (the prefix cache).
 *
 * Prefix caching. A full block's identity is a hash chain over the tokens:
 * h(i) = hash(h(i-1), tokens of block i), with h(-1) = 0, so two sequences
 * share block i only when all their tokens up to the end of block i agree.
 * The table keeps the parent hash and the 16 tokens too and compares them on
 * lookup, so a 64-bit hash collision cannot hand out the wrong KV. A request
 * whose prompt starts with cached blocks takes a reference to them, copy-free.
 *
 * Free blocks keep their contents and their hash until they are reused: the
 * free list is an LRU queue, blocks without a hash at its front (reused
 * first), cached blocks appended at its back when their last reference goes,
 * so the least recently used cached prefix is the first to be evicted. */
#ifndef FOLIO_BLOCK_MANAGER_H
#define FOLIO_BLOCK_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "kv_block.h"

struct folio_block_manager;

struct folio_block_stats {
    int num_blocks;
    int num_free;   /* reference count 0 (cached or not) */
    int num_cached; /* holding a registered hash (in use or free) */
    uint64_t evictions;
};

struct folio_block_manager *folio_bm_create(int num_blocks);
void folio_bm_destroy(struct folio_block_manager *bm);

/* Forgets every block's contents and references: all free, nothing cached
 * (a new worker's KV pool holds nothing). */
void folio_bm_reset(struct folio_block_manager *bm);

int folio_bm_num_free(const struct folio_block_manager *bm);
void folio_bm_stats(const struct folio_block_manager *bm, struct folio_block_stats *s);

/* Takes the least recently used free block (evicting its hash) with one
 * reference; -1 when none is free. */
int folio_bm_alloc(struct folio_block_manager *bm);
/* One more reference to block b (taking it off the free list if it was free). */
void folio_bm_ref(struct folio_block_manager *bm, int b);
/* One reference less; at zero the block goes to the free list. */
void folio_bm_release(struct folio_block_manager *bm, int b);
int folio_bm_refcount(const struct folio_block_manager *bm, int b);

/* The chain hash of a full block whose predecessor hashed to parent. */
uint64_t folio_bm_hash(uint64_t parent, const int32_t tokens[FOLIO_KV_BLOCK_SIZE]);

/* The block caching (parent, tokens), whose hash is h; -1 when none. */
int folio_bm_lookup(const struct folio_block_manager *bm, uint64_t h, uint64_t parent,
                    const int32_t tokens[FOLIO_KV_BLOCK_SIZE]);

/* Records that block b (held, full, its KV written or being written by a step
 * already planned) caches (parent, tokens) with hash h. Returns false when
 * another block already caches it, or b already caches something: b then
 * stays as it is. */
bool folio_bm_register(struct folio_block_manager *bm, int b, uint64_t h, uint64_t parent,
                       const int32_t tokens[FOLIO_KV_BLOCK_SIZE]);

#endif
