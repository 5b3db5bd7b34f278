/* Binds a checkpoint's tensors to the Llama architecture its config.json
 * describes: every weight by its Hugging Face name, each shape checked, so
 * that the backends can index the weights without checking anything. */
#include "model.h"
#include "error.h"
#include "fp8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void format_shape(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t off = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && off < len; d++)
        off += (size_t)snprintf(buf + off, len - off, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (off < len)
        snprintf(buf + off, len - off, "]");
}

/* Finds name and checks it has shape [rows, cols] (cols < 0: a vector of rows).
 * what says where the expected sizes come from, for the message. */
static const struct folio_tensor *bind(const struct folio_checkpoint *ck, const char *name,
                                       int64_t rows, int64_t cols, const char *what, char *err,
                                       size_t errlen)
{
    const struct folio_tensor *t = folio_checkpoint_find(ck, name);
    if (!t) {
        folio_set_err(err, errlen, "%s: tensor '%s' not found", folio_checkpoint_source(ck), name);
        return NULL;
    }
    int64_t want[2] = {rows, cols};
    int want_ndim = cols < 0 ? 1 : 2;
    bool ok = t->ndim == want_ndim;
    for (int d = 0; ok && d < want_ndim; d++)
        ok = t->shape[d] == want[d];
    if (!ok) {
        char found[96], expected[64];
        format_shape(found, sizeof found, t->ndim, t->shape);
        format_shape(expected, sizeof expected, want_ndim, want);
        folio_set_err(err, errlen, "%s: tensor '%s' has shape %s, expected %s (%s)", t->file, name,
                      found, expected, what);
        return NULL;
    }
    return t;
}

static int bind_layer(const struct folio_checkpoint *ck, const struct folio_model_config *c, int i,
                      struct folio_layer_weights *lw, char *err, size_t errlen)
{
    int64_t hidden = c->hidden_size, inter = c->intermediate_size;
    int64_t q_dim = (int64_t)c->num_heads * c->head_dim;
    int64_t kv_dim = (int64_t)c->num_kv_heads * c->head_dim;
    struct {
        const struct folio_tensor **slot;
        const char *suffix;
        int64_t rows, cols;
        const char *what;
    } w[] = {
        {&lw->attn_norm, "input_layernorm.weight", hidden, -1, "hidden_size"},
        {&lw->wq, "self_attn.q_proj.weight", q_dim, hidden,
         "num_attention_heads*head_dim, hidden_size"},
        {&lw->wk, "self_attn.k_proj.weight", kv_dim, hidden,
         "num_key_value_heads*head_dim, hidden_size"},
        {&lw->wv, "self_attn.v_proj.weight", kv_dim, hidden,
         "num_key_value_heads*head_dim, hidden_size"},
        {&lw->wo, "self_attn.o_proj.weight", hidden, q_dim,
         "hidden_size, num_attention_heads*head_dim"},
        {&lw->mlp_norm, "post_attention_layernorm.weight", hidden, -1, "hidden_size"},
        {&lw->w_gate, "mlp.gate_proj.weight", inter, hidden, "intermediate_size, hidden_size"},
        {&lw->w_up, "mlp.up_proj.weight", inter, hidden, "intermediate_size, hidden_size"},
        {&lw->w_down, "mlp.down_proj.weight", hidden, inter, "hidden_size, intermediate_size"},
    };
    for (size_t k = 0; k < sizeof w / sizeof *w; k++) {
        char name[128];
        snprintf(name, sizeof name, "model.layers.%d.%s", i, w[k].suffix);
        *w[k].slot = bind(ck, name, w[k].rows, w[k].cols, w[k].what, err, errlen);
        if (!*w[k].slot)
            return -1;
    }
    if (!c->qkv_bias)
        return 0;
    struct {
        const struct folio_tensor **slot;
        const char *suffix;
        int64_t rows;
        const char *what;
    } b[] = {
        {&lw->bq, "self_attn.q_proj.bias", q_dim, "num_attention_heads*head_dim"},
        {&lw->bk, "self_attn.k_proj.bias", kv_dim, "num_key_value_heads*head_dim"},
        {&lw->bv, "self_attn.v_proj.bias", kv_dim, "num_key_value_heads*head_dim"},
    };
    for (size_t k = 0; k < sizeof b / sizeof *b; k++) {
        char name[128];
        snprintf(name, sizeof name, "model.layers.%d.%s", i, b[k].suffix);
        *b[k].slot = bind(ck, name, b[k].rows, -1, b[k].what, err, errlen);
        if (!*b[k].slot)
            return -1;
    }
    return 0;
}

/* One KV scale of layer i (which: 'k' or 'v') into *out, if the checkpoint has it: vLLM's name
 * (self_attn.k_scale) or the one llm-compressor wrote before it (self_attn.k_proj.output_scale).
 * 1 found, 0 absent, -1 with err set when it is not one finite positive number. */
