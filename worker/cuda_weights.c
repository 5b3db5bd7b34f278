/* The model's weights on the GPU: every tensor checked against the config,
 * converted to bf16 on upload, Q/K/V and gate/up fused row-wise into one
 * matrix each, and the RMSNorm weights folded into the projections that read
 * the norms (see struct cuda_layer). Under --quantization fp8 each layer goes
 * through a bf16 scratch instead, its four projections are kept in e4m3 and
 * its norms as they are. A GGUF's projections of the types the GGUF kernels
 * take stay in the file's blocks (struct gguf_weight), the norms as under fp8. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "gguf.h"
#include "log.h"

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

/* An FP8 checkpoint's tensor (F8_E4M3) into dst as bf16: code x scale rounded on the host
 * (the device's converter knows no scales). Only where an fp8 step does not take the codes as
 * they are: a projection fused with a tensor that is not F8, or a bf16 run. */
static int upload_f8_as_bf16(struct cuda_backend *cb, bf16 *dst, const struct folio_tensor *t,
                             char *err, size_t errlen)
{
    size_t n = folio_tensor_numel(t), chunk = (size_t)1 << 20;
    float *f = malloc(sizeof(float) * chunk);
    bf16 *h = malloc(sizeof(bf16) * chunk);
    cudaError_t e = f && h ? cudaSuccess : cudaErrorMemoryAllocation;
    for (size_t at = 0; at < n && e == cudaSuccess; at += chunk) {
        size_t k = n - at < chunk ? n - at : chunk;
        folio_tensor_read_f32(t, at, k, f);
        for (size_t i = 0; i < k; i++)
            h[i] = folio_f32_to_bf16(f[i]);
        e = cudaMemcpyAsync(dst + at, h, sizeof(bf16) * k, cudaMemcpyHostToDevice, cb->stream);
        if (e == cudaSuccess) /* h is refilled next */
            e = cudaStreamSynchronize(cb->stream);
    }
    free(f);
    free(h);
    CUDA_CHECK(e);
    return 0;
}

