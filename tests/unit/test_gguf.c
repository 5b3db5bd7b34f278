/* The GGUF reader against files built here byte by byte: a good file reads
 * back exactly (metadata of each kind, arrays, tensors, dequantized values),
 * and each kind of damage (every truncation, a data offset past the end, a bad
 * type, huge dimensions, a bad string length, bad counts, a bad alignment, a
 * name given twice) is an error naming the tensor or key, never a crash (the
 * ASan build runs this too). Also the --model path resolution. */
#include "check.h"
#include "gguf.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[1024];

struct buf {
    unsigned char *p;
    size_t n, cap;
};

static void put(struct buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            exit(1);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u32(struct buf *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(b, x, 4);
}

static void put_u64(struct buf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(struct buf *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void patch_u64(struct buf *b, size_t off, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b->p[off + (size_t)i] = (unsigned char)(v >> (8 * i));
}

static void patch_u32(struct buf *b, size_t off, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b->p[off + (size_t)i] = (unsigned char)(v >> (8 * i));
}

/* Where the corruption tests patch the good file. */
struct layout {
    size_t tensor_count, kv_count, tok_strlen, tok_count, b_dim0, b_type, b_offset, align_value,
        name_b_len;
};

/* A good file: 4 keys (architecture, alignment 64, a string array, an int32),
 * tensors "a" (F32 [4]) and "b" (Q8_0 [32, 2]: block scales 0.5 and 2,
 * values k-16). */
static struct buf good_file(struct layout *l)
{
    struct buf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    l->tensor_count = b.n;
    put_u64(&b, 2);
    l->kv_count = b.n;
    put_u64(&b, 4);
    put_str(&b, "general.architecture");
    put_u32(&b, 8);
    put_str(&b, "llama");
    put_str(&b, "general.alignment");
    put_u32(&b, 4);
    l->align_value = b.n;
    put_u32(&b, 64);
    put_str(&b, "tokenizer.ggml.tokens");
    put_u32(&b, 9);
    put_u32(&b, 8);
    l->tok_count = b.n;
    put_u64(&b, 3);
    put_str(&b, "<s>");
    l->tok_strlen = b.n;
    put_str(&b, "\xc4\xa0the");
    put_str(&b, "");
    put_str(&b, "llama.block_count");
    put_u32(&b, 5);
    put_u32(&b, (uint32_t)-7);
    /* tensor infos */
    put_str(&b, "a");
    put_u32(&b, 1);
    put_u64(&b, 4);
    put_u32(&b, 0);
    put_u64(&b, 0);
    l->name_b_len = b.n;
    put_str(&b, "b");
    put_u32(&b, 2);
    l->b_dim0 = b.n;
    put_u64(&b, 32);
    put_u64(&b, 2);
    l->b_type = b.n;
    put_u32(&b, 8);
    l->b_offset = b.n;
    put_u64(&b, 64);
    while (b.n % 64)
        put(&b, "", 1);
    float a[4] = {1.5f, -2.0f, 0.0f, 3.25f};
    put(&b, a, sizeof a);
    for (int i = 0; i < 64 - 16; i++)
        put(&b, "", 1);
    for (int blk = 0; blk < 2; blk++) {
        unsigned char scale[2] = {0x00, blk ? 0x40 : 0x38}; /* f16 2.0 and 0.5 */
        put(&b, scale, 2);
        for (int k = 0; k < 32; k++) {
            signed char q = (signed char)(k - 16);
            put(&b, &q, 1);
        }
    }
    return b;
}

static char path[256];

static void write_file(const struct buf *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(b->p, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* Opening the first n bytes of b fails with a message holding want. */
static void expect_error(const struct buf *b, size_t n, const char *want, int line)
{
    write_file(b, n);
    struct folio_gguf *g = NULL;
    err[0] = '\0';
    int rc = folio_gguf_open(path, &g, err, sizeof err);
    bool ok = rc != 0 && g == NULL && strstr(err, want) != NULL && strstr(err, path) != NULL;
    if (!ok)
        fprintf(stderr, "line %d: want an error with '%s', got rc %d: %s\n", line, want, rc, err);
    CHECK(ok);
    folio_gguf_close(g);
}
#define EXPECT_ERROR(b, want) expect_error(&(b), (b).n, want, __LINE__)

static void test_good_file(void)
{
    struct layout l;
    struct buf b = good_file(&l);
    write_file(&b, b.n);
    struct folio_gguf *g;
    CHECK(folio_gguf_open(path, &g, err, sizeof err) == 0);
    CHECK(folio_gguf_version(g) == 3 && folio_gguf_num_kv(g) == 4 &&
          folio_gguf_num_tensors(g) == 2);
    const char *s;
    size_t len;
    CHECK(folio_gguf_get_string(g, "general.architecture", &s, &len, err, sizeof err) == 0 &&
          len == 5 && memcmp(s, "llama", 5) == 0);
    int64_t i;
    double f;
    bool bv;
    CHECK(folio_gguf_get_int(g, "llama.block_count", &i, err, sizeof err) == 0 && i == -7);
    CHECK(folio_gguf_get_float(g, "general.alignment", &f, err, sizeof err) == 0 && f == 64.0);
    CHECK(folio_gguf_get_bool(g, "general.alignment", &bv, err, sizeof err) != 0 &&
          strstr(err, "'general.alignment' has type uint32, expected a bool"));
    CHECK(folio_gguf_get_int(g, "no.such.key", &i, err, sizeof err) != 0 &&
          strstr(err, "missing key 'no.such.key'"));
    const struct folio_gguf_kv *kv = folio_gguf_find(g, "tokenizer.ggml.tokens");
    enum folio_gguf_vtype et;
    uint64_t n;
    CHECK(kv && folio_gguf_kv_array(kv, &et, &n) == 0 && et == FOLIO_GGUF_STRING && n == 3);
    CHECK(folio_gguf_kv_array_string(kv, 1, &s, &len) == 0 && len == 5 &&
          memcmp(s, "\xc4\xa0the", 5) == 0);
    CHECK(folio_gguf_kv_array_string(kv, 2, &s, &len) == 0 && len == 0);
    CHECK(folio_gguf_kv_array_string(kv, 3, &s, &len) != 0);
    CHECK(folio_gguf_kv_array_int(kv, 0, &i) != 0);
    CHECK(folio_gguf_kv_string(kv, &s, &len) != 0);

    const struct folio_gguf_tensor *ta = folio_gguf_find_tensor(g, "a");
    const struct folio_gguf_tensor *tb = folio_gguf_find_tensor(g, "b");
    CHECK(ta && ta->type == FOLIO_GGML_F32 && ta->ndim == 1 && ta->ne[0] == 4 && ta->nbytes == 16);
    CHECK(tb && tb->type == FOLIO_GGML_Q8_0 && tb->ndim == 2 && tb->ne[0] == 32 && tb->ne[1] == 2 &&
          tb->nbytes == 68 && folio_gguf_tensor_numel(tb) == 64);
    CHECK(!folio_gguf_find_tensor(g, "c"));
    float out[64];
    CHECK(folio_gguf_dequantize(ta, 0, 4, out, err, sizeof err) == 0 && out[0] == 1.5f &&
          out[1] == -2.0f && out[3] == 3.25f);
    CHECK(folio_gguf_dequantize(tb, 0, 64, out, err, sizeof err) == 0);
    bool exact = true;
    for (int k = 0; k < 64; k++)
        exact = exact && out[k] == (float)((k % 32) - 16) * (k < 32 ? 0.5f : 2.0f);
    CHECK(exact);
    /* A range that starts and ends inside blocks. */
    CHECK(folio_gguf_dequantize(tb, 30, 5, out, err, sizeof err) == 0 && out[0] == 7.0f &&
          out[2] == -32.0f && out[4] == -28.0f);
    CHECK(folio_gguf_dequantize(tb, 60, 5, out, err, sizeof err) != 0 &&
          strstr(err, "tensor 'b'") && strstr(err, "past its 64 elements"));
    folio_gguf_close(g);
    free(b.p);
}

static void test_damage(void)
{
    struct layout l;
    struct buf b = good_file(&l);
    /* Every truncation: the error names what was being read, never crashes. */
    for (size_t n = 0; n < b.n; n++) {
        write_file(&b, n);
        struct folio_gguf *g = NULL;
        err[0] = '\0';
        int rc = folio_gguf_open(path, &g, err, sizeof err);
        if (rc == 0 || !strstr(err, path))
            fprintf(stderr, "truncated to %zu bytes: rc %d, '%s'\n", n, rc, err);
        CHECK(rc != 0 && strstr(err, path));
        folio_gguf_close(g);
    }
    expect_error(&b, b.n - 1, "tensor 'b': data [64, +68) runs past the end", __LINE__);
    expect_error(&b, 10, "too short for a GGUF header", __LINE__);

    struct buf c = good_file(&l);
    patch_u64(&c, l.b_offset, 128);
    EXPECT_ERROR(c, "tensor 'b': data [128, +68) runs past the end");
    patch_u64(&c, l.b_offset, 96);
    EXPECT_ERROR(c, "tensor 'b': data offset 96 is not a multiple of the alignment 64");
    patch_u64(&c, l.b_offset, 64);
    patch_u32(&c, l.b_type, 4);
    EXPECT_ERROR(c, "tensor 'b': ggml type 4 is not one Folio knows");
    patch_u32(&c, l.b_type, 12345);
    EXPECT_ERROR(c, "tensor 'b': ggml type 12345");
    patch_u32(&c, l.b_type, 8);
    patch_u64(&c, l.b_dim0, 1ull << 62);
    EXPECT_ERROR(c, "tensor 'b': dimensions overflow");
    patch_u64(&c, l.b_dim0, UINT64_MAX);
    EXPECT_ERROR(c, "tensor 'b': dimensions overflow");
    patch_u64(&c, l.b_dim0, 48);
    EXPECT_ERROR(c, "tensor 'b': row length 48 is not a multiple of Q8_0's block of 32");
    patch_u64(&c, l.b_dim0, 32 * 1024);
    EXPECT_ERROR(c, "tensor 'b': data [64, +69632) runs past the end");
    free(c.p);

    c = good_file(&l);
    patch_u64(&c, l.tok_strlen, 1ull << 40);
    EXPECT_ERROR(c, "key 'tokenizer.ggml.tokens': string value claims 1099511627776 bytes");
    patch_u64(&c, l.tok_strlen, UINT64_MAX);
    EXPECT_ERROR(c, "key 'tokenizer.ggml.tokens'");
    patch_u64(&c, l.tok_strlen, 5);
    patch_u64(&c, l.tok_count, 1ull << 60);
    EXPECT_ERROR(c, "key 'tokenizer.ggml.tokens': array of 1152921504606846976 string elements");
    patch_u64(&c, l.tok_count, 3);
    patch_u64(&c, l.name_b_len, 1ull << 50);
    EXPECT_ERROR(c, "tensor info 1: tensor name claims");
    patch_u64(&c, l.name_b_len, 0);
    EXPECT_ERROR(c, "tensor info 1: tensor name is 0 bytes");
    patch_u64(&c, l.name_b_len, 1);
    c.p[l.name_b_len + 8] = 'a';
    EXPECT_ERROR(c, "tensor 'a' appears twice");
    c.p[l.name_b_len + 8] = 'b';
    patch_u32(&c, l.align_value, 48);
    EXPECT_ERROR(c, "'general.alignment' must be a power-of-two");
    patch_u32(&c, l.align_value, 0);
    EXPECT_ERROR(c, "'general.alignment' must be a power-of-two");
    patch_u32(&c, l.align_value, 64);
    patch_u64(&c, l.kv_count, UINT64_MAX);
    EXPECT_ERROR(c, "header claims 2 tensors and 18446744073709551615 metadata entries");
    patch_u64(&c, l.kv_count, 4);
    patch_u64(&c, l.tensor_count, 1ull << 40);
    EXPECT_ERROR(c, "header claims 1099511627776 tensors");
    patch_u64(&c, l.tensor_count, 2);
    patch_u32(&c, 4, 1);
    EXPECT_ERROR(c, "GGUF version 1 is not supported");
    patch_u32(&c, 4, 3);
    c.p[0] = 'X';
    EXPECT_ERROR(c, "not a GGUF file");
    free(c.p);
    free(b.p);
}

static void touch(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
}

static void test_resolve(void)
{
    char dir[] = "/tmp/folio-test-gguf-dir-XXXXXX", out[512], want[600];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    CHECK(folio_gguf_resolve(dir, out, sizeof out, err, sizeof err) == 0); /* empty */
    touch(dir, "model.Q4_1.gguf");
    snprintf(want, sizeof want, "%s/model.Q4_1.gguf", dir);
    CHECK(folio_gguf_resolve(dir, out, sizeof out, err, sizeof err) == 1 && !strcmp(out, want));
    CHECK(folio_gguf_resolve(want, out, sizeof out, err, sizeof err) == 1 && !strcmp(out, want));
    touch(dir, "other.gguf");
    CHECK(folio_gguf_resolve(dir, out, sizeof out, err, sizeof err) == -1 &&
          strstr(err, "holds 2 .gguf files"));
    touch(dir, "config.json");
    CHECK(folio_gguf_resolve(dir, out, sizeof out, err, sizeof err) == 0);
    CHECK(folio_gguf_resolve("/nonexistent/x.gguf", out, sizeof out, err, sizeof err) == 0);
    const char *names[] = {"model.Q4_1.gguf", "other.gguf", "config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(want, sizeof want, "%s/%s", dir, names[i]);
        unlink(want);
    }
    rmdir(dir);
}

int main(void)
{
    snprintf(path, sizeof path, "/tmp/folio-test-gguf-%d.gguf", (int)getpid());
    test_good_file();
    test_damage();
    test_resolve();
    unlink(path);
    return check_report();
}
