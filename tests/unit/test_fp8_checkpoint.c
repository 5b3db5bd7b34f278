/* FP8 checkpoints (issue 55) below the backends: F8_E4M3 tensors read back as code x scale with
 * per-row scales ([rows, 1] F32, [rows] F16) and per-tensor ones ([] BF16), across rows and
 * from any offset; the CPU's E4M3 matrix takes a tensor-parallel block's codes and its rows'
 * scales exactly as shipped (quantizing again would change a per-tensor tensor's codes); a
 * missing, misshapen, block-wise, F8 or non-finite scale is an error naming both tensors; and
 * config.json's quantization_config is taken or refused by field and value. */
#include "check.h"
#include "cpu_matrix.h"
#include "fp8.h"
#include "model_config.h"
#include "safetensors.h"
#include "tmp_files.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static char err[1024];

struct entry {
    const char *name, *dtype, *shape; /* shape as JSON, e.g. "[3,4]" */
    const void *data;
    size_t len;
};

/* model.safetensors in dir holding the entries, in order. */
static void write_entries(const char *dir, const struct entry *e, int n)
{
    char header[4096];
    size_t off = 0, at = (size_t)snprintf(header, sizeof header, "{");
    for (int i = 0; i < n; i++) {
        at +=
            (size_t)snprintf(header + at, sizeof header - at,
                             "%s\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
                             i ? "," : "", e[i].name, e[i].dtype, e[i].shape, off, off + e[i].len);
        off += e[i].len;
    }
    at += (size_t)snprintf(header + at, sizeof header - at, "}");
    while (at % 8) /* the data section aligned, as the reference writer pads */
        header[at++] = ' ';
    size_t total = 8 + at + off;
    unsigned char *buf = malloc(total);
    for (int b = 0; b < 8; b++)
        buf[b] = (unsigned char)((uint64_t)at >> (8 * b));
    memcpy(buf + 8, header, at);
    size_t p = 8 + at;
    for (int i = 0; i < n; i++) {
        memcpy(buf + p, e[i].data, e[i].len);
        p += e[i].len;
    }
    write_file(dir, "model.safetensors", buf, total);
    free(buf);
}

static bool contains(const char *s, const char *sub)
{
    return strstr(s, sub) != NULL;
}

static void expect_open_error(const char *dir, const char *a, const char *b)
{
    struct folio_checkpoint *ck = NULL;
    err[0] = '\0';
    CHECK(folio_checkpoint_open(dir, &ck, err, sizeof err) == -1 && ck == NULL);
    CHECK(contains(err, a) && (!b || contains(err, b)));
    if (!contains(err, a) || (b && !contains(err, b)))
        fprintf(stderr, "  message was: %s\n  wanted: %s | %s\n", err, a, b ? b : "");
}

/* Codes of a [3][4] tensor, none of them 448 (0x7e), so that quantizing code x scale again would
 * give other codes; and a [2][4] one. */
static const uint8_t a_codes[12] = {0x38, 0xb8, 0x40, 0x01, 0x7d, 0x00,
                                    0x80, 0x30, 0x55, 0xd5, 0x22, 0x6a};
static const float a_scale[3] = {0.5f, 2.0f, 0.125f};
static const uint8_t b_codes[8] = {0x30, 0x31, 0x32, 0xb3, 0x10, 0x48, 0x50, 0x08};
static const uint16_t b_scale_bf16 = 0x3e80; /* 0.25 */
static const uint8_t c_codes[4] = {0x38, 0x40, 0xc0, 0x44};
static const uint16_t c_scale_f16[2] = {0x3c00, 0x4200}; /* 1, 3 */
static const float input_scale = 0.05f;

