/* common/tp_shard.c: what each tensor-parallel rank holds (Megatron's split),
 * the blocks it cuts from each weight, and the sizes that do not divide. */
#include <string.h>

#include "check.h"
#include "tp_shard.h"

static struct folio_model_config config(void)
{
    struct folio_model_config c;
    memset(&c, 0, sizeof c);
    c.hidden_size = 64;
    c.num_heads = 8;
    c.num_kv_heads = 4;
    c.head_dim = 8;
    c.intermediate_size = 96;
    c.vocab_size = 1000;
    return c;
}

static void test_shards_cover_the_model(void)
{
    struct folio_model_config c = config();
    char err[256];
    for (int size = 1; size <= 4; size *= 2) {
        int heads = 0, kv = 0, inter = 0, vocab = 0;
        for (int r = 0; r < size; r++) {
            struct folio_tp_shard s;
            CHECK(folio_tp_shard_plan(&c, r, size, &s, err, sizeof err) == 0);
            /* Consecutive, disjoint, and together the whole. */
            CHECK(s.head0 == heads && s.kv_head0 == kv && s.inter0 == inter && s.vocab0 == vocab);
            heads += s.heads;
            kv += s.kv_heads;
            inter += s.inter;
            vocab += s.vocab;
            /* Each rank keeps the model's query-to-KV grouping. */
            CHECK(s.heads / s.kv_heads == c.num_heads / c.num_kv_heads);
        }
        CHECK(heads == 8 && kv == 4 && inter == 96 && vocab == 1000);
    }
}

static void test_blocks(void)
{
    struct folio_model_config c = config();
    char err[256];
    struct folio_tp_shard s;
    CHECK(folio_tp_shard_plan(&c, 1, 2, &s, err, sizeof err) == 0);
    struct folio_tp_block b = folio_tp_block_of(&c, &s, FOLIO_TP_Q, 64, 64);
    CHECK(b.row0 == 32 && b.rows == 32 && b.col0 == 0 && b.cols == 64);
    b = folio_tp_block_of(&c, &s, FOLIO_TP_KV, 32, 64);
    CHECK(b.row0 == 16 && b.rows == 16 && b.cols == 64);
    b = folio_tp_block_of(&c, &s, FOLIO_TP_O, 64, 64);
    CHECK(b.row0 == 0 && b.rows == 64 && b.col0 == 32 && b.cols == 32);
    b = folio_tp_block_of(&c, &s, FOLIO_TP_GATE_UP, 96, 64);
    CHECK(b.row0 == 48 && b.rows == 48 && b.cols == 64);
    b = folio_tp_block_of(&c, &s, FOLIO_TP_DOWN, 64, 96);
    CHECK(b.rows == 64 && b.col0 == 48 && b.cols == 48);
    b = folio_tp_block_of(&c, &s, FOLIO_TP_VOCAB, 1000, 64);
    CHECK(b.row0 == 500 && b.rows == 500 && b.cols == 64);
    b = folio_tp_block_of(&c, &s, FOLIO_TP_REPLICA, 1, 64);
    CHECK(b.row0 == 0 && b.rows == 1 && b.col0 == 0 && b.cols == 64);

    /* The copy takes the block, row by row. */
    float src[4 * 6], dst[2 * 3];
    for (int i = 0; i < 24; i++)
        src[i] = (float)i;
    folio_tp_copy_block(dst, src, 6, (struct folio_tp_block){2, 2, 3, 3});
    CHECK(dst[0] == 15 && dst[2] == 17 && dst[3] == 21 && dst[5] == 23);
}

static void test_sizes_that_do_not_divide(void)
{
    struct folio_model_config c = config();
    char err[256];
    struct folio_tp_shard s;
    CHECK(folio_tp_shard_plan(&c, 0, 3, &s, err, sizeof err) == -1);
    CHECK(strstr(err, "--tensor-parallel-size 3") && strstr(err, "num_attention_heads (8)"));
    CHECK(folio_tp_shard_plan(&c, 0, 8, &s, err, sizeof err) == -1);
    CHECK(strstr(err, "num_key_value_heads (4)") != NULL);
    c.vocab_size = 1001;
    CHECK(folio_tp_shard_plan(&c, 0, 2, &s, err, sizeof err) == -1);
    CHECK(strstr(err, "vocab_size (1001)") != NULL);
    c = config();
    CHECK(folio_tp_shard_plan(&c, 2, 2, &s, err, sizeof err) == -1);
}

int main(void)
{
    test_shards_cover_the_model();
    test_blocks();
    test_sizes_that_do_not_divide();
    return check_report();
}
