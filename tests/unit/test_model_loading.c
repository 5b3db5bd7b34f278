/* The model directory loader against files written here byte by byte: good
 * checkpoints (one file and shards, every dtype) read back exactly, and each
 * kind of damage (truncation, bad header, offsets, shapes, dtypes, missing or
 * misshapen tensors, config errors) is an error that names the file and the
 * tensor or field, never a crash. */
#include "check.h"
#include "model.h"
#include "tmp_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[1024];

/* ---- files ---- */

static char *make_dir(void)
{
    return make_dir_named("model");
}

static void remove_file(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}

/* A safetensors file: header length hlen (the header's own length when
 * UINT64_MAX), the header text, then the data bytes. */
static void write_st_raw(const char *dir, const char *name, uint64_t hlen, const char *header,
                         const void *data, size_t data_len)
{
    size_t h = strlen(header);
    if (hlen == UINT64_MAX)
        hlen = h;
    size_t total = 8 + h + data_len;
    unsigned char *buf = malloc(total);
    for (int b = 0; b < 8; b++)
        buf[b] = (unsigned char)(hlen >> (8 * b));
    memcpy(buf + 8, header, h);
    if (data_len)
        memcpy(buf + 8 + h, data, data_len);
    write_file(dir, name, buf, total);
    free(buf);
}

static void write_st(const char *dir, const char *name, const char *header, const void *data,
                     size_t data_len)
{
    write_st_raw(dir, name, UINT64_MAX, header, data, data_len);
}

static bool contains(const char *s, const char *sub)
{
    return strstr(s, sub) != NULL;
}

/* Opening dir must fail with a message holding each of the given strings. */
static void expect_ck_error(const char *dir, const char *a, const char *b, const char *c)
{
    struct folio_checkpoint *ck = (struct folio_checkpoint *)1;
    err[0] = '\0';
    int rc = folio_checkpoint_open(dir, &ck, err, sizeof err);
    CHECK(rc == -1);
    CHECK(ck == NULL);
    CHECK(contains(err, a));
    CHECK(!b || contains(err, b));
    CHECK(!c || contains(err, c));
    if (rc != -1 || !contains(err, a) || (b && !contains(err, b)) || (c && !contains(err, c)))
        fprintf(stderr, "  message was: %s\n  wanted: %s | %s | %s\n", err, a, b ? b : "",
                c ? c : "");
    if (rc == 0)
        folio_checkpoint_close(ck);
}

