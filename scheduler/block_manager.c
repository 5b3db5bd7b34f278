#include "block_manager.h"

#include <stdlib.h>
#include <string.h>

#include "rng.h"

struct block {
    int refcount;
    int prev, next; /* free-list links, -1 at the ends; used only when refcount == 0 */
    bool cached;
    uint64_t hash, parent;
    int32_t tokens[FOLIO_KV_BLOCK_SIZE];
};

struct folio_block_manager {
    int num_blocks;
    struct block *blocks;
    int free_head, free_tail, num_free;
    int num_cached;
    uint64_t evictions;
    /* Open addressing, linear probing: block id + 1, 0 empty, -1 deleted. */
    int *table;
    size_t table_mask;
    size_t table_used; /* live entries and tombstones: kept under 3/4 so probes end */
};

static void list_remove(struct folio_block_manager *bm, int b)
{
    struct block *k = &bm->blocks[b];
    if (k->prev >= 0)
        bm->blocks[k->prev].next = k->next;
    else
        bm->free_head = k->next;
    if (k->next >= 0)
        bm->blocks[k->next].prev = k->prev;
    else
        bm->free_tail = k->prev;
    k->prev = k->next = -1;
    bm->num_free--;
}

static void list_push_front(struct folio_block_manager *bm, int b)
{
    struct block *k = &bm->blocks[b];
    k->prev = -1;
    k->next = bm->free_head;
    if (bm->free_head >= 0)
        bm->blocks[bm->free_head].prev = b;
    else
        bm->free_tail = b;
    bm->free_head = b;
    bm->num_free++;
}

static void list_push_back(struct folio_block_manager *bm, int b)
{
    struct block *k = &bm->blocks[b];
    k->next = -1;
    k->prev = bm->free_tail;
    if (bm->free_tail >= 0)
        bm->blocks[bm->free_tail].next = b;
    else
        bm->free_head = b;
    bm->free_tail = b;
    bm->num_free++;
}

struct folio_block_manager *folio_bm_create(int num_blocks)
{
    if (num_blocks <= 0)
        return NULL;
    struct folio_block_manager *bm = calloc(1, sizeof *bm);
    if (!bm)
        return NULL;
    bm->num_blocks = num_blocks;
    bm->blocks = calloc((size_t)num_blocks, sizeof *bm->blocks);
    size_t cap = 16;
    while (cap < (size_t)num_blocks * 2)
        cap <<= 1;
    bm->table = calloc(cap, sizeof *bm->table);
    bm->table_mask = cap - 1;
    if (!bm->blocks || !bm->table) {
        folio_bm_destroy(bm);
        return NULL;
    }
    folio_bm_reset(bm);
    return bm;
}

void folio_bm_destroy(struct folio_block_manager *bm)
{
    if (!bm)
        return;
    free(bm->blocks);
    free(bm->table);
    free(bm);
}

void folio_bm_reset(struct folio_block_manager *bm)
{
    bm->free_head = bm->free_tail = -1;
    bm->num_free = 0;
    bm->num_cached = 0;
    bm->table_used = 0;
    memset(bm->table, 0, (bm->table_mask + 1) * sizeof *bm->table);
    for (int b = 0; b < bm->num_blocks; b++) {
        bm->blocks[b].refcount = 0;
        bm->blocks[b].cached = false;
        list_push_back(bm, b);
    }
}

int folio_bm_num_free(const struct folio_block_manager *bm)
{
    return bm->num_free;
}

void folio_bm_stats(const struct folio_block_manager *bm, struct folio_block_stats *s)
{
    s->num_blocks = bm->num_blocks;
    s->num_free = bm->num_free;
    s->num_cached = bm->num_cached;
    s->evictions = bm->evictions;
}

uint64_t folio_bm_hash(uint64_t parent, const int32_t tokens[FOLIO_KV_BLOCK_SIZE])
{
    uint64_t h = folio_splitmix64(parent ^ 0x666f6c696f6b7631ull);
    for (int i = 0; i < FOLIO_KV_BLOCK_SIZE; i++)
        h = folio_splitmix64(h ^ (uint32_t)tokens[i]);
    return h;
}

