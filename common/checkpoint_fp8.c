/* FP8 checkpoints as compressed-tensors (llm-compressor) and vLLM's fp8 serialization write
 * them: a weight X stored as F8_E4M3 codes beside X_scale (for X = *.weight, *.weight_scale),
 * one f32/bf16/f16 scale per output row ([rows, 1] or [rows]) or one for the tensor ([] or
 * [1]); a value is code x scale. The scales are widened to f32 here once, so that every reader
 * of the tensor (folio_tensor_read_f32, the backends' exact-code paths) finds them on it.
 * Block-wise scales (DeepSeek-V3's weight_block_size, a 2-D grid of scales) are refused: Folio's
 * FP8 products take one scale a row. A static activation scale (X.input_scale) is accepted and
 * not read: Folio quantizes each token's activations with its own scale, at least as fine. */
#include "checkpoint_impl.h"
#include "error.h"
#include "log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static void shape_text(const struct folio_tensor *t, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < t->ndim && off < len; d++)
        off +=
            (size_t)snprintf(buf + off, len - off, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (off < len)
        snprintf(buf + off, len - off, "]");
}

/* How many scales s holds for t (1 or t's rows), or 0 with err set. */
static size_t scale_count(const struct folio_tensor *t, const struct folio_tensor *s, char *err,
                          size_t errlen)
{
    int64_t rows = t->ndim >= 1 ? t->shape[0] : 1;
    char found[96];
    shape_text(s, found, sizeof found);
    if (s->dtype == FOLIO_DTYPE_F8_E4M3) {
        folio_set_err(err, errlen,
                      "%s: tensor '%s' (F8_E4M3): its scale '%s' is F8_E4M3; scales must be F32, "
                      "BF16 or F16",
                      s->file, t->name, s->name);
        return 0;
    }
    bool scalar = s->ndim == 0 || (s->ndim == 1 && s->shape[0] == 1);
    bool per_row = (s->ndim == 1 && s->shape[0] == rows) ||
                   (s->ndim == 2 && s->shape[0] == rows && s->shape[1] == 1);
    if (scalar || (s->ndim == 2 && s->shape[0] == 1 && s->shape[1] == 1))
        return 1;
    if (per_row && t->ndim >= 1)
        return (size_t)rows;
    if (s->ndim == 2 && s->shape[1] != 1) {
        folio_set_err(err, errlen,
                      "%s: tensor '%s' (F8_E4M3) has block-wise scales: '%s' has shape %s (a "
                      "weight_block_size grid); Folio takes one scale per output row ([%lld, 1] "
                      "or [%lld]) or per tensor ([] or [1])",
                      s->file, t->name, s->name, found, (long long)rows, (long long)rows);
        return 0;
    }
    folio_set_err(err, errlen,
                  "%s: tensor '%s' (F8_E4M3): its scale '%s' has shape %s; expected one per "
                  "output row ([%lld, 1] or [%lld]) or one per tensor ([] or [1])",
                  s->file, t->name, s->name, found, (long long)rows, (long long)rows);
    return 0;
}

int folio_checkpoint_bind_fp8_scales(struct folio_checkpoint *ck, char *err, size_t errlen)
{
    size_t input_scales = 0, fp8 = 0;
    for (size_t i = 0; i < ck->num_tensors; i++) {
        struct folio_tensor *t = &ck->tensors[i];
        if (ends_with(t->name, ".input_scale"))
            input_scales++;
        if (t->dtype != FOLIO_DTYPE_F8_E4M3)
            continue;
        fp8++;
        char name[512];
        if ((size_t)snprintf(name, sizeof name, "%s_scale", t->name) >= sizeof name) {
            folio_set_err(err, errlen, "%s: tensor '%s': name too long", t->file, t->name);
            return -1;
        }
        const struct folio_tensor *s = folio_checkpoint_find(ck, name);
        if (!s) {
            folio_set_err(err, errlen,
                          "%s: tensor '%s' is F8_E4M3 but its scale '%s' is not in the "
                          "checkpoint (%s)",
                          t->file, t->name, name, ck->source);
            return -1;
        }
        size_t n = scale_count(t, s, err, errlen);
        if (n == 0)
            return -1;
        float *v = malloc(n * sizeof *v);
        if (!v || folio_checkpoint_own(ck, v) != 0) {
            folio_set_err(err, errlen, "%s: tensor '%s': out of memory", s->file, s->name);
            return -1;
        }
        folio_tensor_read_f32(s, 0, n, v);
        for (size_t k = 0; k < n; k++)
            if (!isfinite(v[k])) {
                folio_set_err(err, errlen,
                              "%s: tensor '%s': scale %zu of '%s' is %g, not a finite number",
                              s->file, t->name, k, s->name, (double)v[k]);
                return -1;
            }
        t->scale = v;
        t->num_scales = n;
    }
    if (fp8 > 0 && input_scales > 0)
        folio_log_info(0,
                       "%s: %zu input_scale tensors (static activation scales) are not used: "
                       "Folio quantizes each token's activations with its own scale",
                       ck->source, input_scales);
    return 0;
}