/* ---- conversions ---- */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_conversions(void)
{
    /* bf16: every non-NaN value survives f32 and back; rounding is to nearest even. */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = folio_bf16_to_f32((uint16_t)h);
        if (f32_bits(f) != h << 16)
            bad++;
        if (!isnan(f) && folio_f32_to_bf16(f) != h)
            bad++;
    }
    CHECK(bad == 0);
    CHECK(folio_f32_to_bf16(bits_f32(0x3f808000u)) == 0x3f80); /* tie, even below */
    CHECK(folio_f32_to_bf16(bits_f32(0x3f818000u)) == 0x3f82); /* tie, even above */
    CHECK(folio_f32_to_bf16(bits_f32(0x3f808001u)) == 0x3f81); /* above half */
    CHECK(folio_f32_to_bf16(bits_f32(0x3f807fffu)) == 0x3f80); /* below half */
    CHECK(folio_f32_to_bf16(bits_f32(0x7f7fffffu)) == 0x7f80); /* FLT_MAX rounds to inf */
    CHECK(folio_f32_to_bf16(INFINITY) == 0x7f80);
    CHECK(folio_f32_to_bf16(-INFINITY) == 0xff80);
    CHECK(isnan(folio_bf16_to_f32(folio_f32_to_bf16(NAN))));
    CHECK(isnan(folio_bf16_to_f32(folio_f32_to_bf16(bits_f32(0x7f800001u))))); /* low payload */

    /* f16: known values, subnormals, inf, NaN; every non-NaN value round-trips. */
    CHECK(folio_f16_to_f32(0x3c00) == 1.0f);
    CHECK(folio_f16_to_f32(0xc000) == -2.0f);
    CHECK(folio_f16_to_f32(0x7bff) == 65504.0f);
    CHECK(folio_f16_to_f32(0x0400) == ldexpf(1.0f, -14));
    CHECK(folio_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    CHECK(folio_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    CHECK(folio_f16_to_f32(0x8001) == -ldexpf(1.0f, -24));
    CHECK(folio_f16_to_f32(0x8000) == 0.0f && signbit(folio_f16_to_f32(0x8000)));
    CHECK(folio_f16_to_f32(0x7c00) == INFINITY);
    CHECK(folio_f16_to_f32(0xfc00) == -INFINITY);
    CHECK(isnan(folio_f16_to_f32(0x7e00)));
    CHECK(isnan(folio_f16_to_f32(0x7c01)));
    bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = folio_f16_to_f32((uint16_t)h);
        if (!isnan(f) && folio_f32_to_f16(f) != h)
            bad++;
    }
    CHECK(bad == 0);
    CHECK(folio_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(folio_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(folio_f32_to_f16(ldexpf(1.0f, -25)) == 0x0000);        /* tie to even: zero */
    CHECK(folio_f32_to_f16(ldexpf(1.5f, -25)) == 0x0001);        /* above half */
    CHECK(folio_f32_to_f16(ldexpf(3.0f, -25)) == 0x0002);        /* tie 1.5 units -> 2 */
    CHECK(folio_f32_to_f16(1.0f + ldexpf(1.0f, -11)) == 0x3c00); /* tie, even below */
    CHECK(folio_f32_to_f16(1.0f + ldexpf(3.0f, -11)) == 0x3c02); /* tie, even above */
    CHECK(isnan(folio_f16_to_f32(folio_f32_to_f16(NAN))));
}

/* ---- single files ---- */

/* bf16 a[2,3], f16 b[4], f32 c[2,2], a scalar and an empty tensor. */
static const char *good_header =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"c\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
    "\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[16,28]},"
    "\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[28,36]},"
    "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[36,40]},"
    "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[40,40]}}";
static const float c_vals[4] = {1.5f, -2.25f, 1e-30f, 3.0e30f};
static const float a_vals[6] = {1.0f, -0.5f, 3.140625f, 1e10f, -1e-10f, 0.0f};
static const uint16_t b_bits[4] = {0x3c00, 0x0001, 0xfc00, 0x7bff}; /* 1, 2^-24, -inf, 65504 */
static const float s_val = 42.0f;

static size_t good_data(unsigned char *d)
{
    memcpy(d, c_vals, 16);
    for (int i = 0; i < 6; i++) {
        uint16_t h = folio_f32_to_bf16(a_vals[i]);
        memcpy(d + 16 + 2 * i, &h, 2);
    }
    memcpy(d + 28, b_bits, 8);
    memcpy(d + 36, &s_val, 4);
    return 40;
}

static void test_good_file(void)
{
    char *dir = make_dir();
    unsigned char data[40];
    size_t n = good_data(data);
    write_st(dir, "model.safetensors", good_header, data, n);

    struct folio_checkpoint *ck = NULL;
    int rc = folio_checkpoint_open(dir, &ck, err, sizeof err);
    CHECK(rc == 0);
    if (rc != 0) {
        fprintf(stderr, "  %s\n", err);
        remove_dir(dir);
        return;
    }
    CHECK(folio_checkpoint_num_tensors(ck) == 5);
    CHECK(strcmp(folio_checkpoint_tensor(ck, 0)->name, "a") == 0); /* sorted */
    CHECK(folio_checkpoint_tensor(ck, 5) == NULL);
    CHECK(folio_checkpoint_find(ck, "__metadata__") == NULL);
    CHECK(folio_checkpoint_find(ck, "zz") == NULL);
    CHECK(contains(folio_checkpoint_source(ck), "model.safetensors"));

    const struct folio_tensor *a = folio_checkpoint_find(ck, "a");
    const struct folio_tensor *b = folio_checkpoint_find(ck, "b");
    const struct folio_tensor *c = folio_checkpoint_find(ck, "c");
    const struct folio_tensor *s = folio_checkpoint_find(ck, "s");
    const struct folio_tensor *e = folio_checkpoint_find(ck, "e");
    CHECK(a && b && c && s && e);
    if (a && b && c && s && e) {
        CHECK(a->dtype == FOLIO_DTYPE_BF16 && a->ndim == 2 && a->shape[0] == 2 &&
              a->shape[1] == 3 && a->nbytes == 12);
        CHECK(contains(a->file, dir) && contains(a->file, "model.safetensors"));
        for (int i = 0; i < 6; i++)
            CHECK(folio_tensor_get_f32(a, (size_t)i) ==
                  folio_bf16_to_f32(folio_f32_to_bf16(a_vals[i])));
        CHECK(folio_tensor_get_f32(a, 0) == 1.0f && folio_tensor_get_f32(a, 2) == 3.140625f);
        CHECK(b->dtype == FOLIO_DTYPE_F16 && b->ndim == 1 && b->shape[0] == 4);
        CHECK(folio_tensor_get_f32(b, 0) == 1.0f);
        CHECK(folio_tensor_get_f32(b, 1) == ldexpf(1.0f, -24));
        CHECK(folio_tensor_get_f32(b, 2) == -INFINITY);
        CHECK(folio_tensor_get_f32(b, 3) == 65504.0f);
        CHECK(c->dtype == FOLIO_DTYPE_F32 && folio_tensor_numel(c) == 4);
        float got[4];
        folio_tensor_read_f32(c, 0, 4, got);
        CHECK(memcmp(got, c_vals, sizeof got) == 0);
        CHECK(s->ndim == 0 && folio_tensor_numel(s) == 1 && folio_tensor_get_f32(s, 0) == 42.0f);
        CHECK(e->ndim == 2 && folio_tensor_numel(e) == 0 && e->nbytes == 0);
        /* The data points into the mapping, not into a copy. */
        CHECK((const unsigned char *)a->data == (const unsigned char *)c->data + 16);
    }
    folio_checkpoint_close(ck);
    remove_dir(dir);
}

/* An F32 tensor after 6 bytes of BF16 sits 2 bytes off in the file; the
 * loader hands out an aligned copy with the same values. */
static void test_misaligned_tensor(void)
{
    char *dir = make_dir();
    const char *hdr = "{\"h\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                      "\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[6,14]}}  ";
    unsigned char data[14] = {0};
    const float fv[2] = {0.75f, -8.5f};
    memcpy(data + 6, fv, 8);
    write_st(dir, "model.safetensors", hdr, data, sizeof data);
    struct folio_checkpoint *ck = NULL;
    CHECK(folio_checkpoint_open(dir, &ck, err, sizeof err) == 0);
    if (ck) {
        const struct folio_tensor *f = folio_checkpoint_find(ck, "f");
        CHECK(f && (uintptr_t)f->data % 4 == 0);
        CHECK(f && ((const float *)f->data)[0] == 0.75f && ((const float *)f->data)[1] == -8.5f);
        folio_checkpoint_close(ck);
    }
    remove_dir(dir);
}