static int find_kv_scale(const struct folio_checkpoint *ck, int i, char which, float *out,
                         char *err, size_t errlen)
{
    char name[2][128];
    snprintf(name[0], sizeof name[0], "model.layers.%d.self_attn.%c_scale", i, which);
    snprintf(name[1], sizeof name[1], "model.layers.%d.self_attn.%c_proj.output_scale", i, which);
    for (int n = 0; n < 2; n++) {
        const struct folio_tensor *t = folio_checkpoint_find(ck, name[n]);
        if (!t)
            continue;
        bool scalar = t->ndim == 0 || (t->ndim == 1 && t->shape[0] == 1);
        float v = scalar ? folio_tensor_get_f32(t, 0) : NAN;
        if (!(v > 0.0f) || !isfinite(v)) {
            char found[96];
            format_shape(found, sizeof found, t->ndim, t->shape);
            folio_set_err(err, errlen,
                          "%s: tensor '%s' (shape %s, value %g) must be one finite positive "
                          "number: a KV cache scale per tensor (per-head scales are not supported)",
                          t->file, name[n], found, (double)v);
            return -1;
        }
        *out = v;
        return 1;
    }
    return 0;
}

/* Every layer's KV cache scales, from the checkpoint where it has them: all layers' K and V or
 * none, since a missing one would silently run that layer at another scale. */
static int bind_kv_scales(struct folio_model *m, char *err, size_t errlen)
{
    int n = m->config.num_layers, found = 0, missing = -1;
    for (int i = 0; i < 2 * n; i++) {
        struct folio_layer_weights *L = &m->layers[i / 2];
        float *slot = i % 2 ? &L->v_scale : &L->k_scale;
        *slot = FOLIO_KV_FP8_SCALE;
        int rc = find_kv_scale(m->checkpoint, i / 2, "kv"[i % 2], slot, err, errlen);
        if (rc < 0)
            return -1;
        found += rc;
        if (rc == 0 && missing < 0)
            missing = i;
    }
    if (found != 0 && missing >= 0) {
        folio_set_err(err, errlen,
                      "%s: the checkpoint has KV cache scales for %d of the %d layers' K and V; "
                      "model.layers.%d.self_attn.%c_scale is missing",
                      folio_checkpoint_source(m->checkpoint), found, 2 * n, missing / 2,
                      "kv"[missing % 2]);
        return -1;
    }
    m->kv_scales = found != 0;
    return 0;
}

int folio_model_open(const char *model_dir, struct folio_model **out, char *err, size_t errlen)
{
    return folio_model_open_flags(model_dir, 0, out, err, errlen);
}

int folio_model_open_flags(const char *model_dir, unsigned flags, struct folio_model **out,
                           char *err, size_t errlen)
{
    *out = NULL;
    struct folio_model *m = calloc(1, sizeof *m);
    if (!m) {
        folio_set_err(err, errlen, "%s: out of memory", model_dir);
        return -1;
    }
    if (folio_model_config_load(model_dir, &m->config, err, errlen) != 0 ||
        folio_checkpoint_open_flags(model_dir, flags, &m->checkpoint, err, errlen) != 0)
        goto fail;
    const struct folio_model_config *c = &m->config;
    const struct folio_checkpoint *ck = m->checkpoint;
    m->embed = bind(ck, "model.embed_tokens.weight", c->vocab_size, c->hidden_size,
                    "vocab_size, hidden_size", err, errlen);
    if (!m->embed)
        goto fail;
    m->final_norm = bind(ck, "model.norm.weight", c->hidden_size, -1, "hidden_size", err, errlen);
    if (!m->final_norm)
        goto fail;
    /* Tied embeddings use the embedding as the LM head, as transformers does,
     * even where the file also carries an lm_head copy. */
    if (c->tie_word_embeddings) {
        m->lm_head = m->embed;
    } else {
        m->lm_head = bind(ck, "lm_head.weight", c->vocab_size, c->hidden_size,
                          "vocab_size, hidden_size; tie_word_embeddings is false", err, errlen);
        if (!m->lm_head)
            goto fail;
    }
    m->layers = calloc((size_t)c->num_layers, sizeof *m->layers);
    if (!m->layers) {
        folio_set_err(err, errlen, "%s: out of memory", model_dir);
        goto fail;
    }
    for (int i = 0; i < c->num_layers; i++)
        if (bind_layer(ck, c, i, &m->layers[i], err, errlen) != 0)
            goto fail;
    if (bind_kv_scales(m, err, errlen) != 0)
        goto fail;
    *out = m;
    return 0;
fail:
    folio_model_close(m);
    return -1;
}

void folio_model_close(struct folio_model *m)
{
    if (!m)
        return;
    folio_checkpoint_close(m->checkpoint);
    free(m->layers);
    free(m);
}
