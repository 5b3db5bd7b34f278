/* Which quantization a backend runs. An FP8 checkpoint (config.json's quantization_config, or
 * F8_E4M3 layer weights) is served as --quantization fp8 whatever the flag says: its codes and
 * scales are what the publisher validated, and widening them to bf16 would double the bytes a
 * step reads for nothing. Explicit fp8 agrees; the default none becomes fp8, said once in the
 * log. A layer projection such a checkpoint ships unquantized (its ignore list) is quantized at
 * load by common/fp8.h's rule, as under --quantization fp8, since Folio's FP8 steps take every
 * projection in e4m3; the log counts them. */
#include "backend.h"
#include "log.h"

static bool layer_tensors_f8(const struct folio_model *m, size_t *f8, size_t *all)
{
    *f8 = *all = 0;
    for (int i = 0; i < m->config.num_layers; i++) {
        const struct folio_layer_weights *L = &m->layers[i];
        const struct folio_tensor *t[] = {L->wq,     L->wk,   L->wv,    L->wo,
                                          L->w_gate, L->w_up, L->w_down};
        for (size_t j = 0; j < sizeof t / sizeof *t; j++) {
            *all += 1;
            *f8 += t[j] && t[j]->dtype == FOLIO_DTYPE_F8_E4M3;
        }
    }
    return *f8 > 0;
}

bool folio_model_is_fp8(const struct folio_model *m)
{
    size_t f8, all;
    return m && (m->config.quantization == FOLIO_QUANT_FP8 || layer_tensors_f8(m, &f8, &all));
}

enum folio_quantization folio_backend_quantization(const struct folio_model *m,
                                                   enum folio_quantization asked)
{
    size_t f8, all;
    layer_tensors_f8(m, &f8, &all);
    if (!folio_model_is_fp8(m))
        return asked;
    if (asked != FOLIO_QUANT_FP8)
        folio_log_info(0,
                       "the checkpoint is FP8 (%s): serving it as --quantization fp8, its e4m3 "
                       "codes and scales as shipped",
                       m->config.quant_method[0] ? m->config.quant_method : "F8_E4M3 weights");
    if (f8 < all)
        folio_log_info(0,
                       "fp8 checkpoint: %zu of %zu layer projections ship unquantized; they are "
                       "quantized at load (per output row, as --quantization fp8)",
                       all - f8, all);
    return FOLIO_QUANT_FP8;
}