static void test_bad_files(void)
{
    char *dir = make_dir();
    unsigned char data[40];
    size_t n = good_data(data);

    /* No checkpoint at all. */
    expect_ck_error(dir, dir, "model.safetensors", NULL);

    /* Shorter than the 8-byte header length. */
    write_file(dir, "model.safetensors", "abc", 3);
    expect_ck_error(dir, "model.safetensors", "too short", NULL);
    write_file(dir, "model.safetensors", "", 0);
    expect_ck_error(dir, "model.safetensors", "too short", NULL);

    /* Truncated inside the data: the last tensor's offsets run past the end. */
    write_st(dir, "model.safetensors", good_header, data, n - 3);
    expect_ck_error(dir, "model.safetensors", "'s'", "truncated");

    /* Truncated inside the header: the header length runs past the end. */
    write_st_raw(dir, "model.safetensors", strlen(good_header), "{\"c\":{\"dtype\"", NULL, 0);
    expect_ck_error(dir, "model.safetensors", "header length", NULL);
    write_st_raw(dir, "model.safetensors", UINT64_MAX - 3, good_header, data, n);
    expect_ck_error(dir, "model.safetensors", "header length", NULL);

    /* A header length over the limit, in a sparse file large enough to hold it. */
    {
        write_st_raw(dir, "model.safetensors", 150u * 1024 * 1024, "{}", NULL, 0);
        char p[512];
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        int fd = open(p, O_WRONLY);
        CHECK(fd >= 0 && ftruncate(fd, 200L * 1024 * 1024) == 0);
        if (fd >= 0)
            close(fd);
        expect_ck_error(dir, "model.safetensors", "limit", NULL);
    }

    /* Not JSON, not an object, duplicate keys. */
    write_st(dir, "model.safetensors", "{\"a\":{\"dtype\":\"F32\",", data, n);
    expect_ck_error(dir, "model.safetensors", "JSON", NULL);
    write_st(dir, "model.safetensors", "\x01\x02garbage", data, n);
    expect_ck_error(dir, "model.safetensors", "JSON", NULL);
    write_st(dir, "model.safetensors", "[1,2]", data, n);
    expect_ck_error(dir, "model.safetensors", "not a JSON object", NULL);
    write_st(dir, "model.safetensors",
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             data, n);
    expect_ck_error(dir, "model.safetensors", "JSON", NULL);

#define ENTRY(body) "{\"__metadata__\":{},\"w\":{" body "}}"
    /* Offsets. */
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[32,48]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "past the end");
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,0]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "begin after end");
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "data_offsets");
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "data_offsets");
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"F32\",\"shape\":[1],"
                   "\"data_offsets\":[0,18446744073709551615]"),
             data, n);
    expect_ck_error(dir, "model.safetensors", "JSON", NULL); /* over 2^63 */

    /* nbytes must equal product(shape) * dtype size. */
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,16]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "[2, 3]");
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,16]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "needs 8");
    /* A shape whose product overflows 64 bits. */
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                   "\"data_offsets\":[0,16]"),
             data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "more than");

    /* Shapes. */
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"F32\",\"shape\":[1,1,1,1,4],\"data_offsets\":[0,16]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "dimensions");
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "shape[0]");
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"F32\",\"shape\":[\"4\"],\"data_offsets\":[0,16]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "shape[0]");
    write_st(dir, "model.safetensors", ENTRY("\"dtype\":\"F32\",\"data_offsets\":[0,16]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "shape");

    /* Dtypes. */
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "unsupported dtype 'I64'");
    write_st(dir, "model.safetensors",
             ENTRY("\"dtype\":\"F8_E4M3\",\"shape\":[16],\"data_offsets\":[0,16]"), data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "F8_E4M3");
    write_st(dir, "model.safetensors", ENTRY("\"dtype\":7,\"shape\":[4],\"data_offsets\":[0,16]"),
             data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "dtype");
    write_st(dir, "model.safetensors", "{\"w\":[1,2,3]}", data, n);
    expect_ck_error(dir, "model.safetensors", "'w'", "not a JSON object");
#undef ENTRY

    /* A directory where the file should be. */
    remove_file(dir, "model.safetensors");
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(mkdir(p, 0700) == 0);
    expect_ck_error(dir, "model.safetensors", "regular file", NULL);
    rmdir(p);
    remove_dir(dir);
}

/* Every prefix of a good file, and the good file with header bytes replaced
 * at random (a fixed seed), either opens with consistent tensors or fails
 * with a message naming the file; under ASan this is the no-crash check. */
static void test_damage_sweep(void)
{
    char *dir = make_dir();
    unsigned char data[40];
    size_t n = good_data(data);
    size_t hlen = strlen(good_header), total = 8 + hlen + n;
    unsigned char *good = malloc(total);
    for (int b = 0; b < 8; b++)
        good[b] = (unsigned char)((uint64_t)hlen >> (8 * b));
    memcpy(good + 8, good_header, hlen);
    memcpy(good + 8 + hlen, data, n);
    unsigned char *buf = malloc(total);
    int opened = 0, failed = 0, unnamed = 0, inconsistent = 0;
    uint64_t state = 0x9e3779b97f4a7c15u;
    const char alphabet[] = "{}[]\",:0123456789-eE.FBI \\\x00\xff";
    for (size_t iter = 0; iter <= total + 600; iter++) {
        size_t len = total;
        memcpy(buf, good, total);
        if (iter <= total) {
            len = iter; /* every truncation, then the intact file */
        } else {
            for (int k = 0; k < 3; k++) { /* three replaced bytes in the length or header */
                state = state * 6364136223846793005u + 1442695040888963407u;
                size_t pos = (size_t)(state >> 33) % (8 + hlen);
                buf[pos] = (unsigned char)alphabet[(state >> 13) % (sizeof alphabet - 1)];
            }
        }
        write_file(dir, "model.safetensors", buf, len);
        struct folio_checkpoint *ck = NULL;
        err[0] = '\0';
        if (folio_checkpoint_open(dir, &ck, err, sizeof err) == 0) {
            opened++;
            for (size_t i = 0; i < folio_checkpoint_num_tensors(ck); i++) {
                const struct folio_tensor *t = folio_checkpoint_tensor(ck, i);
                size_t numel = folio_tensor_numel(t);
                if (t->nbytes != numel * folio_dtype_size(t->dtype))
                    inconsistent++;
                volatile float sink = 0;
                for (size_t k = 0; k < numel; k++)
                    sink += folio_tensor_get_f32(t, k);
                (void)sink;
            }
            folio_checkpoint_close(ck);
        } else {
            failed++;
            unnamed += !contains(err, "model.safetensors");
        }
    }
    CHECK(opened >= 1 && failed >= (int)total); /* the intact file opens, no prefix does */
    CHECK(unnamed == 0);
    CHECK(inconsistent == 0);
    free(buf);
    free(good);
    remove_dir(dir);
}

