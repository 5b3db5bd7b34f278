#include "cpu_matrix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "gguf.h"

/* Work (multiply-adds) below which a product runs on one thread: waking a team costs more. */
#define CPU_PARALLEL_MIN_WORK (1 << 18)
/* Rows one thread meets each token tile with: they stay in L1 while the tiles pass. */
#define CPU_ROW_TILE 16

static int alloc_rows(struct cpu_matrix *m, enum cpu_wtype type, size_t rows, size_t cols,
                      const char *what, char *err, size_t errlen)
{
    m->type = type;
    m->rows = (int)rows;
    m->cols = (int)cols;
    m->row_bytes = (cpu_row_bytes(type, (int)cols) + 63) / 64 * 64;
    size_t bytes = m->row_bytes * rows;
    m->data = aligned_alloc(64, bytes ? bytes : 64);
    if (!m->data) {
        snprintf(err, errlen, "cpu backend: out of memory for %s (%zu bytes)", what, bytes);
        return -1;
    }
    return 0;
}

/* One packed row from GGUF blocks [k0, k0 + nb) of a row as the file holds it. */
static void pack_gguf_row(unsigned char *dst, const unsigned char *src, uint32_t type, size_t k0,
                          size_t nb)
{
    size_t bsize = (size_t)folio_ggml_type_size(type);
    const unsigned char *b = src + k0 * bsize;
    if (type == FOLIO_GGML_Q8_0) {
        float *d = (float *)(dst + nb * 32);
        for (size_t k = 0; k < nb; k++, b += bsize) {
            uint16_t h;
            memcpy(&h, b, 2);
            d[k] = folio_f16_to_f32(h);
            memcpy(dst + k * 32, b + 2, 32);
        }
        return;
    }
    float *d = (float *)(dst + nb * 16), *m = d + nb;
    for (size_t k = 0; k < nb; k++, b += bsize) {
        uint16_t h;
        memcpy(&h, b, 2);
        d[k] = folio_f16_to_f32(h);
        if (type == FOLIO_GGML_Q4_1) {
            memcpy(&h, b + 2, 2);
            m[k] = folio_f16_to_f32(h);
            memcpy(dst + k * 16, b + 4, 16);
        } else { /* Q4_0: q - 8 */
            m[k] = -8.0f * d[k];
            memcpy(dst + k * 16, b + 2, 16);
        }
    }
}

/* Each row of block b read as floats (GGUF blocks dequantized) and quantized to e4m3 with its
 * own scale; an FP8 checkpoint's tensor (F8_E4M3) keeps its codes and its rows' scales as
 * shipped, a tensor-parallel block of columns included (a row's scale is the whole row's). */
static int e4m3_from_tensor(struct cpu_matrix *m, const struct folio_tensor *t, size_t total_cols,
                            struct folio_tp_block b, const char *what, char *err, size_t errlen)
{
    float *tmp = malloc(b.cols * sizeof *tmp);
    if (!tmp || alloc_rows(m, CPU_W_E4M3, b.rows, b.cols, what, err, errlen) != 0) {
        if (!tmp)
            snprintf(err, errlen, "cpu backend: out of memory for %s", what);
        free(tmp);
        return -1;
    }
    size_t at = cpu_e4m3_scale_offset((int)b.cols);
    for (size_t r = 0; r < b.rows; r++) {
        unsigned char *dst = m->data + r * m->row_bytes;
        if (t->dtype == FOLIO_DTYPE_F8_E4M3) {
            float s = folio_tensor_row_scale(t, b.row0 + r);
            memcpy(dst, (const unsigned char *)t->data + (b.row0 + r) * total_cols + b.col0,
                   b.cols);
            memcpy(dst + at, &s, sizeof s);
            continue;
        }
        folio_tensor_read_f32(t, (b.row0 + r) * total_cols + b.col0, b.cols, tmp);
        float s = folio_fp8_quantize_row(tmp, b.cols, dst);
        memcpy(dst + at, &s, sizeof s);
    }
    free(tmp);
    return 0;
}

