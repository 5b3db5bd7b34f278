/* The model's weights on the GPU: every tensor checked against the config,
 * converted to bf16 on upload, Q/K/V and gate/up fused row-wise into one
 * matrix each, and the RMSNorm weights folded into the projections that read
 * the norms (see struct cuda_layer). Under --quantization fp8 each layer goes
 * through a bf16 scratch instead, its four projections are kept in e4m3 and
 * its norms as they are. */
#include <math.h>
#include <stdlib.h>

#include "cuda_internal.h"

static int check_shape(const struct folio_tensor *t, const char *what, int64_t rows, int64_t cols,
                       char *err, size_t errlen)
{
    if (!t) {
        snprintf(err, errlen, "cuda backend: tensor %s missing", what);
        return -1;
    }
    int64_t r = t->ndim >= 1 ? t->shape[0] : 0, c = t->ndim == 2 ? t->shape[1] : 1;
    if (t->ndim < 1 || t->ndim > 2 || r != rows || c != cols) {
        snprintf(err, errlen,
                 "cuda backend: tensor %s (%s) has shape [%lld, %lld], want [%lld, %lld]", t->name,
                 what, (long long)r, (long long)c, (long long)rows, (long long)cols);
        return -1;
    }
    return 0;
}

/* Copies a checkpoint tensor into dst as bf16, through a device staging buffer. */
static int upload(struct cuda_backend *cb, bf16 *dst, const struct folio_tensor *t, void *staging,
                  char *err, size_t errlen)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    /* On the step stream: a plain cudaMemcpy from pageable memory may return before its
     * DMA lands, and the non-blocking stream would not wait for it. */
    CUDA_CHECK(cudaMemcpyAsync(staging, t->data, t->nbytes, cudaMemcpyHostToDevice, cb->stream));
    int code = t->dtype == FOLIO_DTYPE_F32 ? 2 : t->dtype == FOLIO_DTYPE_F16 ? 1 : 0;
    CUDA_CHECK(folio_k_convert_to_bf16(dst, staging, code, n, cb->stream));
    CUDA_CHECK(cudaStreamSynchronize(cb->stream));
    return 0;
}

/* Folds the RMSNorm weight norm_w (hidden) into the columns of w [rows][hidden],
 * then sets norm_w to ones (see struct cuda_layer). */
static int fold_norm(struct cuda_backend *cb, bf16 *w, int rows, bf16 *norm_w, char *err,
                     size_t errlen)
{
    CUDA_CHECK(folio_k_scale_columns(w, rows, cb->hidden, norm_w, cb->stream));
    bf16 *ones = malloc(sizeof(bf16) * cb->hidden);
    if (!ones) {
        snprintf(err, errlen, "cuda backend: out of host memory");
        return -1;
    }
    for (int i = 0; i < cb->hidden; i++)
        ones[i] = 0x3f80; /* 1.0 in bf16 */
    cudaError_t e = cudaMemcpyAsync(norm_w, ones, sizeof(bf16) * cb->hidden, cudaMemcpyHostToDevice,
                                    cb->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cb->stream);
    free(ones);
    CUDA_CHECK(e);
    return 0;
}

static int alloc_weights(struct cuda_backend *cb, void **out, size_t bytes, char *err,
                         size_t errlen)
{
    CUDA_CHECK(cudaMalloc(out, bytes));
    cb->weight_blocks[cb->num_weight_blocks++] = *out;
    return 0;
}

/* inv_freq[i] = theta^(-2i/D), with Llama-3 or linear scaling as Hugging Face
 * computes it (f32 arithmetic). */
static void rope_inv_freq(const struct folio_model_config *c, float *inv)
{
    int half = c->head_dim / 2;
    for (int i = 0; i < half; i++) {
        float expo = (float)(2 * i) / (float)c->head_dim;
        inv[i] = 1.0f / powf(c->rope_theta, expo);
    }
    const struct folio_rope_scaling *s = &c->rope_scaling;
    if (s->type == FOLIO_ROPE_LINEAR && s->factor > 0.0f) {
        for (int i = 0; i < half; i++)
            inv[i] /= s->factor;
    } else if (s->type == FOLIO_ROPE_LLAMA3) {
        float old_ctx = (float)s->original_max_position_embeddings;
        float low_wavelen = old_ctx / s->low_freq_factor;
        float high_wavelen = old_ctx / s->high_freq_factor;
        for (int i = 0; i < half; i++) {
            float wavelen = 2.0f * (float)M_PI / inv[i];
            float f = wavelen > low_wavelen ? inv[i] / s->factor : inv[i];
            if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
                float smooth = (old_ctx / wavelen - s->low_freq_factor) /
                               (s->high_freq_factor - s->low_freq_factor);
                f = (1.0f - smooth) * f / s->factor + smooth * f;
            }
            inv[i] = f;
        }
    }
}

