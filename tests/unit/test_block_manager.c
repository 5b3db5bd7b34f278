/* The KV block manager: allocation, references, the prefix-cache table and
 * the LRU order in which free blocks are reused. */
#include <stdlib.h>
#include <string.h>

#include "block_manager.h"
#include "check.h"

static void fill(int32_t *t, int base)
{
    for (int i = 0; i < FOLIO_KV_BLOCK_SIZE; i++)
        t[i] = base + i;
}

static void test_alloc_release(void)
{
    struct folio_block_manager *bm = folio_bm_create(4);
    CHECK(bm != NULL);
    CHECK(folio_bm_num_free(bm) == 4);
    int a = folio_bm_alloc(bm), b = folio_bm_alloc(bm), c = folio_bm_alloc(bm),
        d = folio_bm_alloc(bm);
    CHECK(a >= 0 && b >= 0 && c >= 0 && d >= 0);
    CHECK(a != b && b != c && c != d && a != d);
    CHECK(folio_bm_alloc(bm) == -1);
    CHECK(folio_bm_num_free(bm) == 0);
    folio_bm_ref(bm, b);
    CHECK(folio_bm_refcount(bm, b) == 2);
    folio_bm_release(bm, b);
    CHECK(folio_bm_num_free(bm) == 0);
    folio_bm_release(bm, b);
    CHECK(folio_bm_num_free(bm) == 1);
    CHECK(folio_bm_alloc(bm) == b);
    folio_bm_destroy(bm);
}

static void test_prefix_cache(void)
{
    struct folio_block_manager *bm = folio_bm_create(8);
    int32_t t0[16], t1[16], other[16];
    fill(t0, 100);
    fill(t1, 200);
    fill(other, 300);
    uint64_t h0 = folio_bm_hash(0, t0), h1 = folio_bm_hash(h0, t1);
    CHECK(h0 != h1);
    /* The chain: the same block after a different parent is another key. */
    CHECK(folio_bm_hash(folio_bm_hash(0, other), t1) != h1);

    int b0 = folio_bm_alloc(bm), b1 = folio_bm_alloc(bm);
    CHECK(folio_bm_register(bm, b0, h0, 0, t0));
    CHECK(folio_bm_register(bm, b1, h1, h0, t1));
    CHECK(!folio_bm_register(bm, b1, h1, h0, t1)); /* already cached */
    int dup = folio_bm_alloc(bm);
    CHECK(!folio_bm_register(bm, dup, h0, 0, t0)); /* another block has it */
    folio_bm_release(bm, dup);
    CHECK(folio_bm_lookup(bm, h0, 0, t0) == b0);
    CHECK(folio_bm_lookup(bm, h1, h0, t1) == b1);
    /* Same hash, different tokens (a forged collision): no hit. */
    CHECK(folio_bm_lookup(bm, h1, h0, other) == -1);
    CHECK(folio_bm_lookup(bm, h1, 12345, t1) == -1);

    /* Released, the cached blocks stay findable and are reused last. */
    folio_bm_release(bm, b1);
    folio_bm_release(bm, b0);
    CHECK(folio_bm_num_free(bm) == 8);
    CHECK(folio_bm_lookup(bm, h0, 0, t0) == b0);
    for (int i = 0; i < 6; i++) {
        int x = folio_bm_alloc(bm);
        CHECK(x != b0 && x != b1);
    }
    /* A hit takes the block off the free list by reference. */
    folio_bm_ref(bm, b0);
    CHECK(folio_bm_refcount(bm, b0) == 1);
    CHECK(folio_bm_num_free(bm) == 1);
    /* The last free block is b1, cached: allocating it evicts it. */
    CHECK(folio_bm_alloc(bm) == b1);
    CHECK(folio_bm_lookup(bm, h1, h0, t1) == -1);
    struct folio_block_stats st;
    folio_bm_stats(bm, &st);
    CHECK(st.evictions == 1);
    CHECK(st.num_cached == 1);
    folio_bm_reset(bm);
    CHECK(folio_bm_num_free(bm) == 8);
    CHECK(folio_bm_lookup(bm, h0, 0, t0) == -1);
    folio_bm_destroy(bm);
}

/* LRU: of two cached free blocks, the one released first is evicted first. */
static void test_lru_order(void)
{
    struct folio_block_manager *bm = folio_bm_create(3);
    int32_t ta[16], tb[16];
    fill(ta, 1);
    fill(tb, 50);
    uint64_t ha = folio_bm_hash(0, ta), hb = folio_bm_hash(0, tb);
    int a = folio_bm_alloc(bm), b = folio_bm_alloc(bm), c = folio_bm_alloc(bm);
    folio_bm_register(bm, a, ha, 0, ta);
    folio_bm_register(bm, b, hb, 0, tb);
    folio_bm_release(bm, a);
    folio_bm_release(bm, b);
    folio_bm_release(bm, c); /* uncached: reused first */
    CHECK(folio_bm_alloc(bm) == c);
    CHECK(folio_bm_alloc(bm) == a);
    CHECK(folio_bm_lookup(bm, hb, 0, tb) == b);
    folio_bm_destroy(bm);
}

/* Churn: many registrations and evictions keep the table usable (tombstones
 * are cleaned up, lookups end). */
static void test_churn(void)
{
    struct folio_block_manager *bm = folio_bm_create(64);
    int32_t t[16];
    for (int round = 0; round < 20000; round++) {
        int b = folio_bm_alloc(bm);
        CHECK(b >= 0);
        fill(t, round * 16);
        uint64_t h = folio_bm_hash(0, t);
        CHECK(folio_bm_register(bm, b, h, 0, t));
        folio_bm_release(bm, b);
        if (round % 1000 == 0)
            CHECK(folio_bm_lookup(bm, h, 0, t) == b);
    }
    int32_t missing[16];
    fill(missing, -5000);
    CHECK(folio_bm_lookup(bm, folio_bm_hash(0, missing), 0, missing) == -1);
    struct folio_block_stats st;
    folio_bm_stats(bm, &st);
    CHECK(st.num_free == 64);
    CHECK(st.num_cached <= 64);
    folio_bm_destroy(bm);
}

int main(void)
{
    test_alloc_release();
    test_prefix_cache();
    test_lru_order();
    test_churn();
    return check_report();
}
