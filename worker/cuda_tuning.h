/* The CUDA backend's tuning switches: FOLIO_* environment variables, read
 * once when the backend is created (cuda_tuning_read). Each exists because a
 * test or a benchmark script sets it; docs/tuning.md lists them. */
#ifndef FOLIO_CUDA_TUNING_H
#define FOLIO_CUDA_TUNING_H

#include <stdbool.h>

struct cuda_tuning {
    bool keep_logits;      /* FOLIO_CUDA_KEEP_LOGITS */
    int gemv_max_rows;     /* FOLIO_GEMV_MAX_ROWS */
    int splitk_o;          /* FOLIO_SPLITK_O: 0 the default rule */
    int splitk_down;       /* FOLIO_SPLITK_DOWN: 0 the default rule */
    bool pdl;              /* FOLIO_PDL */
    bool tma_gemm;         /* FOLIO_TMA_GEMM */
    int attn_warps_per_sm; /* FOLIO_ATTN_WARPS_PER_SM */
    int attn_cta_warps;    /* FOLIO_ATTN_CTA_WARPS: 0 by batch */
    bool sample_split;     /* FOLIO_SAMPLE_SPLIT */
};

/* The defaults, each overridden by its variable where that is set to a value
 * it takes; a value it does not take is reported on stderr and ignored. */
void cuda_tuning_read(struct cuda_tuning *t);

#endif
