#include "cpu_weights.h"

#include <stdio.h>
#include <string.h>

int cpu_convert_tensor(const struct folio_tensor *t, size_t expect, const char *what, float **out,
                       char *err, size_t errlen)
{
    if (!t) {
        snprintf(err, errlen, "cpu backend: the model has no %s tensor", what);
        return -1;
    }
    size_t esize = folio_dtype_size(t->dtype);
    if (t->nbytes != expect * esize) {
        snprintf(err, errlen, "cpu backend: tensor %s in %s has %zu bytes, expected %zu (%zu %s)",
                 t->name, t->file, t->nbytes, expect * esize, expect, folio_dtype_name(t->dtype));
        return -1;
    }
    float *dst = cpu_alloc_floats(expect);
    if (!dst) {
        snprintf(err, errlen, "cpu backend: out of memory converting %s (%zu floats)", t->name,
                 expect);
        return -1;
    }
    /* memcpy element by element: the mapping gives no alignment guarantee. */
    const unsigned char *src = t->data;
    if (t->dtype == FOLIO_DTYPE_F32) {
        memcpy(dst, src, expect * sizeof(float));
    } else if (t->dtype == FOLIO_DTYPE_F8_E4M3) { /* codes times their scales */
        folio_tensor_read_f32(t, 0, expect, dst);
    } else {
        for (size_t i = 0; i < expect; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = t->dtype == FOLIO_DTYPE_BF16 ? folio_bf16_to_f32(h) : folio_f16_to_f32(h);
        }
    }
    *out = dst;
    return 0;
}

/* Converts t ([rows][cols]) and gives each rank its block through dst[r].
 * One rank takes the converted tensor itself. */
static int load(const struct folio_tensor *t, size_t rows, size_t cols, const char *what,
                enum folio_tp_tensor kind, const struct folio_model_config *c,
                const struct cpu_rank *ranks, int n, float **dst[], char *err, size_t errlen)
{
    float *full;
    if (cpu_convert_tensor(t, rows * cols, what, &full, err, errlen) != 0)
        return -1;
    if (n == 1) {
        *dst[0] = full;
        return 0;
    }
    for (int r = 0; r < n; r++) {
        struct folio_tp_block b = folio_tp_block_of(c, &ranks[r].shard, kind, rows, cols);
        if (!(*dst[r] = cpu_alloc_floats(b.rows * b.cols))) {
            snprintf(err, errlen, "cpu backend: out of memory for rank %d's %s", r, what);
            free(full);
            return -1;
        }
        folio_tp_copy_block(*dst[r], full, cols, b);
    }
    free(full);
    return 0;
}

/* Each rank's block of t ([rows][cols]) as a matrix in dst[r]. */
static int load_matrix(const struct folio_tensor *t, size_t rows, size_t cols, const char *what,
                       enum folio_tp_tensor kind, const struct folio_model_config *c,
                       const struct cpu_rank *ranks, int n, enum cpu_weight_policy policy,
                       struct cpu_matrix *dst[], char *err, size_t errlen)
{
    for (int r = 0; r < n; r++) {
        struct folio_tp_block b = folio_tp_block_of(c, &ranks[r].shard, kind, rows, cols);
        if (cpu_matrix_from_tensor(dst[r], t, rows, cols, b, policy, what, err, errlen) != 0)
            return -1;
    }
    return 0;
}