/* Copies a checkpoint tensor into dst as bf16, through a device staging buffer. */
static int upload(struct cuda_backend *cb, bf16 *dst, const struct folio_tensor *t, void *staging,
                  char *err, size_t errlen)
{
    if (t->dtype == FOLIO_DTYPE_F8_E4M3)
        return upload_f8_as_bf16(cb, dst, t, err, errlen);
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

/* The four projections' tensors of layer L, grouped as they are fused. */
static void layer_groups(const struct folio_layer_weights *L, const struct folio_tensor *g[4][3],
                         int count[4])
{
    const struct folio_tensor *t[4][3] = {
        {L->wq, L->wk, L->wv}, {L->wo, NULL, NULL}, {L->w_gate, L->w_up, NULL}, {L->w_down}};
    memcpy(g, t, sizeof t);
    count[0] = 3, count[1] = 1, count[2] = 2, count[3] = 1;
}

/* A projection whose tensors (n of them, fused row-wise) are all an FP8 checkpoint's: their
 * codes into q and each row's scale (a tensor's one scale broadcast to its rows) into scale, as
 * shipped. */
static int upload_fp8_exact(struct cuda_backend *cb, struct fp8_weight *dst, uint8_t *q,
                            float *scale, const struct folio_tensor *const *g, int n, int rows,
                            char *err, size_t errlen)
{
    float *s = malloc(sizeof(float) * (size_t)rows);
    if (!s) {
        snprintf(err, errlen, "cuda backend: out of host memory");
        return -1;
    }
    cudaError_t e = cudaSuccess;
    size_t row = 0;
    for (int p = 0; p < n && e == cudaSuccess; p++) {
        const struct folio_tensor *t = g[p];
        size_t cols = folio_tensor_row_len(t);
        for (int64_t r = 0; r < t->shape[0]; r++)
            s[row + (size_t)r] = folio_tensor_row_scale(t, (size_t)r);
        e = cudaMemcpyAsync(q + row * cols, t->data, t->nbytes, cudaMemcpyHostToDevice, cb->stream);
        row += (size_t)t->shape[0];
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(scale, s, sizeof(float) * (size_t)rows, cudaMemcpyHostToDevice,
                            cb->stream);
    if (e == cudaSuccess) /* s is freed below */
        e = cudaStreamSynchronize(cb->stream);
    free(s);
    CUDA_CHECK(e);
    dst->q = q;
    dst->scale = scale;
    return 0;
}

/* Every layer for --quantization fp8: each of its four projections into one e4m3 block per
 * layer (codes, then scales); from an FP8 checkpoint whose tensors of the projection are all
 * F8_E4M3, the codes and scales as shipped; else its tensors uploaded into a bf16 scratch
 * (unfolded) and quantized per output channel. The norms go into norms ([layer][2][hidden]). */
static int upload_layers_fp8(struct cuda_backend *cb, const struct folio_model *m, bf16 *norms,
                             void *staging, char *err, size_t errlen)
{
    const int H = cb->hidden, I = cb->inter, QD = cb->heads * cb->head_dim;
    const int rows[4] = {cb->qkv_dim, H, 2 * I, H}, cols[4] = {H, QD, H, I};
    /* Each matrix and scale vector 256-byte aligned, as cuBLASLt's heuristic assumes. */
    size_t codes_at[4], scales_at[4], per_layer = 0, largest = 0;
    for (int j = 0; j < 4; j++) {
        codes_at[j] = per_layer;
        per_layer += ((size_t)rows[j] * cols[j] + 255) / 256 * 256;
        if ((size_t)rows[j] * cols[j] > largest)
            largest = (size_t)rows[j] * cols[j];
    }
    for (int j = 0; j < 4; j++) {
        scales_at[j] = per_layer;
        per_layer += (sizeof(float) * rows[j] + 255) / 256 * 256;
    }
    void *block;
    bf16 *scratch;
    if (alloc_weights(cb, &block, per_layer * cb->layers, err, errlen))
        return -1;
    CUDA_CHECK(cudaMalloc((void **)&scratch, sizeof(bf16) * largest));
    int rc = 0, exact = 0;
    for (int i = 0; i < cb->layers && !rc; i++) {
        struct cuda_layer *D = &cb->lw[i];
        const struct folio_layer_weights *L = &m->layers[i];
        struct fp8_weight *dst[4] = {&D->qkv8, &D->o8, &D->gate_up8, &D->down8};
        const struct folio_tensor *g[4][3];
        int count[4];
        layer_groups(L, g, count);
        uint8_t *at = (uint8_t *)block + per_layer * i;
        for (int j = 0; j < 4 && !rc; j++) {
            uint8_t *q = at + codes_at[j];
            float *scale = (float *)(at + scales_at[j]);
            bool f8 = true;
            for (int p = 0; p < count[j]; p++)
                f8 = f8 && g[j][p]->dtype == FOLIO_DTYPE_F8_E4M3;
            if (f8) {
                rc = upload_fp8_exact(cb, dst[j], q, scale, g[j], count[j], rows[j], err, errlen);
                exact++;
                continue;
            }
            /* The scratch is reused by the next projection: upload waits for its copy, and
             * the quantizing kernel runs on the same stream before the next one's. */
            size_t row = 0;
            for (int p = 0; p < count[j] && !rc; p++) {
                rc = upload(cb, scratch + row * cols[j], g[j][p], staging, err, errlen);
                row += (size_t)g[j][p]->shape[0];
            }
            if (!rc)
                rc = cuda_fp8_quantize_weight(cb, dst[j], q, scale, scratch, rows[j], cols[j], err,
                                              errlen);
        }
        D->attn_norm = norms + (size_t)2 * H * i;
        D->mlp_norm = D->attn_norm + H;
        if (!rc)
            rc = upload(cb, D->attn_norm, L->attn_norm, staging, err, errlen) ||
                 upload(cb, D->mlp_norm, L->mlp_norm, staging, err, errlen);
    }
    cudaError_t e = rc ? cudaSuccess : cudaStreamSynchronize(cb->stream);
    cudaFree(scratch);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda backend: fp8 layers: %s", cudaGetErrorString(e));
        return -1;
    }
    if (!rc && exact > 0)
        folio_log_info(0,
                       "fp8: %d of %d layer projections take the checkpoint's e4m3 codes and "
                       "scales as shipped; the rest quantized at load",
                       exact, 4 * cb->layers);
    return rc;
}

/* Whether tensor t can stay in its GGUF blocks: a packed type, whole blocks a row. */
static bool packable(const struct folio_tensor *t)
{
    uint32_t type = 0;
    return t->gguf && t->ndim == 2 && folio_tensor_gguf_row(t, 0, &type) != NULL &&
           gguf_packed_type(type);
}

bool cuda_gguf_keeps_packed(const struct folio_model *m)
{
    const struct folio_model_config *c = &m->config;
    if (c->hidden_size % 32 || c->intermediate_size % 32 || (c->num_heads * c->head_dim) % 32)
        return false;
    for (int i = 0; i < c->num_layers; i++) {
        const struct folio_tensor *g[4][3];
        int count[4];
        layer_groups(&m->layers[i], g, count);
        for (int j = 0; j < 4; j++)
            for (int p = 0; p < count[j]; p++)
                if (packable(g[j][p]))
                    return true;
    }
    return false;
}

/* A tensor's type on the GPU and its bytes a row: Q4_0 rows regrouped where whole groups of
 * eight blocks make them (the fused GEMV's 16-byte loads), other packed types as the file has
 * them, the rest widened to bf16. */
static void packed_form(const struct folio_tensor *t, int *type, int64_t *stride)
{
    uint32_t ty = FOLIO_GGML_BF16;
    if (packable(t))
        folio_tensor_gguf_row(t, 0, &ty);
    if (ty == FOLIO_GGML_Q4_0 && t->shape[1] % 256 == 0)
        ty = FOLIO_GGML_Q4_0X8;
    *type = (int)ty;
    *stride = (gguf_row_bytes(ty, t->shape[1]) + 15) / 16 * 16;
}

/* Tensor t's rows, in Hugging Face's order, as its GGUF blocks at dst in packed_form's
 * gpu_type (Q4_0X8: regrouped), stride bytes apart (the padding zero). */
static int upload_packed(struct cuda_backend *cb, uint8_t *dst, const struct folio_tensor *t,
                         int gpu_type, int64_t stride, char *err, size_t errlen)
{
    const int64_t rows = t->shape[0];
    const int64_t row_bytes = gguf_row_bytes((uint32_t)gpu_type, t->shape[1]);
    uint8_t *host = calloc((size_t)rows, (size_t)stride);
    if (!host) {
        snprintf(err, errlen, "cuda backend: out of host memory");
        return -1;
    }
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = folio_tensor_gguf_row(t, (size_t)r, NULL);
        if (gpu_type == FOLIO_GGML_Q4_0X8)
            gguf_regroup_q4_0(host + r * stride, src, t->shape[1]);
        else
            memcpy(host + r * stride, src, (size_t)row_bytes);
    }
    cudaError_t e =
        cudaMemcpyAsync(dst, host, (size_t)(rows * stride), cudaMemcpyHostToDevice, cb->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cb->stream);
    free(host);
    CUDA_CHECK(e);
    return 0;
}