static void test_read_back(void)
{
    char *dir = make_dir_named("fp8ck");
    struct entry e[] = {
        {"a.weight_scale", "F32", "[3,1]", a_scale, sizeof a_scale},
        {"a.input_scale", "F32", "[]", &input_scale, sizeof input_scale},
        {"b.weight_scale", "BF16", "[]", &b_scale_bf16, 2},
        {"c.weight_scale", "F16", "[2]", c_scale_f16, sizeof c_scale_f16},
        {"a.weight", "F8_E4M3", "[3,4]", a_codes, sizeof a_codes},
        {"b.weight", "F8_E4M3", "[2,4]", b_codes, sizeof b_codes},
        {"c.weight", "F8_E4M3", "[2,2]", c_codes, sizeof c_codes},
    };
    write_entries(dir, e, 7);
    struct folio_checkpoint *ck = NULL;
    CHECK(folio_checkpoint_open(dir, &ck, err, sizeof err) == 0);
    if (!ck) {
        fprintf(stderr, "  %s\n", err);
        remove_dir(dir);
        return;
    }
    const struct folio_tensor *a = folio_checkpoint_find(ck, "a.weight");
    const struct folio_tensor *b = folio_checkpoint_find(ck, "b.weight");
    const struct folio_tensor *c = folio_checkpoint_find(ck, "c.weight");
    CHECK(a && a->dtype == FOLIO_DTYPE_F8_E4M3 && a->nbytes == 12 && a->num_scales == 3);
    CHECK(b && b->num_scales == 1 && c && c->num_scales == 2);
    CHECK(!strcmp(folio_dtype_name(FOLIO_DTYPE_F8_E4M3), "F8_E4M3"));
    CHECK(folio_dtype_size(FOLIO_DTYPE_F8_E4M3) == 1);
    if (!a || !b || !c) {
        folio_checkpoint_close(ck);
        remove_dir(dir);
        return;
    }
    for (int i = 0; i < 12; i++)
        CHECK(folio_tensor_get_f32(a, (size_t)i) == folio_e4m3_to_f32(a_codes[i]) * a_scale[i / 4]);
    float out[12];
    folio_tensor_read_f32(a, 3, 7, out); /* from inside row 0 into row 2 */
    for (int k = 0; k < 7; k++)
        CHECK(out[k] == folio_e4m3_to_f32(a_codes[3 + k]) * a_scale[(3 + k) / 4]);
    folio_tensor_read_f32(b, 0, 8, out);
    for (int k = 0; k < 8; k++)
        CHECK(out[k] == folio_e4m3_to_f32(b_codes[k]) * 0.25f);
    CHECK(folio_tensor_row_scale(b, 1) == 0.25f && folio_tensor_row_scale(a, 2) == 0.125f);
    CHECK(folio_tensor_get_f32(c, 3) == folio_e4m3_to_f32(c_codes[3]) * 3.0f);

    /* A tensor-parallel block (rows 1..2, columns 2..3) as E4M3 rows: codes and scales as
     * shipped. */
    struct cpu_matrix m;
    struct folio_tp_block blk = {.row0 = 1, .rows = 2, .col0 = 2, .cols = 2};
    CHECK(cpu_matrix_from_tensor(&m, a, 3, 4, blk, CPU_WEIGHTS_E4M3, "a", err, sizeof err) == 0);
    for (int r = 0; r < 2; r++) {
        const unsigned char *row = m.data + (size_t)r * m.row_bytes;
        float s;
        memcpy(&s, row + cpu_e4m3_scale_offset(2), sizeof s);
        CHECK(row[0] == a_codes[(1 + r) * 4 + 2] && row[1] == a_codes[(1 + r) * 4 + 3]);
        CHECK(s == a_scale[1 + r]);
    }
    cpu_matrix_free(&m);
    /* The per-tensor one: its codes are not what quantizing its values gives (none is 448). */
    struct folio_tp_block whole = {.row0 = 0, .rows = 2, .col0 = 0, .cols = 4};
    CHECK(cpu_matrix_from_tensor(&m, b, 2, 4, whole, CPU_WEIGHTS_E4M3, "b", err, sizeof err) == 0);
    uint8_t requant[4];
    folio_tensor_read_f32(b, 0, 4, out);
    folio_fp8_quantize_row(out, 4, requant);
    CHECK(memcmp(requant, b_codes, 4) != 0);
    for (int r = 0; r < 2; r++) {
        const unsigned char *row = m.data + (size_t)r * m.row_bytes;
        float s;
        memcpy(&s, row + cpu_e4m3_scale_offset(4), sizeof s);
        CHECK(memcmp(row, b_codes + 4 * r, 4) == 0 && s == 0.25f);
    }
    cpu_matrix_free(&m);
    /* The f32 policy (the reference without fp8) reads code x scale. */
    CHECK(cpu_matrix_from_tensor(&m, a, 3, 4, whole, CPU_WEIGHTS_F32, "a", err, sizeof err) == 0);
    float row[4];
    cpu_matrix_row_f32(&m, 1, row);
    for (int k = 0; k < 4; k++)
        CHECK(row[k] == folio_e4m3_to_f32(a_codes[4 + k]) * 2.0f);
    cpu_matrix_free(&m);
    folio_checkpoint_close(ck);
    remove_dir(dir);
}

