/* The table of the CUDA backend's switches and the one place that reads them. */
#include "cuda_tuning.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio_kernels.h"

enum kind {
    FLAG,  /* 0 or 1 */
    RANGE, /* an integer in [lo, hi] */
    POW2,  /* 1, 2, 4 or 8 */
};

struct switch_def {
    const char *name;
    size_t offset; /* of its field in struct cuda_tuning */
    enum kind kind;
    int def, lo, hi;
    const char *doc;
};

#define AT(f) offsetof(struct cuda_tuning, f)
static const struct switch_def switches[] = {
    {"FOLIO_CUDA_KEEP_LOGITS", AT(keep_logits), FLAG, 0, 0, 1,
     "1: a step's logits stay readable after the next launch (tests that pipeline steps)"},
    {"FOLIO_GEMV_MAX_ROWS", AT(gemv_max_rows), RANGE, 2, 0, FOLIO_K_GEMV_MAX_ROWS,
     "steps of up to this many rows take the GEMV path (norms fused into the GEMVs)"},
    {"FOLIO_SPLITK_O", AT(splitk_o), POW2, 0, 1, 8,
     "K slices of the O projection on the cuBLASLt path (unset: 2 up to 128 rows, else 1)"},
    {"FOLIO_SPLITK_DOWN", AT(splitk_down), POW2, 0, 1, 8,
     "K slices of the down projection on the cuBLASLt path (unset: the same rule)"},
    {"FOLIO_PDL", AT(pdl), FLAG, 1, 0, 1, "0: no programmatic dependent launch (a yardstick)"},
    {"FOLIO_TMA_GEMM", AT(tma_gemm), FLAG, 1, 0, 1,
     "0: steps of 3-64 rows run their projections on cuBLASLt instead of the TMA GEMM"},
    {"FOLIO_ATTN_WARPS_PER_SM", AT(attn_warps_per_sm), RANGE, FOLIO_K_ATTN_WARPS_PER_SM, 1, 64,
     "decode attention splits the keys until about this many warps run per SM"},
    {"FOLIO_ATTN_CTA_WARPS", AT(attn_cta_warps), RANGE, 0, 0, 4,
     "1 or 4 forces the decode attention kernel's warps per CTA (0: by batch)"},
    {"FOLIO_SAMPLE_SPLIT", AT(sample_split), FLAG, 1, 0, 1,
     "0: every row sampled by the one-CTA-a-row kernel (the yardstick of the split samplers)"},
};
#define NUM_SWITCHES (sizeof(switches) / sizeof(switches[0]))

static bool takes(const struct switch_def *s, int v)
{
    if (s->kind == POW2)
        return v == 1 || v == 2 || v == 4 || v == 8;
    return v >= s->lo && v <= s->hi;
}

static void store(struct cuda_tuning *t, const struct switch_def *s, int v)
{
    char *field = (char *)t + s->offset;
    if (s->kind == FLAG)
        *(bool *)field = v != 0;
    else
        *(int *)field = v;
}

void cuda_tuning_read(struct cuda_tuning *t)
{
    for (size_t i = 0; i < NUM_SWITCHES; i++) {
        const struct switch_def *s = &switches[i];
        store(t, s, s->def);
        const char *v = getenv(s->name);
        if (!v || !*v)
            continue;
        char *end;
        long n = strtol(v, &end, 10);
        if (*end != '\0' || n < -1000000 || n > 1000000 || !takes(s, (int)n)) {
            fprintf(stderr, "cuda backend: ignoring %s=%s (%s)\n", s->name, v, s->doc);
            continue;
        }
        store(t, s, (int)n);
    }
}