/* ---- shards ---- */

static void test_shards(void)
{
    char *dir = make_dir();
    const float x[2] = {1.0f, 2.0f}, y[3] = {-1.0f, -2.0f, -3.0f};
    write_st(dir, "model-00001-of-00002.safetensors",
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", x, 8);
    write_st(dir, "model-00002-of-00002.safetensors",
             "{\"y\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", y, 12);
    write_text(dir, "model.safetensors.index.json",
               "{\"metadata\":{\"total_size\":20},\"weight_map\":{"
               "\"x\":\"model-00001-of-00002.safetensors\","
               "\"y\":\"model-00002-of-00002.safetensors\"}}");
    struct folio_checkpoint *ck = NULL;
    int rc = folio_checkpoint_open(dir, &ck, err, sizeof err);
    CHECK(rc == 0);
    if (rc == 0) {
        const struct folio_tensor *tx = folio_checkpoint_find(ck, "x");
        const struct folio_tensor *ty = folio_checkpoint_find(ck, "y");
        CHECK(tx && ty && folio_checkpoint_num_tensors(ck) == 2);
        CHECK(tx && contains(tx->file, "model-00001-of-00002.safetensors"));
        CHECK(ty && contains(ty->file, "model-00002-of-00002.safetensors"));
        CHECK(ty && folio_tensor_get_f32(ty, 2) == -3.0f && folio_tensor_get_f32(tx, 1) == 2.0f);
        CHECK(contains(folio_checkpoint_source(ck), "model.safetensors.index.json"));
        folio_checkpoint_close(ck);
    } else {
        fprintf(stderr, "  %s\n", err);
    }

    /* A shard file that is missing: the message names it and a tensor it holds. */
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{\"x\":\"model-00001-of-00002.safetensors\","
               "\"y\":\"model-00003-of-00003.safetensors\"}}");
    expect_ck_error(dir, "model-00003-of-00003.safetensors", "'y'", "No such file");

    /* The index maps a tensor to a file that does not hold it. */
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{\"x\":\"model-00001-of-00002.safetensors\","
               "\"y\":\"model-00001-of-00002.safetensors\"}}");
    expect_ck_error(dir, "index.json", "'y'", "no such tensor");
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{\"x\":\"model-00002-of-00002.safetensors\","
               "\"y\":\"model-00001-of-00002.safetensors\"}}");
    expect_ck_error(dir, "index.json", "'x'", "model-00001-of-00002.safetensors holds it");
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{\"x\":\"model-00001-of-00002.safetensors\","
               "\"z\":\"model-00002-of-00002.safetensors\"}}");
    expect_ck_error(dir, "index.json", "'z'", "no such tensor");

    /* The same tensor in two shards. */
    write_st(dir, "model-00002-of-00002.safetensors",
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", x, 8);
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{\"x\":\"model-00001-of-00002.safetensors\","
               "\"y\":\"model-00002-of-00002.safetensors\"}}");
    expect_ck_error(dir, "'x'", "model-00001-of-00002", "model-00002-of-00002");

    /* A damaged shard: the message names the shard and the tensor. */
    write_st(dir, "model-00002-of-00002.safetensors",
             "{\"y\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", y, 10);
    expect_ck_error(dir, "model-00002-of-00002.safetensors", "'y'", "past the end");

    /* Shard names that leave the directory, and broken indexes. */
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{\"x\":\"../model-00001-of-00002.safetensors\"}}");
    expect_ck_error(dir, "index.json", "'x'", "plain file name");
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\":{\"x\":3}}");
    expect_ck_error(dir, "index.json", "'x'", NULL);
    write_text(dir, "model.safetensors.index.json", "{\"metadata\":{}}");
    expect_ck_error(dir, "index.json", "weight_map", NULL);
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\":");
    expect_ck_error(dir, "index.json", NULL, NULL);
    remove_dir(dir);
}

/* ---- whole models ---- */

/* A small Llama: 2 layers, hidden 8, 2 heads of 4, 1 KV head, MLP 12, vocab 16. */
enum { L = 2, HID = 8, NH = 2, NKV = 1, HD = 4, INTER = 12, VOCAB = 16 };

struct spec {
    char name[96];
    const char *dtype;  /* "F32", "BF16", "F16" */
    int64_t rows, cols; /* cols < 0: a vector */
};