static void test_bad_scales(void)
{
    char *dir = make_dir_named("fp8bad");
    const float six[6] = {1, 2, 3, 4, 5, 6}, two[2] = {1, 2}, inf[3] = {1, INFINITY, 1};
    struct entry w = {"a.weight", "F8_E4M3", "[3,4]", a_codes, sizeof a_codes};

    write_entries(dir, &w, 1);
    expect_open_error(dir, "'a.weight' is F8_E4M3 but its scale 'a.weight_scale'", NULL);

    struct entry grid[] = {w, {"a.weight_scale", "F32", "[3,2]", six, sizeof six}};
    write_entries(dir, grid, 2);
    expect_open_error(dir, "'a.weight' (F8_E4M3) has block-wise scales", "'a.weight_scale'");

    struct entry rows[] = {w, {"a.weight_scale", "F32", "[2]", two, sizeof two}};
    write_entries(dir, rows, 2);
    expect_open_error(dir, "'a.weight' (F8_E4M3): its scale 'a.weight_scale' has shape [2]",
                      "[3, 1]");

    struct entry f8[] = {w, {"a.weight_scale", "F8_E4M3", "[3]", a_codes, 3}};
    write_entries(dir, f8, 2);
    expect_open_error(dir, "its scale 'a.weight_scale' is F8_E4M3", "'a.weight'");

    struct entry nonfinite[] = {w, {"a.weight_scale", "F32", "[3]", inf, sizeof inf}};
    write_entries(dir, nonfinite, 2);
    expect_open_error(dir, "scale 1 of 'a.weight_scale' is inf", "'a.weight'");

    struct entry e5m2[] = {{"a.weight", "F8_E5M2", "[3,4]", a_codes, sizeof a_codes}};
    write_entries(dir, e5m2, 1);
    expect_open_error(dir, "unsupported dtype 'F8_E5M2'", "F8_E4M3");
    remove_dir(dir);
}

/* quantization_config's text (NULL: none) must load as want, or fail naming every substring. */
static void expect_quant(const char *qc, enum folio_quantization want, const char *sub1,
                         const char *sub2)
{
    char text[2048];
    snprintf(text, sizeof text, "{\"quantization_config\": %s}", qc ? qc : "null");
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    CHECK(root != NULL);
    struct folio_model_config cfg = {.quantization = FOLIO_QUANT_FP8};
    err[0] = '\0';
    int rc = folio_model_config_read_quantization("config.json", root, &cfg, err, sizeof err);
    json_decref(root);
    if (!sub1) {
        CHECK(rc == 0 && cfg.quantization == want);
        if (rc != 0)
            fprintf(stderr, "  %s\n  unexpected: %s\n", qc, err);
        return;
    }
    CHECK(rc == -1 && contains(err, sub1) && (!sub2 || contains(err, sub2)));
    if (rc != -1 || !contains(err, sub1) || (sub2 && !contains(err, sub2)))
        fprintf(stderr, "  %s\n  message was: %s\n  wanted: %s | %s\n", qc, err, sub1,
                sub2 ? sub2 : "");
}

