/* The per-request random numbers of sampling: a counter-based hash of
 * (seed, output_index, vocab index), so that a request's samples depend only
 * on its seed and position, never on batch composition, preemption or which
 * backend ran it. CPU and CUDA share this definition. */
#ifndef FOLIO_RNG_H
#define FOLIO_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define FOLIO_HD __host__ __device__ __forceinline__
#else
#define FOLIO_HD static inline
#endif

FOLIO_HD uint64_t folio_splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Uniform in (0, 1]: never 0, so -log(u) is finite. */
FOLIO_HD float folio_rng_uniform(uint64_t seed, uint32_t output_index, uint32_t i)
{
    uint64_t h = folio_splitmix64(seed ^ folio_splitmix64(((uint64_t)output_index << 32) | i));
    return (float)((h >> 40) + 1) * (1.0f / 16777216.0f);
}

#endif