int cpu_matrix_from_tensor(struct cpu_matrix *m, const struct folio_tensor *t, size_t total_rows,
                           size_t total_cols, struct folio_tp_block b,
                           enum cpu_weight_policy policy, const char *what, char *err,
                           size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (!t) {
        snprintf(err, errlen, "cpu backend: the model has no %s tensor", what);
        return -1;
    }
    size_t expect = total_rows * total_cols;
    if (folio_tensor_numel(t) != expect || t->nbytes != expect * folio_dtype_size(t->dtype)) {
        snprintf(err, errlen, "cpu backend: tensor %s in %s has %zu bytes, expected %zu (%zu %s)",
                 t->name, t->file, t->nbytes, expect * folio_dtype_size(t->dtype), expect,
                 folio_dtype_name(t->dtype));
        return -1;
    }
    if (policy == CPU_WEIGHTS_E4M3)
        return e4m3_from_tensor(m, t, total_cols, b, what, err, errlen);
    bool blocks_fit = b.col0 % CPU_QBLOCK == 0 && b.cols % CPU_QBLOCK == 0;
    uint32_t gtype = 0;
    if (policy == CPU_WEIGHTS_PACKED && blocks_fit && folio_tensor_gguf_row(t, 0, &gtype) &&
        (gtype == FOLIO_GGML_Q4_0 || gtype == FOLIO_GGML_Q4_1 || gtype == FOLIO_GGML_Q8_0)) {
        if (alloc_rows(m, gtype == FOLIO_GGML_Q8_0 ? CPU_W_Q8 : CPU_W_Q4, b.rows, b.cols, what, err,
                       errlen) != 0)
            return -1;
        for (size_t r = 0; r < b.rows; r++)
            pack_gguf_row(m->data + r * m->row_bytes, folio_tensor_gguf_row(t, b.row0 + r, NULL),
                          gtype, b.col0 / CPU_QBLOCK, b.cols / CPU_QBLOCK);
        return 0;
    }
    /* Another quantized GGUF type (dequantized at load): as Q8 blocks, far faster than f32 and
     * finer than any 4-6 bit type. */
    bool requant = policy == CPU_WEIGHTS_PACKED && blocks_fit && t->gguf && gtype != 0 &&
                   gtype != FOLIO_GGML_F32 && gtype != FOLIO_GGML_F16 && gtype != FOLIO_GGML_BF16;
    enum cpu_wtype type = CPU_W_F32;
    if (requant)
        type = CPU_W_Q8;
    else if (policy == CPU_WEIGHTS_PACKED && t->dtype == FOLIO_DTYPE_F16)
        type = CPU_W_F16;
    else if (policy == CPU_WEIGHTS_PACKED && t->dtype == FOLIO_DTYPE_BF16)
        type = CPU_W_BF16;
    if (alloc_rows(m, type, b.rows, b.cols, what, err, errlen) != 0)
        return -1;
    float *tmp = type == CPU_W_Q8 ? malloc((b.cols + b.cols / CPU_QBLOCK) * sizeof *tmp) : NULL;
    if (type == CPU_W_Q8 && !tmp) {
        snprintf(err, errlen, "cpu backend: out of memory for %s", what);
        cpu_matrix_free(m);
        return -1;
    }
    size_t esize = folio_dtype_size(t->dtype);
    for (size_t r = 0; r < b.rows; r++) {
        unsigned char *dst = m->data + r * m->row_bytes;
        size_t first = (b.row0 + r) * total_cols + b.col0;
        if (type == CPU_W_F32) {
            folio_tensor_read_f32(t, first, b.cols, (float *)dst);
        } else if (type == CPU_W_Q8) {
            folio_tensor_read_f32(t, first, b.cols, tmp);
            int nb = (int)b.cols / CPU_QBLOCK;
            float *d = (float *)(dst + (size_t)nb * 32), *s = tmp + b.cols; /* s: not kept */
            cpu_kernels_scalar.quantize(tmp, (int)b.cols, (int8_t *)dst, d, s);
        } else {
            memcpy(dst, (const unsigned char *)t->data + first * esize, b.cols * esize);
        }
    }
    free(tmp);
    return 0;
}