int cpu_load_ranks(const struct folio_model *m, int tp_size, enum cpu_weight_policy policy,
                   enum cpu_weight_policy linear, struct cpu_rank *ranks, char *err, size_t errlen)
{
    const struct folio_model_config *c = &m->config;
    if (tp_size < 1 || tp_size > FOLIO_CPU_TP_MAX) {
        snprintf(err, errlen, "--tensor-parallel-size %d must be in [1, %d]", tp_size,
                 FOLIO_CPU_TP_MAX);
        return -1;
    }
    for (int r = 0; r < tp_size; r++) {
        if (folio_tp_shard_plan(c, r, tp_size, &ranks[r].shard, err, errlen) != 0)
            return -1;
        if (!(ranks[r].layers = calloc((size_t)c->num_layers, sizeof *ranks[r].layers))) {
            snprintf(err, errlen, "cpu backend: out of memory");
            return -1;
        }
    }
    size_t hidden = (size_t)c->hidden_size, inter = (size_t)c->intermediate_size;
    size_t qdim = (size_t)c->num_heads * c->head_dim, kvdim = (size_t)c->num_kv_heads * c->head_dim;
    size_t vocab = (size_t)c->vocab_size;
    float **dst[FOLIO_CPU_TP_MAX];
    struct cpu_matrix *mdst[FOLIO_CPU_TP_MAX];
    int n = tp_size;
#define EACH_RANK(field)                                                                           \
    for (int r = 0; r < n; r++)                                                                    \
        dst[r] = &ranks[r].field;
#define LOAD(t, rows, cols, what, kind, field)                                                     \
    do {                                                                                           \
        EACH_RANK(field)                                                                           \
        if (load(t, rows, cols, what, kind, c, ranks, n, dst, err, errlen) != 0)                   \
            return -1;                                                                             \
    } while (0)
#define LOAD_MATRIX_AS(t, rows, cols, what, kind, field, pol)                                      \
    do {                                                                                           \
        for (int r = 0; r < n; r++)                                                                \
            mdst[r] = &ranks[r].field;                                                             \
        if (load_matrix(t, rows, cols, what, kind, c, ranks, n, pol, mdst, err, errlen) != 0)      \
            return -1;                                                                             \
    } while (0)
#define LOAD_MATRIX(t, rows, cols, what, kind, field)                                              \
    LOAD_MATRIX_AS(t, rows, cols, what, kind, field, linear)
    LOAD_MATRIX_AS(m->embed, vocab, hidden, "embedding", FOLIO_TP_VOCAB, embed, policy);
    if (m->lm_head == m->embed || !m->lm_head) {
        for (int r = 0; r < n; r++)
            ranks[r].lm_head = ranks[r].embed;
    } else {
        LOAD_MATRIX_AS(m->lm_head, vocab, hidden, "lm_head", FOLIO_TP_VOCAB, lm_head, policy);
    }
    for (int l = 0; l < c->num_layers; l++) {
        const struct folio_layer_weights *w = &m->layers[l];
        LOAD(w->attn_norm, 1, hidden, "input_layernorm", FOLIO_TP_REPLICA, layers[l].attn_norm);
        LOAD_MATRIX(w->wq, qdim, hidden, "q_proj", FOLIO_TP_Q, layers[l].wq);
        LOAD_MATRIX(w->wk, kvdim, hidden, "k_proj", FOLIO_TP_KV, layers[l].wk);
        LOAD_MATRIX(w->wv, kvdim, hidden, "v_proj", FOLIO_TP_KV, layers[l].wv);
        LOAD_MATRIX(w->wo, hidden, qdim, "o_proj", FOLIO_TP_O, layers[l].wo);
        LOAD(w->mlp_norm, 1, hidden, "post_attention_layernorm", FOLIO_TP_REPLICA,
             layers[l].mlp_norm);
        LOAD_MATRIX(w->w_gate, inter, hidden, "gate_proj", FOLIO_TP_GATE_UP, layers[l].w_gate);
        LOAD_MATRIX(w->w_up, inter, hidden, "up_proj", FOLIO_TP_GATE_UP, layers[l].w_up);
        LOAD_MATRIX(w->w_down, hidden, inter, "down_proj", FOLIO_TP_DOWN, layers[l].w_down);
        if (w->bq) {
            LOAD(w->bq, qdim, 1, "q_proj.bias", FOLIO_TP_Q, layers[l].bq);
            LOAD(w->bk, kvdim, 1, "k_proj.bias", FOLIO_TP_KV, layers[l].bk);
            LOAD(w->bv, kvdim, 1, "v_proj.bias", FOLIO_TP_KV, layers[l].bv);
        }
    }
#undef LOAD
#undef LOAD_MATRIX
#undef LOAD_MATRIX_AS
    for (int r = 0; linear != CPU_WEIGHTS_F32 && r < n; r++) {
        for (int l = 0; l < c->num_layers; l++) {
            struct cpu_layer *L = &ranks[r].layers[l];
            cpu_matrix_stack(&L->wqkv, (struct cpu_matrix *[]){&L->wq, &L->wk, &L->wv}, 3);
            cpu_matrix_stack(&L->w_gate_up, (struct cpu_matrix *[]){&L->w_gate, &L->w_up}, 2);
        }
    }
#undef EACH_RANK
    return 0;
}

void cpu_free_ranks(struct cpu_rank *ranks, int tp_size, int num_layers)
{
    for (int r = 0; r < tp_size; r++) {
        struct cpu_rank *R = &ranks[r];
        if (R->lm_head.data != R->embed.data)
            cpu_matrix_free(&R->lm_head);
        cpu_matrix_free(&R->embed);
        if (!R->layers)
            continue;
        for (int l = 0; l < num_layers; l++) {
            struct cpu_layer *L = &R->layers[l];
            void *all[] = {L->attn_norm, L->bq, L->bk, L->bv, L->mlp_norm, L->k_cache, L->v_cache};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                free(all[i]);
            struct cpu_matrix *mats[] = {&L->wq,   &L->wk,     &L->wv,   &L->wo,       &L->w_gate,
                                         &L->w_up, &L->w_down, &L->wqkv, &L->w_gate_up};
            for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
                cpu_matrix_free(mats[i]);
        }
        free(R->layers);
    }
}