static int model_specs(struct spec *s, bool with_lm_head)
{
    int n = 0;
#define ADD(nm, dt, r, c)                                                                          \
    do {                                                                                           \
        snprintf(s[n].name, sizeof s[n].name, "%s", nm);                                           \
        s[n].dtype = dt;                                                                           \
        s[n].rows = r;                                                                             \
        s[n].cols = c;                                                                             \
        n++;                                                                                       \
    } while (0)
    /* Dtypes are mixed on purpose: each tensor keeps its own. */
    ADD("model.embed_tokens.weight", "BF16", VOCAB, HID);
    for (int i = 0; i < L; i++) {
        char p[64];
        const struct {
            const char *suffix, *dtype;
            int64_t r, c;
        } w[] = {
            {"input_layernorm.weight", "F32", HID, -1},
            {"self_attn.q_proj.weight", "BF16", NH * HD, HID},
            {"self_attn.k_proj.weight", "F16", NKV * HD, HID},
            {"self_attn.v_proj.weight", "F16", NKV * HD, HID},
            {"self_attn.o_proj.weight", "BF16", HID, NH * HD},
            {"post_attention_layernorm.weight", "F32", HID, -1},
            {"mlp.gate_proj.weight", "BF16", INTER, HID},
            {"mlp.up_proj.weight", "BF16", INTER, HID},
            {"mlp.down_proj.weight", "F32", HID, INTER},
        };
        for (size_t k = 0; k < sizeof w / sizeof *w; k++) {
            snprintf(p, sizeof p, "model.layers.%d.%s", i, w[k].suffix);
            ADD(p, w[k].dtype, w[k].r, w[k].c);
        }
    }
    ADD("model.norm.weight", "F32", HID, -1);
    if (with_lm_head)
        ADD("lm_head.weight", "BF16", VOCAB, HID);
#undef ADD
    return n;
}

static size_t spec_elem_size(const struct spec *s)
{
    return strcmp(s->dtype, "F32") == 0 ? 4 : 2;
}

/* Writes specs as model.safetensors; element k of tensor t holds t + k/1024,
 * rounded to the tensor's dtype. */
static void write_model_file(const char *dir, const struct spec *s, int n)
{
    size_t hcap = 64 + (size_t)n * 192, hlen = 0, total = 0;
    char *hdr = malloc(hcap);
    hlen += (size_t)snprintf(hdr + hlen, hcap - hlen, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int t = 0; t < n; t++) {
        size_t numel = (size_t)s[t].rows * (size_t)(s[t].cols < 0 ? 1 : s[t].cols);
        size_t nb = numel * spec_elem_size(&s[t]);
        char shape[48];
        if (s[t].cols < 0)
            snprintf(shape, sizeof shape, "[%lld]", (long long)s[t].rows);
        else
            snprintf(shape, sizeof shape, "[%lld,%lld]", (long long)s[t].rows,
                     (long long)s[t].cols);
        hlen +=
            (size_t)snprintf(hdr + hlen, hcap - hlen,
                             ",\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
                             s[t].name, s[t].dtype, shape, total, total + nb);
        total += nb;
    }
    snprintf(hdr + hlen, hcap - hlen, "}");
    unsigned char *data = malloc(total ? total : 1);
    size_t off = 0;
    for (int t = 0; t < n; t++) {
        size_t numel = (size_t)s[t].rows * (size_t)(s[t].cols < 0 ? 1 : s[t].cols);
        for (size_t k = 0; k < numel; k++) {
            float v = (float)t + (float)k / 1024.0f;
            if (strcmp(s[t].dtype, "F32") == 0) {
                memcpy(data + off, &v, 4);
                off += 4;
            } else {
                uint16_t h =
                    strcmp(s[t].dtype, "BF16") == 0 ? folio_f32_to_bf16(v) : folio_f32_to_f16(v);
                memcpy(data + off, &h, 2);
                off += 2;
            }
        }
    }
    write_st(dir, "model.safetensors", hdr, data, total);
    free(hdr);
    free(data);
}

static void write_config(const char *dir, bool tied, const char *extra)
{
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
             "\"hidden_size\":%d,\"intermediate_size\":%d,\"num_hidden_layers\":%d,"
             "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"vocab_size\":%d,"
             "\"max_position_embeddings\":256,\"rms_norm_eps\":1e-05,\"rope_theta\":10000.0,"
             "\"rope_scaling\":null,\"tie_word_embeddings\":%s,\"bos_token_id\":1,"
             "\"eos_token_id\":2,\"hidden_act\":\"silu\"%s}",
             HID, INTER, L, NH, NKV, VOCAB, tied ? "true" : "false", extra ? extra : "");
    write_text(dir, "config.json", cfg);
}

static void expect_model_error(const char *dir, const char *a, const char *b, const char *c)
{
    struct folio_model *m = (struct folio_model *)1;
    err[0] = '\0';
    int rc = folio_model_open(dir, &m, err, sizeof err);
    CHECK(rc == -1);
    CHECK(m == NULL);
    bool ok = contains(err, a) && (!b || contains(err, b)) && (!c || contains(err, c));
    CHECK(ok);
    if (rc != -1 || !ok)
        fprintf(stderr, "  message was: %s\n  wanted: %s | %s | %s\n", err, a, b ? b : "",
                c ? c : "");
    if (rc == 0)
        folio_model_close(m);
}