/* Every layer of a GGUF kept packed: each projection's tensors one after another in one block
 * for all layers (struct gguf_weight), the norms copied into norms ([layer][2][hidden]). */
static int upload_layers_gguf(struct cuda_backend *cb, const struct folio_model *m, bf16 *norms,
                              void *staging, char *err, size_t errlen)
{
    size_t total = 0, packed = 0, packed_as_bf16 = 0, count_packed = 0, count_all = 0;
    size_t by_type[FOLIO_GGML_BF16 + 1] = {0};
    for (int i = 0; i < cb->layers; i++) {
        const struct folio_tensor *g[4][3];
        int count[4], type;
        int64_t stride;
        layer_groups(&m->layers[i], g, count);
        for (int j = 0; j < 4; j++)
            for (int p = 0; p < count[j]; p++) {
                packed_form(g[j][p], &type, &stride);
                size_t bytes = (size_t)(g[j][p]->shape[0] * stride);
                total += bytes;
                count_all++;
                by_type[type == FOLIO_GGML_Q4_0X8 ? FOLIO_GGML_Q4_0 : type]++;
                if (type != FOLIO_GGML_BF16) {
                    packed += bytes;
                    packed_as_bf16 += (size_t)(g[j][p]->shape[0] * g[j][p]->shape[1]) * 2;
                    count_packed++;
                }
            }
    }
    uint8_t *at;
    if (alloc_weights(cb, (void **)&at, total, err, errlen))
        return -1;
    cb->gguf_q4_gemv = true;
    for (int i = 0; i < cb->layers; i++) {
        struct cuda_layer *D = &cb->lw[i];
        struct gguf_weight *dst[4] = {&D->qkv_g, &D->o_g, &D->gate_up_g, &D->down_g};
        const struct folio_tensor *g[4][3];
        int count[4];
        layer_groups(&m->layers[i], g, count);
        for (int j = 0; j < 4; j++) {
            struct gguf_weight *w = dst[j];
            int row = 0;
            w->num_parts = 0;
            for (int p = 0; p < count[j]; p++) {
                const struct folio_tensor *t = g[j][p];
                int type;
                int64_t stride;
                packed_form(t, &type, &stride);
                int rc = type == FOLIO_GGML_BF16
                             ? upload(cb, (bf16 *)at, t, staging, err, errlen)
                             : upload_packed(cb, at, t, type, stride, err, errlen);
                if (rc)
                    return -1;
                struct gguf_part *last = w->num_parts ? &w->part[w->num_parts - 1] : NULL;
                if (last && last->type == type) { /* right after it in memory: one part */
                    last->rows += (int)t->shape[0];
                } else {
                    w->part[w->num_parts++] =
                        (struct gguf_part){at, type, stride, row, (int)t->shape[0]};
                }
                row += (int)t->shape[0];
                at += t->shape[0] * stride;
            }
            cb->gguf_q4_gemv &= w->num_parts == 1 && w->part[0].type == FOLIO_GGML_Q4_0X8;
        }
        D->attn_norm = norms + (size_t)2 * cb->hidden * i;
        D->mlp_norm = D->attn_norm + cb->hidden;
        if (upload(cb, D->attn_norm, m->layers[i].attn_norm, staging, err, errlen) ||
            upload(cb, D->mlp_norm, m->layers[i].mlp_norm, staging, err, errlen))
            return -1;
    }
    char types[160] = "";
    for (int t = 0; t < FOLIO_GGML_BF16; t++)
        if (by_type[t])
            snprintf(types + strlen(types), sizeof types - strlen(types), "%s%zu %s",
                     types[0] ? ", " : "", by_type[t], folio_ggml_type_name((uint32_t)t));
    folio_log_info(0,
                   "gguf: %zu of %zu layer matrices kept packed on the GPU (%s): %.1f MiB where "
                   "a bf16 copy takes %.1f MiB; %zu widened to bf16 (%.1f MiB); embedding and "
                   "LM head bf16; decode steps on %s",
                   count_packed, count_all, types, packed / 1048576.0, packed_as_bf16 / 1048576.0,
                   count_all - count_packed, (total - packed) / 1048576.0,
                   cb->gguf_q4_gemv ? "the fused GEMV (every projection Q4_0)" : "the packed GEMV");
    return 0;
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
    /* Weights: one allocation per kind, QKV and gate/up fused row-wise; under fp8 or a GGUF
     * kept packed the bf16 block holds the norms alone. */
    const bool quant = cb->fp8 || cb->gguf;
    size_t lin =
        quant ? (size_t)(2 * H) : (size_t)(cb->qkv_dim * H + H * QD + 2 * I * H + H * I + 2 * H);
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
    if (cb->gguf && !rc)
        rc |= upload_layers_gguf(cb, m, p, staging, err, errlen);
    for (int i = 0; i < cb->layers && !rc && !quant; i++)
        rc |= upload_layer(cb, &m->layers[i], &cb->lw[i], p + layer_elems * i, staging, true, err,
                           errlen);
    if (!rc)
        rc |= upload_biases(cb, m, staging, err, errlen);
    cudaFree(staging);
    if (rc)
        return -1;
    return upload_inv_freq(cb, &m->config, err, errlen);
}
