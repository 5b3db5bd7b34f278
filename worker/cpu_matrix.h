/* A weight matrix as the CPU backend holds it: rows of one type (cpu_kernels.h), each padded to
 * a cache line, and the matrix product y = x W^T over threads.
 *
 * Row layouts of the packed types (nb = cols / 32 blocks), chosen so that a row's values,
 * scales and mins are each contiguous for vector loads:
 *   CPU_W_Q4: nb x 16 bytes of nibbles (GGUF's order: byte j holds values j and j + 16),
 *             nb f32 scales d, nb f32 mins m (x = q * d + m)
 *   CPU_W_Q8: nb x 32 int8 values, nb f32 scales d (x = q * d)
 *   CPU_W_E4M3: cols e4m3 codes, then (4-byte aligned) the row's f32 scale s (x = e4m3(q) * s)
 * f32, f16 and bf16 rows are the values themselves. */
#ifndef FOLIO_CPU_MATRIX_H
#define FOLIO_CPU_MATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels.h"
#include "cpu_pool.h"
#include "safetensors.h"
#include "tp_shard.h"

struct cpu_matrix {
    enum cpu_wtype type;
    int rows, cols;
    size_t row_bytes; /* stride between rows: cpu_row_bytes padded to 64 */
    unsigned char *data;
};

/* How the backend keeps weights: the reference widens everything to f32; the fast path keeps
 * GGUF's Q4_0/Q4_1/Q8_0 blocks as they are, packs other quantized GGUF types as Q8 and keeps
 * f32/f16/bf16 tensors in their own type. E4M3: `--quantization fp8`'s linear layers in either,
 * each row quantized from its values (common/fp8.h). */
enum cpu_weight_policy { CPU_WEIGHTS_F32, CPU_WEIGHTS_PACKED, CPU_WEIGHTS_E4M3 };

/* The block b of tensor t ([total_rows][total_cols]) as a matrix, or -1 with err naming it. */
int cpu_matrix_from_tensor(struct cpu_matrix *m, const struct folio_tensor *t, size_t total_rows,
                           size_t total_cols, struct folio_tp_block b,
                           enum cpu_weight_policy policy, const char *what, char *err,
                           size_t errlen);
void cpu_matrix_free(struct cpu_matrix *m);

/* dst = the rows of parts[0], then parts[1], ... (one product instead of several that share their
 * input), the parts freed; 0, or -1 (nothing changed) where their types or widths differ or
 * memory is short. */
int cpu_matrix_stack(struct cpu_matrix *dst, struct cpu_matrix *parts[], int n);

/* Row r's values as f32 (an embedding lookup). */
void cpu_matrix_row_f32(const struct cpu_matrix *m, int r, float *out);

/* Whether the matrix wants its activations quantized (a packed type). */
static inline bool cpu_matrix_packed(const struct cpu_matrix *m)
{
    return m->type == CPU_W_Q4 || m->type == CPU_W_Q8;
}

/* Activations for a run of matrix products: ntok rows of cols floats, and their blocks
 * quantized once (the first time a packed matrix meets them); likewise their e4m3 form, once
 * an E4M3 matrix meets them. */
struct cpu_act {
    const float *x;
    int ntok, cols;
    bool quantized, e4m3;
    int8_t *q; /* scratch of the caller's: [max_tokens][max_cols] and its scales */
    float *d, *s;
    float *x8, *x8_scale; /* scratch of the caller's: [max_tokens][max_cols], [max_tokens] */
};

/* Points act at x ([ntok][cols]); the quantized form is made when a packed matrix needs it. */
void cpu_act_set(struct cpu_act *act, const float *x, int ntok, int cols);

/* y[t][o] = sum_i x[t][i] * W[o][i] for the activations' tokens, runs of rows taken by the
 * pool's threads, each run met by CPU_TOK_TILE tokens at a time, so every weight row is read
 * once per tile. The sum for one (t, o) does not depend on ntok. */
void cpu_matmul(const struct cpu_kernels *k, const struct cpu_matrix *w, struct cpu_act *act,
                float *y, struct cpu_pool *pool);

/* The reference's product (f32 rows only, ldw floats apart), as it always summed. */
void cpu_matmul_ref(float *y, const float *x, const float *w, size_t ldw, int ntok, int in, int out,
                    struct cpu_pool *pool);

#endif
