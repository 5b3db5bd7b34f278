/* A GGUF file presented as a Hugging Face checkpoint, so that nothing past
 * folio_checkpoint_open knows which format a model came from: each tensor gets
 * its Hugging Face name (blk.N.attn_q.weight -> model.layers.N.self_attn.
 * q_proj.weight, ...) and shape ([rows, cols], ggml lists [cols, rows]);
 * F32/F16/BF16 tensors are used in place, quantized ones dequantized to f32 at
 * load. For llama, llama.cpp's converter reorders the rows of q_proj and
 * k_proj within each head so that its RoPE can rotate adjacent pairs; Folio
 * rotates halves, as Hugging Face does, so those rows are put back in Hugging
 * Face's order (Qwen2 files keep Hugging Face's order and add q/k/v biases). A
 * tensor this mapping does not know is refused, never silently ignored. */
#include "checkpoint_impl.h"
#include "error.h"
#include "gguf.h"
#include "model_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum row_order { ROWS_AS_IS, ROWS_Q, ROWS_K };

struct name_map {
    const char *gguf, *hf;
    enum row_order rows;
};

static const struct name_map global_names[] = {
    {"token_embd.weight", "model.embed_tokens.weight", ROWS_AS_IS},
    {"output_norm.weight", "model.norm.weight", ROWS_AS_IS},
    {"output.weight", "lm_head.weight", ROWS_AS_IS},
};

static const struct name_map layer_names[] = {
    {"attn_norm.weight", "input_layernorm.weight", ROWS_AS_IS},
    {"attn_q.weight", "self_attn.q_proj.weight", ROWS_Q},
    {"attn_k.weight", "self_attn.k_proj.weight", ROWS_K},
    {"attn_v.weight", "self_attn.v_proj.weight", ROWS_AS_IS},
    {"attn_output.weight", "self_attn.o_proj.weight", ROWS_AS_IS},
    {"ffn_norm.weight", "post_attention_layernorm.weight", ROWS_AS_IS},
    {"ffn_gate.weight", "mlp.gate_proj.weight", ROWS_AS_IS},
    {"ffn_up.weight", "mlp.up_proj.weight", ROWS_AS_IS},
    {"ffn_down.weight", "mlp.down_proj.weight", ROWS_AS_IS},
};

/* Qwen2's projection biases, in Hugging Face's order already (its converter
 * permutes nothing). */
static const struct name_map bias_names[] = {
    {"attn_q.bias", "self_attn.q_proj.bias", ROWS_AS_IS},
    {"attn_k.bias", "self_attn.k_proj.bias", ROWS_AS_IS},
    {"attn_v.bias", "self_attn.v_proj.bias", ROWS_AS_IS},
};

/* The Hugging Face name of a GGUF tensor, and whether its rows need putting
 * back (llama only); -1 when the mapping has none. */
static int hf_name(const char *name, const struct folio_model_config *cfg, char *out, size_t outlen,
                   enum row_order *rows)
{
    for (size_t i = 0; i < sizeof global_names / sizeof *global_names; i++) {
        if (strcmp(name, global_names[i].gguf) == 0) {
            snprintf(out, outlen, "%s", global_names[i].hf);
            *rows = global_names[i].rows;
            return 0;
        }
    }
    if (strncmp(name, "blk.", 4) != 0)
        return -1;
    const char *p = name + 4;
    long layer = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 9; p++, digits++)
        layer = layer * 10 + (*p - '0');
    if (digits == 0 || *p != '.' || (digits > 1 && name[4] == '0'))
        return -1;
    for (size_t i = 0; i < sizeof layer_names / sizeof *layer_names; i++) {
        if (strcmp(p + 1, layer_names[i].gguf) == 0) {
            snprintf(out, outlen, "model.layers.%ld.%s", layer, layer_names[i].hf);
            *rows = cfg->qkv_bias ? ROWS_AS_IS : layer_names[i].rows;
            return 0;
        }
    }
    for (size_t i = 0; cfg->qkv_bias && i < sizeof bias_names / sizeof *bias_names; i++) {
        if (strcmp(p + 1, bias_names[i].gguf) == 0) {
            snprintf(out, outlen, "model.layers.%ld.%s", layer, bias_names[i].hf);
            *rows = ROWS_AS_IS;
            return 0;
        }
    }
    return -1;
}

/* Hugging Face row r of a q/k projection lives in GGUF row perm(r): within a
 * head of head_dim rows, the converter interleaved the two halves. */
static uint64_t gguf_row(uint64_t r, uint64_t head_dim)
{
    uint64_t head = r / head_dim, w = r % head_dim, half = head_dim / 2;
    return head * head_dim + 2 * (w % half) + w / half;
}

static int dequantize_tensor(const struct folio_gguf_tensor *gt, enum row_order rows,
                             const struct folio_model_config *cfg, float *out, char *err,
                             size_t errlen)
{
    if (rows == ROWS_AS_IS)
        return folio_gguf_dequantize(gt, 0, folio_gguf_tensor_numel(gt), out, err, errlen);
    int heads = rows == ROWS_Q ? cfg->num_heads : cfg->num_kv_heads;
    uint64_t want = (uint64_t)heads * (uint64_t)cfg->head_dim;
    if (gt->ndim != 2 || (uint64_t)gt->ne[1] != want) {
        folio_set_err(err, errlen,
                      "%s: tensor '%s': expected %llu rows (%d heads of %d) of the hidden size",
                      gt->file, gt->name, (unsigned long long)want, heads, cfg->head_dim);
        return -1;
    }
    uint64_t cols = (uint64_t)gt->ne[0];
    for (uint64_t r = 0; r < want; r++)
        if (folio_gguf_dequantize(gt, gguf_row(r, (uint64_t)cfg->head_dim) * cols, cols,
                                  out + r * cols, err, errlen) != 0)
            return -1;
    return 0;
}