#define CT(weights, extra)                                                                         \
    "{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", "                 \
    "\"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"], \"weights\": " weights extra     \
    "}}, \"ignore\": [\"lm_head\"], \"kv_cache_scheme\": null}"
#define W8(strategy)                                                                               \
    "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"" strategy "\", \"symmetric\": true, " \
    "\"dynamic\": false, \"block_structure\": null}"

static void test_quantization_config(void)
{
    expect_quant(NULL, FOLIO_QUANT_NONE, NULL, NULL);
    expect_quant(CT(W8("channel"), ""), FOLIO_QUANT_FP8, NULL, NULL);
    expect_quant(CT(W8("tensor"), ", \"input_activations\": {\"num_bits\": 8, \"type\": "
                                  "\"float\", \"strategy\": \"tensor\", \"dynamic\": false}"),
                 FOLIO_QUANT_FP8, NULL, NULL);
    expect_quant(CT(W8("channel"), ", \"input_activations\": {\"num_bits\": 8, \"type\": "
                                   "\"float\", \"strategy\": \"token\", \"dynamic\": true}"),
                 FOLIO_QUANT_FP8, NULL, NULL);
    expect_quant("{\"quant_method\": \"fp8\", \"activation_scheme\": \"dynamic\"}", FOLIO_QUANT_FP8,
                 NULL, NULL);
    expect_quant("{\"quant_method\": \"fp8\", \"activation_scheme\": \"static\", "
                 "\"ignored_layers\": [\"lm_head\"], \"weight_block_size\": null}",
                 FOLIO_QUANT_FP8, NULL, NULL);

    expect_quant("{\"quant_method\": \"awq\", \"bits\": 4}", 0,
                 "\"quantization_config.quant_method\" is \"awq\"", NULL);
    expect_quant("{\"quant_method\": \"gptq\"}", 0, "quant_method\" is \"gptq\"", NULL);
    expect_quant("{\"bits\": 4}", 0, "quant_method\" is absent", NULL);
    expect_quant("[1]", 0, "\"quantization_config\" must be an object", NULL);
    expect_quant("{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}", 0,
                 "\"quantization_config.weight_block_size\" is [128,128]", "block-wise");
    expect_quant("{\"quant_method\": \"fp8\", \"activation_scheme\": \"per_token\"}", 0,
                 "activation_scheme\" is \"per_token\"", NULL);
    expect_quant(CT("{\"num_bits\": 4, \"type\": \"int\", \"strategy\": \"group\", "
                    "\"group_size\": 128}",
                    ""),
                 0, "\"quantization_config.config_groups.group_0.weights.num_bits\" is 4", NULL);
    expect_quant(CT("{\"num_bits\": 8, \"type\": \"int\", \"strategy\": \"channel\"}", ""), 0,
                 "weights.type\" is \"int\"", NULL);
    expect_quant(CT(W8("group"), ""), 0, "weights.strategy\" is \"group\"", NULL);
    expect_quant(CT(W8("block"), ""), 0, "weights.strategy\" is \"block\"", NULL);
    expect_quant(CT("{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"channel\", "
                    "\"symmetric\": false}",
                    ""),
                 0, "weights.symmetric\" is false", NULL);
    expect_quant(CT(W8("channel"), ", \"input_activations\": {\"num_bits\": 8, \"type\": \"int\"}"),
                 0, "input_activations.type\" is \"int\"", NULL);
    expect_quant(CT(W8("channel"), ", \"output_activations\": {\"num_bits\": 8}"), 0,
                 "output_activations\" is {", NULL);
    expect_quant("{\"quant_method\": \"compressed-tensors\", \"format\": \"pack-quantized\", "
                 "\"config_groups\": {}}",
                 0, "\"quantization_config.format\" is \"pack-quantized\"", NULL);
    expect_quant("{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", "
                 "\"config_groups\": {\"g\": {\"weights\": " W8("channel") "}}, \"ignore\": 3}",
                 0, "\"quantization_config.ignore\" is 3", NULL);
}

int main(void)
{
    test_read_back();
    test_bad_scales();
    test_quantization_config();
    return check_report();
}