/* Checks every tensor's shape before any upload; *max_bytes: the largest tensor. */
static int check_shapes(const struct cuda_backend *cb, const struct folio_model *m,
                        size_t *max_bytes, char *err, size_t errlen)
{
    int64_t H = cb->hidden, I = cb->inter, QD = (int64_t)cb->heads * cb->head_dim,
            KD = (int64_t)cb->kv_heads * cb->head_dim;
    if (check_shape(m->embed, "embed_tokens", cb->vocab, H, err, errlen) ||
        check_shape(m->final_norm, "norm", H, 1, err, errlen) ||
        check_shape(m->lm_head, "lm_head", cb->vocab, H, err, errlen))
        return -1;
    *max_bytes = m->embed->nbytes > m->lm_head->nbytes ? m->embed->nbytes : m->lm_head->nbytes;
    for (int i = 0; i < cb->layers; i++) {
        const struct folio_layer_weights *L = &m->layers[i];
        const struct folio_tensor *ts[] = {L->attn_norm, L->wq,     L->wk,   L->wv,    L->wo,
                                           L->mlp_norm,  L->w_gate, L->w_up, L->w_down};
        int64_t rows[] = {H, QD, KD, KD, H, H, I, I, H}, cols[] = {1, H, H, H, QD, 1, H, H, I};
        for (int j = 0; j < 9; j++) {
            char what[64];
            snprintf(what, sizeof(what), "layer %d weight %d", i, j);
            if (check_shape(ts[j], what, rows[j], cols[j], err, errlen))
                return -1;
            if (ts[j]->nbytes > *max_bytes)
                *max_bytes = ts[j]->nbytes;
        }
    }
    return 0;
}

/* One layer's weights into the layer block at p, the norms folded into the projections where
 * fold; returns nonzero on an error. */
static int upload_layer(struct cuda_backend *cb, const struct folio_layer_weights *L,
                        struct cuda_layer *D, bf16 *p, void *staging, bool fold, char *err,
                        size_t errlen)
{
    int64_t H = cb->hidden, I = cb->inter, QD = (int64_t)cb->heads * cb->head_dim,
            KD = (int64_t)cb->kv_heads * cb->head_dim;
    D->wqkv = p;
    p += (size_t)cb->qkv_dim * H;
    D->wo = p;
    p += (size_t)H * QD;
    D->w_gate_up = p;
    p += (size_t)2 * I * H;
    D->w_down = p;
    p += (size_t)H * I;
    D->attn_norm = p;
    p += H;
    D->mlp_norm = p;
    return upload(cb, D->wqkv, L->wq, staging, err, errlen) ||
           upload(cb, D->wqkv + QD * H, L->wk, staging, err, errlen) ||
           upload(cb, D->wqkv + (QD + KD) * H, L->wv, staging, err, errlen) ||
           upload(cb, D->wo, L->wo, staging, err, errlen) ||
           upload(cb, D->w_gate_up, L->w_gate, staging, err, errlen) ||
           upload(cb, D->w_gate_up + I * H, L->w_up, staging, err, errlen) ||
           upload(cb, D->w_down, L->w_down, staging, err, errlen) ||
           upload(cb, D->attn_norm, L->attn_norm, staging, err, errlen) ||
           upload(cb, D->mlp_norm, L->mlp_norm, staging, err, errlen) ||
           (fold && (fold_norm(cb, D->wqkv, cb->qkv_dim, D->attn_norm, err, errlen) ||
                     fold_norm(cb, D->w_gate_up, 2 * I, D->mlp_norm, err, errlen)));
}