static void test_model(void)
{
    char *dir = make_dir();
    struct spec s[64];
    int n = model_specs(s, true);
    write_model_file(dir, s, n);
    write_config(dir, false, NULL);

    struct folio_model *m = NULL;
    int rc = folio_model_open(dir, &m, err, sizeof err);
    CHECK(rc == 0);
    if (rc == 0) {
        CHECK(m->config.num_layers == L && m->config.head_dim == HD);
        CHECK(m->embed && m->embed->dtype == FOLIO_DTYPE_BF16 && m->embed->shape[0] == VOCAB);
        CHECK(m->lm_head && m->lm_head != m->embed &&
              strcmp(m->lm_head->name, "lm_head.weight") == 0);
        CHECK(m->final_norm && m->final_norm->ndim == 1);
        CHECK(m->layers[1].wk->dtype == FOLIO_DTYPE_F16 && m->layers[1].wk->shape[0] == NKV * HD);
        CHECK(strcmp(m->layers[1].w_down->name, "model.layers.1.mlp.down_proj.weight") == 0);
        /* Values read back through each dtype: tensor t element k = t + k/1024. */
        CHECK(folio_tensor_get_f32(m->embed, 5) == 5.0f / 1024.0f);
        CHECK(folio_tensor_get_f32(m->layers[0].wk, 7) ==
              folio_f16_to_f32(folio_f32_to_f16(3.0f + 7.0f / 1024.0f)));
        CHECK(folio_tensor_get_f32(m->layers[0].wk, 7) != 3.0f);
        CHECK(folio_tensor_get_f32(m->layers[0].w_down, 95) == 9.0f + 95.0f / 1024.0f);
        folio_model_close(m);
    } else {
        fprintf(stderr, "  %s\n", err);
    }

    /* Untied without lm_head.weight. */
    n = model_specs(s, false);
    write_model_file(dir, s, n);
    expect_model_error(dir, "'lm_head.weight'", "not found", "model.safetensors");

    /* Tied: the embedding serves as the LM head. */
    write_config(dir, true, NULL);
    m = NULL;
    rc = folio_model_open(dir, &m, err, sizeof err);
    CHECK(rc == 0 && m && m->lm_head == m->embed);
    if (rc == 0)
        folio_model_close(m);

    /* A misshapen tensor: expected and found shapes in the message. */
    n = model_specs(s, true);
    for (int t = 0; t < n; t++)
        if (strcmp(s[t].name, "model.layers.1.self_attn.k_proj.weight") == 0)
            s[t].rows = NH * HD;
    write_model_file(dir, s, n);
    write_config(dir, false, NULL);
    expect_model_error(dir, "'model.layers.1.self_attn.k_proj.weight'", "[8, 8]",
                       "expected [4, 8]");

    /* A norm stored as a matrix. */
    n = model_specs(s, true);
    for (int t = 0; t < n; t++)
        if (strcmp(s[t].name, "model.norm.weight") == 0)
            s[t].cols = 1;
    write_model_file(dir, s, n);
    expect_model_error(dir, "'model.norm.weight'", "[8, 1]", "expected [8]");

    /* A missing layer tensor. */
    n = model_specs(s, true);
    for (int t = 0; t < n; t++)
        if (strcmp(s[t].name, "model.layers.1.mlp.up_proj.weight") == 0)
            s[t] = s[--n];
    write_model_file(dir, s, n);
    expect_model_error(dir, "'model.layers.1.mlp.up_proj.weight'", "not found", NULL);

    /* A config that promises more layers than the file has. */
    n = model_specs(s, true);
    write_model_file(dir, s, n);
    write_config(dir, false, NULL);
    char cfg[512];
    snprintf(cfg, sizeof cfg, ",\"head_dim\":%d", HD * 2);
    write_config(dir, false, cfg);
    expect_model_error(dir, "'model.layers.0.self_attn.q_proj.weight'", "expected [16, 8]",
                       "num_attention_heads*head_dim");

    /* Errors from the config and the checkpoint come through. */
    write_text(dir, "config.json", "{");
    expect_model_error(dir, "config.json", NULL, NULL);
    write_config(dir, false, NULL);
    remove_file(dir, "model.safetensors");
    expect_model_error(dir, "model.safetensors", NULL, NULL);
    remove_dir(dir);
}

/* ---- config.json ---- */

static int load_config_text(const char *dir, const char *text, struct folio_model_config *c)
{
    write_text(dir, "config.json", text);
    err[0] = '\0';
    return folio_model_config_load(dir, c, err, sizeof err);
}

#define BASE                                                                                       \
    "\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,"                       \
    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":32000"

static void expect_config_error(const char *dir, const char *text, const char *a, const char *b)
{
    struct folio_model_config c;
    int rc = load_config_text(dir, text, &c);
    bool ok = contains(err, "config.json") && contains(err, a) && (!b || contains(err, b));
    CHECK(rc == -1);
    CHECK(ok);
    if (rc != -1 || !ok)
        fprintf(stderr, "  config %s\n  message was: %s\n  wanted: %s | %s\n", text, err, a,
                b ? b : "");
}