int cpu_matrix_stack(struct cpu_matrix *dst, struct cpu_matrix *parts[], int n)
{
    size_t rows = 0;
    for (int i = 0; i < n; i++) {
        if (parts[i]->type != parts[0]->type || parts[i]->cols != parts[0]->cols)
            return -1;
        rows += (size_t)parts[i]->rows;
    }
    size_t stride = parts[0]->row_bytes;
    unsigned char *data = aligned_alloc(64, rows * stride);
    if (!data)
        return -1;
    *dst = *parts[0];
    dst->rows = (int)rows;
    dst->data = data;
    for (int i = 0; i < n; i++) {
        memcpy(data, parts[i]->data, (size_t)parts[i]->rows * stride);
        data += (size_t)parts[i]->rows * stride;
        cpu_matrix_free(parts[i]);
    }
    return 0;
}

void cpu_matrix_free(struct cpu_matrix *m)
{
    free(m->data);
    m->data = NULL;
}

void cpu_matrix_row_f32(const struct cpu_matrix *m, int r, float *out)
{
    const unsigned char *row = m->data + (size_t)r * m->row_bytes;
    int nb = m->cols / CPU_QBLOCK;
    switch (m->type) {
    case CPU_W_F32:
        memcpy(out, row, (size_t)m->cols * sizeof *out);
        return;
    case CPU_W_F16:
    case CPU_W_BF16:
        for (int i = 0; i < m->cols; i++) {
            uint16_t h;
            memcpy(&h, row + 2 * (size_t)i, 2);
            out[i] = m->type == CPU_W_F16 ? folio_f16_to_f32(h) : folio_bf16_to_f32(h);
        }
        return;
    case CPU_W_Q4: {
        const float *d = (const float *)(row + (size_t)nb * 16), *mn = d + nb;
        for (int k = 0; k < nb; k++)
            for (int j = 0; j < 16; j++) {
                unsigned char v = row[k * 16 + j];
                out[k * 32 + j] = (float)(v & 0xf) * d[k] + mn[k];
                out[k * 32 + j + 16] = (float)(v >> 4) * d[k] + mn[k];
            }
        return;
    }
    case CPU_W_Q8: {
        const float *d = (const float *)(row + (size_t)nb * 32);
        for (int i = 0; i < m->cols; i++)
            out[i] = (float)((const int8_t *)row)[i] * d[i / 32];
        return;
    }
    case CPU_W_E4M3: {
        const float *lut = folio_e4m3_table();
        float s;
        memcpy(&s, row + cpu_e4m3_scale_offset(m->cols), sizeof s);
        for (int i = 0; i < m->cols; i++)
            out[i] = lut[row[i]] * s;
        return;
    }
    default:
        return;
    }
}

void cpu_act_set(struct cpu_act *act, const float *x, int ntok, int cols)
{
    act->x = x;
    act->ntok = ntok;
    act->cols = cols;
    act->quantized = false;
    act->e4m3 = false;
}