static bool block_matches(const struct block *k, uint64_t h, uint64_t parent,
                          const int32_t tokens[FOLIO_KV_BLOCK_SIZE])
{
    return k->hash == h && k->parent == parent && !memcmp(k->tokens, tokens, sizeof k->tokens);
}

int folio_bm_lookup(const struct folio_block_manager *bm, uint64_t h, uint64_t parent,
                    const int32_t tokens[FOLIO_KV_BLOCK_SIZE])
{
    for (size_t i = h & bm->table_mask;; i = (i + 1) & bm->table_mask) {
        int e = bm->table[i];
        if (e == 0)
            return -1;
        if (e > 0 && block_matches(&bm->blocks[e - 1], h, parent, tokens))
            return e - 1;
    }
}

static void table_remove(struct folio_block_manager *bm, int b)
{
    for (size_t i = bm->blocks[b].hash & bm->table_mask;; i = (i + 1) & bm->table_mask) {
        if (bm->table[i] == 0)
            return;
        if (bm->table[i] == b + 1) {
            bm->table[i] = -1;
            return;
        }
    }
}

/* Tombstones accumulate as cached blocks are evicted; rebuilding once live
 * entries and tombstones fill 3/4 of the table keeps empty slots, so every
 * probe ends. The table has 2x the blocks: at most half its slots are live. */
static void table_rebuild(struct folio_block_manager *bm)
{
    memset(bm->table, 0, (bm->table_mask + 1) * sizeof *bm->table);
    bm->table_used = (size_t)bm->num_cached;
    for (int b = 0; b < bm->num_blocks; b++) {
        if (!bm->blocks[b].cached)
            continue;
        size_t i = bm->blocks[b].hash & bm->table_mask;
        while (bm->table[i] != 0)
            i = (i + 1) & bm->table_mask;
        bm->table[i] = b + 1;
    }
}

bool folio_bm_register(struct folio_block_manager *bm, int b, uint64_t h, uint64_t parent,
                       const int32_t tokens[FOLIO_KV_BLOCK_SIZE])
{
    struct block *k = &bm->blocks[b];
    if (k->cached || folio_bm_lookup(bm, h, parent, tokens) >= 0)
        return false;
    if (bm->table_used + 1 > (bm->table_mask + 1) / 4 * 3)
        table_rebuild(bm);
    size_t i = h & bm->table_mask;
    while (bm->table[i] > 0)
        i = (i + 1) & bm->table_mask;
    if (bm->table[i] == 0)
        bm->table_used++;
    bm->table[i] = b + 1;
    k->cached = true;
    k->hash = h;
    k->parent = parent;
    memcpy(k->tokens, tokens, sizeof k->tokens);
    bm->num_cached++;
    return true;
}

int folio_bm_alloc(struct folio_block_manager *bm)
{
    int b = bm->free_head;
    if (b < 0)
        return -1;
    list_remove(bm, b);
    struct block *k = &bm->blocks[b];
    if (k->cached) {
        table_remove(bm, b);
        k->cached = false;
        bm->num_cached--;
        bm->evictions++;
    }
    k->refcount = 1;
    return b;
}

void folio_bm_ref(struct folio_block_manager *bm, int b)
{
    if (bm->blocks[b].refcount++ == 0)
        list_remove(bm, b);
}

void folio_bm_release(struct folio_block_manager *bm, int b)
{
    struct block *k = &bm->blocks[b];
    if (k->refcount <= 0)
        abort(); /* a double free would corrupt another sequence's KV: fail loudly */
    if (--k->refcount > 0)
        return;
    if (k->cached)
        list_push_back(bm, b);
    else
        list_push_front(bm, b);
}

int folio_bm_refcount(const struct folio_block_manager *bm, int b)
{
    return bm->blocks[b].refcount;
}