/* Every layer for --quantization fp8: uploaded whole into a bf16 scratch (unfolded), its four
 * projections quantized per output channel into one e4m3 block per layer (codes, then
 * scales), its norms copied into norms ([layer][2][hidden]). */
static int upload_layers_fp8(struct cuda_backend *cb, const struct folio_model *m, bf16 *norms,
                             void *staging, char *err, size_t errlen)
{
    const int H = cb->hidden, I = cb->inter, QD = cb->heads * cb->head_dim;
    const int rows[4] = {cb->qkv_dim, H, 2 * I, H}, cols[4] = {H, QD, H, I};
    /* Each matrix and scale vector 256-byte aligned, as cuBLASLt's heuristic assumes. */
    size_t codes_at[4], scales_at[4], per_layer = 0, elems = 0;
    for (int j = 0; j < 4; j++) {
        codes_at[j] = per_layer;
        per_layer += ((size_t)rows[j] * cols[j] + 255) / 256 * 256;
        elems += (size_t)rows[j] * cols[j];
    }
    for (int j = 0; j < 4; j++) {
        scales_at[j] = per_layer;
        per_layer += (sizeof(float) * rows[j] + 255) / 256 * 256;
    }
    void *block, *scratch;
    if (alloc_weights(cb, &block, per_layer * cb->layers, err, errlen))
        return -1;
    CUDA_CHECK(cudaMalloc(&scratch, sizeof(bf16) * (elems + 2 * (size_t)H)));
    int rc = 0;
    for (int i = 0; i < cb->layers && !rc; i++) {
        struct cuda_layer *D = &cb->lw[i], tmp = {0};
        rc = upload_layer(cb, &m->layers[i], &tmp, scratch, staging, false, err, errlen);
        const bf16 *src[4] = {tmp.wqkv, tmp.wo, tmp.w_gate_up, tmp.w_down};
        struct fp8_weight *dst[4] = {&D->qkv8, &D->o8, &D->gate_up8, &D->down8};
        uint8_t *at = (uint8_t *)block + per_layer * i;
        for (int j = 0; j < 4 && !rc; j++)
            rc =
                cuda_fp8_quantize_weight(cb, dst[j], at + codes_at[j], (float *)(at + scales_at[j]),
                                         src[j], rows[j], cols[j], err, errlen);
        D->attn_norm = norms + (size_t)2 * H * i;
        D->mlp_norm = D->attn_norm + H;
        cudaError_t e = rc ? cudaSuccess
                           : cudaMemcpyAsync(D->attn_norm, tmp.attn_norm, sizeof(bf16) * 2 * H,
                                             cudaMemcpyDeviceToDevice, cb->stream);
        if (e == cudaSuccess && !rc) /* the scratch is reused by the next layer */
            e = cudaStreamSynchronize(cb->stream);
        if (e != cudaSuccess && !rc) {
            snprintf(err, errlen, "cuda backend: fp8 layer %d: %s", i, cudaGetErrorString(e));
            rc = -1;
        }
    }
    cudaFree(scratch);
    return rc;
}

/* Qwen2's Q/K/V biases: all three in every layer, or none (Llama). */
static int check_biases(struct cuda_backend *cb, const struct folio_model *m, char *err,
                        size_t errlen)
{
    int64_t QD = (int64_t)cb->heads * cb->head_dim, KD = (int64_t)cb->kv_heads * cb->head_dim;
    cb->qkv_bias = cb->layers > 0 && m->layers[0].bq != NULL;
    for (int i = 0; i < cb->layers; i++) {
        const struct folio_layer_weights *L = &m->layers[i];
        if (!cb->qkv_bias) {
            if (L->bq || L->bk || L->bv) {
                snprintf(err, errlen, "cuda backend: layer %d has a Q/K/V bias, layer 0 none", i);
                return -1;
            }
            continue;
        }
        char what[64];
        snprintf(what, sizeof(what), "layer %d q/k/v bias", i);
        if (check_shape(L->bq, what, QD, 1, err, errlen) ||
            check_shape(L->bk, what, KD, 1, err, errlen) ||
            check_shape(L->bv, what, KD, 1, err, errlen))
            return -1;
    }
    return 0;
}