static void test_config(void)
{
    char *dir = make_dir();
    struct folio_model_config c;

    /* Defaults: head_dim from hidden/heads, kv_heads = heads, no BOS/EOS. */
    CHECK(load_config_text(dir, "{" BASE "}", &c) == 0);
    CHECK(strcmp(c.model_type, "llama") == 0);
    CHECK(c.hidden_size == 64 && c.intermediate_size == 128 && c.num_layers == 2);
    CHECK(c.num_heads == 4 && c.num_kv_heads == 4 && c.head_dim == 16 && c.vocab_size == 32000);
    CHECK(c.max_position_embeddings == 2048 && c.rms_norm_eps == 1e-6f && c.rope_theta == 10000.0f);
    CHECK(!c.tie_word_embeddings && c.rope_scaling.type == FOLIO_ROPE_NONE);
    CHECK(c.bos_token_id == -1 && c.num_eos_token_ids == 0);

    /* A field given twice is refused rather than guessed at. */
    expect_config_error(dir, "{" BASE ",\"vocab_size\":128}", "vocab_size", NULL);

    /* Every field given, EOS as a list, llama3 rope scaling (Llama-3.1's config). */
    int rc;
    rc = load_config_text(
        dir,
        "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,"
        "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":128256,"
        "\"num_key_value_heads\":2,\"head_dim\":32,\"max_position_embeddings\":131072,"
        "\"rms_norm_eps\":1e-05,\"rope_theta\":500000.0,\"tie_word_embeddings\":true,"
        "\"bos_token_id\":128000,\"eos_token_id\":[128001,128008,128009],"
        "\"rope_scaling\":{\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
        "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"}}",
        &c);
    CHECK(rc == 0);
    if (rc != 0)
        fprintf(stderr, "  %s\n", err);
    CHECK(c.num_kv_heads == 2 && c.head_dim == 32 && c.max_position_embeddings == 131072);
    CHECK(c.rms_norm_eps == 1e-5f && c.rope_theta == 500000.0f && c.tie_word_embeddings);
    CHECK(c.bos_token_id == 128000 && c.num_eos_token_ids == 3 && c.eos_token_ids[0] == 128001 &&
          c.eos_token_ids[2] == 128009);
    CHECK(c.rope_scaling.type == FOLIO_ROPE_LLAMA3 && c.rope_scaling.factor == 8.0f &&
          c.rope_scaling.low_freq_factor == 1.0f && c.rope_scaling.high_freq_factor == 4.0f &&
          c.rope_scaling.original_max_position_embeddings == 8192);

    /* EOS as a number; the old "type" key; linear scaling; mistral. */
    CHECK(load_config_text(dir,
                           "{" BASE ",\"eos_token_id\":2,\"bos_token_id\":null,"
                           "\"rope_scaling\":{\"type\":\"linear\",\"factor\":4}}",
                           &c) == 0);
    CHECK(c.num_eos_token_ids == 1 && c.eos_token_ids[0] == 2 && c.bos_token_id == -1);
    CHECK(c.rope_scaling.type == FOLIO_ROPE_LINEAR && c.rope_scaling.factor == 4.0f);
    CHECK(load_config_text(dir,
                           "{\"model_type\":\"mistral\",\"hidden_size\":64,"
                           "\"intermediate_size\":128,\"num_hidden_layers\":2,"
                           "\"num_attention_heads\":4,\"vocab_size\":32000,"
                           "\"max_position_embeddings\":32768,\"sliding_window\":null}",
                           &c) == 0);
    CHECK(strcmp(c.model_type, "mistral") == 0);

    /* The real TinyLlama config (the repository's assets/; ctest runs in the source folder). */
    const char *p = "assets/models/tinyllama-1.1b-shape";
    CHECK(folio_model_config_load(p, &c, err, sizeof err) == 0);
    CHECK(c.hidden_size == 2048 && c.num_layers == 22 && c.num_heads == 32 && c.num_kv_heads == 4 &&
          c.head_dim == 64 && c.intermediate_size == 5632);
    CHECK(c.bos_token_id == 1 && c.num_eos_token_ids == 1 && c.eos_token_ids[0] == 2);

    /* Errors name the file and the field. */
    expect_config_error(dir, "{\"model_type\":\"llama\"}", "\"hidden_size\"", "missing");
    expect_config_error(dir,
                        "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,"
                        "\"num_hidden_layers\":2,\"vocab_size\":32000}",
                        "\"num_attention_heads\"", "missing");
    expect_config_error(dir, "{\"hidden_size\":64}", "\"model_type\"", NULL);
    expect_config_error(dir,
                        "{\"model_type\":\"gpt2\",\"hidden_size\":64,\"intermediate_size\":128,"
                        "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":50257}",
                        "\"gpt2\"", "not supported");
    expect_config_error(dir, "{" BASE ",\"num_key_value_heads\":3}", "\"num_key_value_heads\"",
                        NULL);
    expect_config_error(dir, "{" BASE ",\"num_key_value_heads\":0}", "\"num_key_value_heads\"",
                        NULL);
    expect_config_error(dir,
                        "{\"model_type\":\"llama\",\"hidden_size\":-64,\"intermediate_size\":128,"
                        "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":32000}",
                        "\"hidden_size\"", NULL);
    expect_config_error(
        dir,
        "{\"model_type\":\"llama\",\"hidden_size\":\"64\",\"intermediate_size\":128,"
        "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":32000}",
        "\"hidden_size\"", "integer");
    expect_config_error(dir,
                        "{\"model_type\":\"llama\",\"hidden_size\":65,\"intermediate_size\":128,"
                        "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":32000}",
                        "\"hidden_size\"", "head_dim");
    expect_config_error(dir, "{" BASE ",\"head_dim\":15}", "\"head_dim\"", "even");
    expect_config_error(dir,
                        "{\"model_type\":\"llama\",\"hidden_size\":65,\"intermediate_size\":128,"
                        "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":32000,"
                        "\"head_dim\":null}",
                        "\"hidden_size\"", "head_dim");
    expect_config_error(dir, "{" BASE ",\"rms_norm_eps\":0}", "\"rms_norm_eps\"", NULL);
    expect_config_error(dir, "{" BASE ",\"tie_word_embeddings\":1}", "\"tie_word_embeddings\"",
                        NULL);
    expect_config_error(dir, "{" BASE ",\"eos_token_id\":32000}", "\"eos_token_id\"", NULL);
    expect_config_error(dir, "{" BASE ",\"eos_token_id\":[1,2,3,4,5,6,7,8,9]}", "\"eos_token_id\"",
                        "at most");
    expect_config_error(dir, "{" BASE ",\"eos_token_id\":\"</s>\"}", "\"eos_token_id\"", NULL);
    expect_config_error(dir, "{" BASE ",\"bos_token_id\":-1}", "\"bos_token_id\"", NULL);
    expect_config_error(dir, "{" BASE ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}",
                        "\"yarn\"", "not supported");
    expect_config_error(dir, "{" BASE ",\"rope_scaling\":{\"factor\":4}}", "rope_type", NULL);
    expect_config_error(dir,
                        "{" BASE ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,"
                        "\"low_freq_factor\":1,\"high_freq_factor\":4}}",
                        "\"rope_scaling.original_max_position_embeddings\"", "missing");
    expect_config_error(dir,
                        "{" BASE ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,"
                        "\"low_freq_factor\":4,\"high_freq_factor\":4,"
                        "\"original_max_position_embeddings\":8192}}",
                        "high_freq_factor", NULL);
    expect_config_error(dir, "{" BASE ",\"rope_scaling\":{\"rope_type\":\"linear\"}}",
                        "\"rope_scaling.factor\"", NULL);
    expect_config_error(dir, "{" BASE ",\"rope_scaling\":\"linear\"}", "\"rope_scaling\"", NULL);
    expect_config_error(dir, "{" BASE ",\"attention_bias\":true}", "\"attention_bias\"", NULL);
    expect_config_error(dir, "{" BASE ",\"hidden_act\":\"gelu\"}", "\"hidden_act\"", NULL);
    expect_config_error(dir, "{" BASE ",}", "line 1", NULL);
    expect_config_error(dir, "[]", "not a JSON object", NULL);
    remove_file(dir, "config.json");
    CHECK(folio_model_config_load(dir, &c, err, sizeof err) == -1 && contains(err, "config.json"));
    remove_dir(dir);
}