const void *folio_tensor_gguf_row(const struct folio_tensor *t, size_t r, uint32_t *type)
{
    const struct folio_gguf_tensor *gt = t->gguf;
    if (!gt || gt->ndim < 1)
        return NULL;
    if (type)
        *type = gt->type;
    uint64_t cols = (uint64_t)gt->ne[0], bs = (uint64_t)folio_ggml_block_size(gt->type);
    uint64_t row = t->gguf_head_dim ? gguf_row(r, (uint64_t)t->gguf_head_dim) : r;
    if (bs == 0 || cols % bs != 0)
        return NULL;
    return (const unsigned char *)gt->data +
           row * (cols / bs) * (uint64_t)folio_ggml_type_size(gt->type);
}

void folio_tensor_gguf_read_f32(const struct folio_tensor *t, size_t first, size_t count,
                                float *out)
{
    const struct folio_gguf_tensor *gt = t->gguf;
    size_t cols = (size_t)gt->ne[0];
    char err[256];
    while (count > 0) {
        size_t r = first / cols, c = first % cols, n = cols - c < count ? cols - c : count;
        size_t row = t->gguf_head_dim ? gguf_row(r, (uint64_t)t->gguf_head_dim) : r;
        /* A whole row, then the wanted part: blocks are dequantized whole. */
        float *tmp = c == 0 && n == cols ? out : malloc(cols * sizeof *tmp);
        if (!tmp || folio_gguf_dequantize(gt, (uint64_t)row * cols, cols, tmp, err, sizeof err)) {
            for (size_t k = 0; k < n; k++)
                out[k] = NAN;
        } else if (tmp != out) {
            memcpy(out, tmp + c, n * sizeof *out);
        }
        if (tmp != out)
            free(tmp);
        out += n;
        first += n;
        count -= n;
    }
}

/* One GGUF tensor as a checkpoint tensor named hf. */
static int add_tensor(struct folio_checkpoint *ck, const struct folio_gguf_tensor *gt,
                      const char *hf, enum row_order rows, const struct folio_model_config *cfg,
                      char *err, size_t errlen)
{
    struct folio_tensor t = {.file = ck->source, .ndim = gt->ndim};
    for (int d = 0; d < gt->ndim; d++)
        t.shape[d] = gt->ne[gt->ndim - 1 - d];
    if (rows == ROWS_AS_IS &&
        (gt->type == FOLIO_GGML_F32 || gt->type == FOLIO_GGML_F16 || gt->type == FOLIO_GGML_BF16)) {
        t.dtype = gt->type == FOLIO_GGML_F32   ? FOLIO_DTYPE_F32
                  : gt->type == FOLIO_GGML_F16 ? FOLIO_DTYPE_F16
                                               : FOLIO_DTYPE_BF16;
        t.data = gt->data;
        t.nbytes = gt->nbytes;
    } else if ((ck->flags & FOLIO_CHECKPOINT_KEEP_BLOCKS) &&
               (gt->type == FOLIO_GGML_Q4_0 || gt->type == FOLIO_GGML_Q4_1 ||
                gt->type == FOLIO_GGML_Q8_0)) {
        t.dtype = FOLIO_DTYPE_F32;
        t.gguf = gt;
        t.gguf_head_dim = rows == ROWS_AS_IS ? 0 : cfg->head_dim;
        t.nbytes = (size_t)folio_gguf_tensor_numel(gt) * sizeof(float);
    } else {
        uint64_t n = folio_gguf_tensor_numel(gt);
        float *buf = n <= SIZE_MAX / sizeof(float) ? malloc(n ? n * sizeof(float) : 1) : NULL;
        if (!buf || folio_checkpoint_own(ck, buf) != 0) {
            folio_set_err(err, errlen, "%s: tensor '%s': out of memory for %llu floats", ck->source,
                          gt->name, (unsigned long long)n);
            return -1;
        }
        if (dequantize_tensor(gt, rows, cfg, buf, err, errlen) != 0)
            return -1;
        t.dtype = FOLIO_DTYPE_F32;
        t.gguf = gt;
        t.gguf_head_dim = rows == ROWS_AS_IS ? 0 : cfg->head_dim;
        t.data = buf;
        t.nbytes = (size_t)n * sizeof(float);
    }
    t.name = strdup(hf);
    if (!t.name || folio_checkpoint_push(ck, &t) != 0) {
        free((char *)t.name);
        folio_set_err(err, errlen, "%s: out of memory", ck->source);
        return -1;
    }
    return 0;
}

int folio_checkpoint_load_gguf(struct folio_checkpoint *ck, char *err, size_t errlen)
{
    if (folio_gguf_open(ck->source, &ck->gguf, err, errlen) != 0)
        return -1;
    struct folio_model_config cfg;
    if (folio_model_config_from_gguf(ck->gguf, &cfg, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i < folio_gguf_num_tensors(ck->gguf); i++) {
        const struct folio_gguf_tensor *gt = folio_gguf_tensor_at(ck->gguf, i);
        char hf[160];
        enum row_order rows;
        if (hf_name(gt->name, &cfg, hf, sizeof hf, &rows) != 0) {
            folio_set_err(err, errlen,
                          "%s: tensor '%s' is not one of the %s architecture's that Folio maps "
                          "to Hugging Face names; refusing rather than ignoring it",
                          ck->source, gt->name, cfg.model_type);
            return -1;
        }
        if (add_tensor(ck, gt, hf, rows, &cfg, err, errlen) != 0)
            return -1;
    }
    return 0;
}
