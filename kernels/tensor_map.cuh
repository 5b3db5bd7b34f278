/* The driver's cuTensorMapEncodeTiled, looked up once through the runtime (no
 * link against libcuda): the TMA GEMM's maps (gemm_tma.cu) and decode
 * attention's cache maps (attention_decode.cu). NULL on a driver without it. */
#ifndef FOLIO_KERNELS_TENSOR_MAP_CUH
#define FOLIO_KERNELS_TENSOR_MAP_CUH

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
{
    static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        cudaDriverEntryPointQueryResult q;
        void *p = NULL;
        return cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                cudaEnableDefault, &q) == cudaSuccess &&
                       q == cudaDriverEntryPointSuccess
                   ? (PFN_cuTensorMapEncodeTiled_v12000)p
                   : (PFN_cuTensorMapEncodeTiled_v12000)NULL;
    }();
    return fn;
}

#endif