/* ---- the Python fixture's checkpoints ---- */

/* Writes a fixture model with tests/fixtures/make_tiny_model.py (run from the
 * repository root, as ctest does) into a new directory. */
static char *make_fixture(const char *args)
{
    char *dir = make_dir();
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 tests/fixtures/make_tiny_model.py %s --layers 2 --hidden 32 --heads 4 "
             "--kv-heads 2 --intermediate 48 --vocab 512 --seed 3 %s >/dev/null",
             dir, args);
    int rc = system(cmd);
    CHECK(rc == 0);
    if (rc != 0)
        fprintf(stderr, "  failed: %s\n", cmd);
    return dir;
}

static struct folio_model *open_or_report(const char *dir)
{
    struct folio_model *m = NULL;
    if (folio_model_open(dir, &m, err, sizeof err) != 0) {
        fprintf(stderr, "  %s\n", err);
        return NULL;
    }
    return m;
}

/* The fixture's bf16 and f16 checkpoints hold its f32 weights rounded as
 * folio_f32_to_bf16 and folio_f32_to_f16 round them (numpy and this C code
 * agree bit for bit), and every layout it writes opens. */
static void test_fixture_checkpoints(void)
{
    char *d32 = make_fixture("--dtype f32");
    char *d16 = make_fixture("--dtype f16 --shards 3");
    char *dbf = make_fixture("--dtype bf16 --shards 2");
    char *dtied = make_fixture("--dtype bf16 --tie-embeddings --rope-scaling-llama3");
    struct folio_model *m32 = open_or_report(d32), *m16 = open_or_report(d16),
                       *mbf = open_or_report(dbf), *mtied = open_or_report(dtied);
    CHECK(m32 && m16 && mbf && mtied);
    if (m32 && m16 && mbf) {
        CHECK(folio_checkpoint_num_tensors(m32->checkpoint) == 21);
        CHECK(contains(folio_checkpoint_source(m16->checkpoint), "index.json"));
        size_t bad_bf = 0, bad_f16 = 0, total = 0;
        for (size_t i = 0; i < folio_checkpoint_num_tensors(m32->checkpoint); i++) {
            const struct folio_tensor *t32 = folio_checkpoint_tensor(m32->checkpoint, i);
            const struct folio_tensor *tbf = folio_checkpoint_find(mbf->checkpoint, t32->name);
            const struct folio_tensor *t16 = folio_checkpoint_find(m16->checkpoint, t32->name);
            CHECK(tbf && t16 && tbf->dtype == FOLIO_DTYPE_BF16 && t16->dtype == FOLIO_DTYPE_F16);
            if (!tbf || !t16 || folio_tensor_numel(tbf) != folio_tensor_numel(t32) ||
                folio_tensor_numel(t16) != folio_tensor_numel(t32))
                continue;
            const float *x = t32->data;
            const uint16_t *b = tbf->data, *h = t16->data;
            for (size_t k = 0; k < folio_tensor_numel(t32); k++) {
                bad_bf += b[k] != folio_f32_to_bf16(x[k]);
                bad_f16 += h[k] != folio_f32_to_f16(x[k]);
            }
            total += folio_tensor_numel(t32);
        }
        CHECK(total > 40000);
        CHECK(bad_bf == 0);
        CHECK(bad_f16 == 0);
        if (bad_bf || bad_f16)
            fprintf(stderr, "  %zu bf16 and %zu f16 of %zu elements differ\n", bad_bf, bad_f16,
                    total);
    }
    if (mtied) {
        CHECK(mtied->lm_head == mtied->embed);
        CHECK(mtied->config.rope_scaling.type == FOLIO_ROPE_LLAMA3);
        CHECK(folio_checkpoint_find(mtied->checkpoint, "lm_head.weight") == NULL);
    }
    folio_model_close(m32);
    folio_model_close(m16);
    folio_model_close(mbf);
    folio_model_close(mtied);
    remove_dir(d32);
    remove_dir(d16);
    remove_dir(dbf);
    remove_dir(dtied);
}

int main(void)
{
    test_conversions();
    test_good_file();
    test_misaligned_tensor();
    test_bad_files();
    test_damage_sweep();
    test_shards();
    test_model();
    test_config();
    test_fixture_checkpoints();
    return check_report();
}