/* Token t's activations as e4m3 values and its scale (common/fp8.h's rule). */
static void e4m3_token(struct cpu_act *a, int t)
{
    const float *x = a->x + (size_t)t * a->cols, *lut = folio_e4m3_table();
    float *v = a->x8 + (size_t)t * a->cols;
    float amax = 0.0f;
    for (int i = 0; i < a->cols; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float s = folio_fp8_scale(amax);
    for (int i = 0; i < a->cols; i++)
        v[i] = lut[folio_e4m3_from_f32(x[i] / s)];
    a->x8_scale[t] = s;
}

struct quantize_job {
    const struct cpu_kernels *k;
    struct cpu_act *a;
    bool e4m3; /* the e4m3 form, else the int8 blocks */
};

static void quantize_chunk(void *arg, int t, int thread)
{
    (void)thread;
    const struct quantize_job *j = arg;
    struct cpu_act *a = j->a;
    int nb = a->cols / CPU_QBLOCK;
    if (j->e4m3)
        e4m3_token(a, t);
    else
        j->k->quantize(a->x + (size_t)t * a->cols, a->cols, a->q + (size_t)t * a->cols,
                       a->d + (size_t)t * nb, a->s + (size_t)t * nb);
}

struct matmul_job {
    const struct cpu_kernels *k;
    const struct cpu_matrix *w;
    const struct cpu_act *act;
    float *y;
    int rows_per_chunk;
};

static void matmul_chunk(void *arg, int c, int thread)
{
    (void)thread;
    const struct matmul_job *j = arg;
    const struct cpu_matrix *w = j->w;
    const struct cpu_act *act = j->act;
    bool packed = cpu_matrix_packed(w);
    int ntok = act->ntok, cols = w->cols, out = w->rows, nb = cols / CPU_QBLOCK;
    cpu_dot_fn dot = j->k->dot[w->type];
    int r0 = c * j->rows_per_chunk;
    int r1 = r0 + j->rows_per_chunk < out ? r0 + j->rows_per_chunk : out;
    for (int t0 = 0; t0 < ntok; t0 += CPU_TOK_TILE) {
        int nt = ntok - t0 < CPU_TOK_TILE ? ntok - t0 : CPU_TOK_TILE;
        struct cpu_qact qa = {0};
        if (packed)
            qa = (struct cpu_qact){.q = act->q + (size_t)t0 * cols,
                                   .d = act->d + (size_t)t0 * nb,
                                   .s = act->s + (size_t)t0 * nb,
                                   .cols = cols};
        else if (w->type == CPU_W_E4M3)
            qa = (struct cpu_qact){
                .cols = cols, .x8 = act->x8 + (size_t)t0 * cols, .x8_scale = act->x8_scale + t0};
        for (int r = r0; r < r1; r++)
            dot(w->data + (size_t)r * w->row_bytes, cols, act->x + (size_t)t0 * cols, (size_t)cols,
                &qa, nt, j->y + (size_t)t0 * out + r, (size_t)out);
    }
}

/* The activations' int8 blocks or e4m3 form, over the pool for a long run of tokens. */
static void quantize_act(const struct cpu_kernels *k, struct cpu_act *act, bool e4m3,
                         struct cpu_pool *pool)
{
    struct quantize_job qj = {k, act, e4m3};
    if (act->ntok >= 16)
        cpu_pool_run(pool, act->ntok, quantize_chunk, &qj);
    else
        for (int t = 0; t < act->ntok; t++)
            quantize_chunk(&qj, t, 0);
}

void cpu_matmul(const struct cpu_kernels *k, const struct cpu_matrix *w, struct cpu_act *act,
                float *y, struct cpu_pool *pool)
{
    if (cpu_matrix_packed(w) && !act->quantized) {
        quantize_act(k, act, false, pool);
        act->quantized = true;
    }
    if (w->type == CPU_W_E4M3 && !act->e4m3) {
        quantize_act(k, act, true, pool);
        act->e4m3 = true;
    }
    size_t work = (size_t)act->ntok * (size_t)w->cols * (size_t)w->rows;
    struct matmul_job j = {k, w, act, y, CPU_ROW_TILE};
    if (work < CPU_PARALLEL_MIN_WORK)
        j.rows_per_chunk = w->rows;
    cpu_pool_run(pool, (w->rows + j.rows_per_chunk - 1) / j.rows_per_chunk, matmul_chunk, &j);
}

struct matmul_ref_job {
    float *y;
    const float *x, *w;
    size_t ldw;
    int ntok, in, out, rows_per_chunk;
};

static void matmul_ref_chunk(void *arg, int tile, int thread)
{
    (void)thread;
    const struct matmul_ref_job *j = arg;
    int o0 = tile * j->rows_per_chunk;
    int o_end = o0 + j->rows_per_chunk < j->out ? o0 + j->rows_per_chunk : j->out;
    for (int t = 0; t < j->ntok; t++) {
        const float *xr = j->x + (size_t)t * j->in;
        for (int o = o0; o < o_end; o++) {
            const float *wr = j->w + (size_t)o * j->ldw;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int i = 0; i < j->in; i++)
                acc += wr[i] * xr[i];
            j->y[(size_t)t * j->out + o] = acc;
        }
    }
}

void cpu_matmul_ref(float *y, const float *x, const float *w, size_t ldw, int ntok, int in, int out,
                    struct cpu_pool *pool)
{
    size_t work = (size_t)ntok * (size_t)in * (size_t)out;
    struct matmul_ref_job j = {y, x, w, ldw, ntok, in, out, CPU_ROW_TILE};
    if (work < CPU_PARALLEL_MIN_WORK)
        j.rows_per_chunk = out;
    cpu_pool_run(pool, (out + j.rows_per_chunk - 1) / j.rows_per_chunk, matmul_ref_chunk, &j);
}
