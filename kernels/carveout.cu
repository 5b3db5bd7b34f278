/* The shared-memory carveout (percent of the unified L1/shared storage) that
 * the decode step's kernels ask for; -1: the driver's choice. An SM runs CTAs
 * of kernels with different carveouts only after draining, which can undo the
 * overlap that programmatic dependent launch buys between a GEMV (little
 * shared memory) and the attention kernel (tens of KB); one value for all of
 * them lets their CTAs share SMs. Set once, before the first launch. */
#include "folio_kernels.h"

static int carveout = -1;

extern "C" void folio_k_set_smem_carveout(int percent)
{
    carveout = percent >= 0 && percent <= 100 ? percent : -1;
}

extern "C" int folio_k_smem_carveout(void)
{
    return carveout;
}
