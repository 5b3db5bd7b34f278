/* bench_l2_sweep: one read of bytes at p through the L2 (l2_sweep.cu). */
#ifndef FOLIO_BENCH_L2_SWEEP_H
#define FOLIO_BENCH_L2_SWEEP_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t bench_l2_sweep(const void *p, size_t bytes, unsigned *sink, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