/* The biases of every layer in one allocation, [layer][q | k | v] like wqkv's rows. */
static int upload_biases(struct cuda_backend *cb, const struct folio_model *m, void *staging,
                         char *err, size_t errlen)
{
    if (!cb->qkv_bias)
        return 0;
    int64_t QD = (int64_t)cb->heads * cb->head_dim, KD = (int64_t)cb->kv_heads * cb->head_dim;
    void *block;
    if (alloc_weights(cb, &block, sizeof(bf16) * (size_t)cb->qkv_dim * cb->layers, err, errlen))
        return -1;
    for (int i = 0; i < cb->layers; i++) {
        const struct folio_layer_weights *L = &m->layers[i];
        bf16 *b = (bf16 *)block + (size_t)cb->qkv_dim * i;
        cb->lw[i].bqkv = b;
        if (upload(cb, b, L->bq, staging, err, errlen) ||
            upload(cb, b + QD, L->bk, staging, err, errlen) ||
            upload(cb, b + QD + KD, L->bv, staging, err, errlen))
            return -1;
    }
    return 0;
}

/* RoPE's inverse frequencies on the device (cb->inv_freq). */
static int upload_inv_freq(struct cuda_backend *cb, const struct folio_model_config *c, char *err,
                           size_t errlen)
{
    float *inv = malloc(sizeof(float) * cb->head_dim / 2);
    if (!inv) {
        snprintf(err, errlen, "cuda backend: out of host memory");
        return -1;
    }
    rope_inv_freq(c, inv);
    cudaError_t e = cudaMalloc((void **)&cb->inv_freq, sizeof(float) * cb->head_dim / 2);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(cb->inv_freq, inv, sizeof(float) * cb->head_dim / 2,
                            cudaMemcpyHostToDevice, cb->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cb->stream);
    free(inv);
    CUDA_CHECK(e);
    return 0;
}

int cuda_load_weights(struct cuda_backend *cb, const struct folio_model *m, char *err,
                      size_t errlen)
{
    int64_t H = cb->hidden, I = cb->inter, QD = (int64_t)cb->heads * cb->head_dim;
    size_t max_bytes = 0;
    if (check_shapes(cb, m, &max_bytes, err, errlen) != 0 || check_biases(cb, m, err, errlen) != 0)
        return -1;
    /* Weights: one allocation per kind, QKV and gate/up fused row-wise; under fp8 the bf16
     * block holds the norms alone. */
    size_t lin =
        cb->fp8 ? (size_t)(2 * H) : (size_t)(cb->qkv_dim * H + H * QD + 2 * I * H + H * I + 2 * H);
    bool tied = m->lm_head == m->embed || m->lm_head->data == m->embed->data;
    size_t glob = (size_t)(cb->vocab * H * (tied ? 1 : 2) + H);
    void *wl, *wg, *staging;
    if (alloc_weights(cb, &wl, sizeof(bf16) * lin * cb->layers, err, errlen) ||
        alloc_weights(cb, &wg, sizeof(bf16) * glob, err, errlen))
        return -1;
    CUDA_CHECK(cudaMalloc(&staging, max_bytes));
    int rc = 0;
    bf16 *p = wg;
    cb->embed = p;
    p += (size_t)cb->vocab * H;
    cb->lm_head = tied ? cb->embed : p;
    if (!tied)
        p += (size_t)cb->vocab * H;
    cb->final_norm = p;
    rc |= upload(cb, cb->embed, m->embed, staging, err, errlen);
    if (!rc && !tied)
        rc |= upload(cb, cb->lm_head, m->lm_head, staging, err, errlen);
    if (!rc)
        rc |= upload(cb, cb->final_norm, m->final_norm, staging, err, errlen);
    p = wl;
    size_t layer_elems = lin;
    if (cb->fp8 && !rc)
        rc |= upload_layers_fp8(cb, m, p, staging, err, errlen);
    for (int i = 0; i < cb->layers && !rc && !cb->fp8; i++)
        rc |= upload_layer(cb, &m->layers[i], &cb->lw[i], p + layer_elems * i, staging, true, err,
                           errlen);
    if (!rc)
        rc |= upload_biases(cb, m, staging, err, errlen);
    cudaFree(staging);
    if (rc)
        return -1;
    return upload_inv_freq(cb, &m->config, err, errlen);
}
