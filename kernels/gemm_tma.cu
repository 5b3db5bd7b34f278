/* Decode-batch GEMM on Hopper's own path: TMA tensor copies feeding wgmma
 * (folio_k_gemm_tma). y[m, n] = x[m, k] . w[n, k]^T for m <= 64 rows, bf16 in,
 * f32 accumulate; bf16 out, f32 out (the LM head's logits), f32 partials
 * [S][m][n] of K slices (splits > 1), or SwiGLU's activation (glu).
 *
 * At decode sizes the weights are the bytes: each CTA streams one NT-row
 * weight tile over its K slice. The activations are wgmma's A operand (64
 * token rows, read whole: outputs of rows past m are never stored; letting
 * TMA zero-fill them instead measured slower), the weight tile its B operand
 * (NT x 64 k, K-major as the rows lie). Both arrive through a ring of STAGES
 * shared-memory stages, 128-byte swizzled as wgmma's descriptors expect. One
 * producer warp issues the copies (full barriers count their bytes); the
 * consumer warpgroup multiplies a stage, waits for its wgmmas and frees it
 * (empty barriers). Launched with programmatic dependent launch, the first
 * ring of weight copies goes out before the wait for the previous kernel,
 * and the next kernel may launch from then on (its constant reads overlap).
 *
 * Fragment of the m64nNTk16 accumulator (PTX ISA, wgmma .f32): thread t of the
 * warpgroup, warp w = t / 32, lane l: d[4 j + 0, 1] are row 16 w + l / 4,
 * columns 8 j + 2 (l % 4) and + 1; d[4 j + 2, 3] the same columns of row
 * 16 w + l / 4 + 8. Rows are tokens, columns weight rows (output features).
 *
 * Measured against cuBLASLt by bench/gemm_tma_bench.c; the backend runs QKV,
 * O, gate/up and down on it for steps of 3-64 rows (cuda_backend.c says why). */
#include <atomic>

#include "mbarrier.cuh"
#include "tensor_map.cuh"
#include "common.cuh"

namespace
{

constexpr int TK = 64; /* k per stage: one 128-byte swizzle span */
constexpr int NT = 64; /* weight rows per CTA */
constexpr int MT = 64; /* activation rows (wgmma M) */
constexpr int STAGES = 6;
constexpr int A_BYTES = MT * TK * 2; /* 8 KB */
constexpr int B_BYTES = NT * TK * 2; /* 8 KB */
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int THREADS = 128 + 32; /* consumer warpgroup + producer warp */

struct tma_args {
    void *y;
    int m, n, k, kslice;
    bool glu; /* w is [gate; up] (2n rows); y = bf16(silu(x.gate) * x.up) [m][n] */
    bool f32; /* y in f32 (also with splits > 1: slice s at y + s * m * n) */
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* SwiGLU's activation rounded as the GEMM + folio_k_silu_mul path rounds it. */
__device__ __forceinline__ float glu_act(float gate_sum, float up_sum)
{
    return silu_bf16(round_bf16(gate_sum)) * round_bf16(up_sum);
}

/* wgmma shared-memory descriptor of a K-major tile with 128-byte rows,
 * 128-byte swizzle: start address, leading byte offset 16 (unused by this
 * layout), stride byte offset 1024 (eight rows), swizzle mode 1. */
__device__ __forceinline__ uint64_t sw128_desc(const void *p)
{
    uint64_t a = smem_addr(p);
    return ((a & 0x3ffff) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, int c0, int c1,
                                            uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_addr(dst)),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
                 : "memory");
}

/* d += A (64 x 16) . B (NT x 16)^T, both K-major in shared memory. */
__device__ __forceinline__ void wgmma_64x64x16(float (&d)[32], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "%32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db));
}
#endif

__global__ void __launch_bounds__(THREADS)
    gemm_tma_kernel(const __grid_constant__ CUtensorMap xmap,
                    const __grid_constant__ CUtensorMap wmap, tma_args a)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) /* wgmma: sm_90a only (the compute_90 PTX traps) */
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    /* The swizzled tiles need 1024-byte alignment. */
    unsigned char *smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    /* GLU: the CTA's 32 output features f0 .. f0 + 31 read gate rows f0 .. into
     * B rows 0-31 and up rows n + f0 .. into B rows 32-63, so that a thread's
     * accumulator columns 8 j + c (j < 4) and 8 (j + 4) + c are the gate and
     * up sums of one feature. */
    const int n0 = blockIdx.x * (a.glu ? NT / 2 : NT), split = blockIdx.y;
    const int k_tiles = a.kslice / TK, k0 = split * a.kslice;

    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 4); /* each consumer warp, after its wgmma wait */
        }
        mbar_init_fence();
    }
    __syncthreads();

    /* The weights are written by no kernel of the step: the first ring's worth
     * goes out before the wait for the previous kernel (programmatic dependent
     * launch), the activations after it. */
    const bool producer = warp == 4 && lane == 0;
    auto load_w = [&](unsigned char *dst, int kk, uint64_t *bar) {
        if (a.glu) {
            tma_load_2d(dst, &wmap, kk, n0, bar);
            tma_load_2d(dst + B_BYTES / 2, &wmap, kk, a.n + n0, bar);
        } else {
            tma_load_2d(dst, &wmap, kk, n0, bar);
        }
    };
    const int early = k_tiles < STAGES ? k_tiles : STAGES;
    if (producer)
        for (int kt = 0; kt < early; kt++) {
            mbar_arrive_expect_tx(&full[kt], STAGE_BYTES);
            load_w(smem + (size_t)kt * STAGE_BYTES + A_BYTES, k0 + kt * TK, &full[kt]);
        }
    /* The next kernel may launch now (if launched with programmatic dependent
     * launch): its own reads of constant data then overlap this one. */
    pdl_trigger();
    pdl_wait();
    if (warp == 4) {
        if (producer) {
            for (int kt = 0; kt < early; kt++)
                tma_load_2d(smem + (size_t)kt * STAGE_BYTES, &xmap, k0 + kt * TK, 0, &full[kt]);
            for (int kt = early; kt < k_tiles; kt++) {
                const int s = kt % STAGES;
                mbar_wait(&empty[s], (uint32_t)((kt / STAGES) - 1) & 1);
                unsigned char *st = smem + (size_t)s * STAGE_BYTES;
                mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
                load_w(st + A_BYTES, k0 + kt * TK, &full[s]);
                tma_load_2d(st, &xmap, k0 + kt * TK, 0, &full[s]);
            }
        }
        return;
    }

    float d[32];
#pragma unroll
    for (int i = 0; i < 32; i++)
        d[i] = 0.0f;
    for (int kt = 0; kt < k_tiles; kt++) {
        const int s = kt % STAGES;
        mbar_wait(&full[s], (uint32_t)(kt / STAGES) & 1);
        const unsigned char *st = smem + (size_t)s * STAGE_BYTES;
        const uint64_t da = sw128_desc(st), db = sw128_desc(st + A_BYTES);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int j = 0; j < TK / 16; j++) /* 16 k = 32 bytes along the swizzled row */
            wgmma_64x64x16(d, da + 2 * j, db + 2 * j);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (lane == 0)
            mbar_arrive(&empty[s]);
    }

    const int r0 = 16 * warp + (lane >> 2), c0 = 2 * (lane & 3);
    if (a.glu) {
#pragma unroll
        for (int j = 0; j < NT / 16; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = r0 + 8 * h, col = n0 + 8 * j + c0;
                if (row >= a.m)
                    continue;
                const int g = 4 * j + 2 * h, u = 4 * (j + NT / 16) + 2 * h;
                folio_bf16_bits *y = (folio_bf16_bits *)a.y + (int64_t)row * a.n + col;
                *(uint32_t *)y = (uint32_t)f32_to_bf16(glu_act(d[g], d[u])) |
                                 (uint32_t)f32_to_bf16(glu_act(d[g + 1], d[u + 1])) << 16;
            }
        return;
    }
#pragma unroll
    for (int j = 0; j < NT / 8; j++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = r0 + 8 * h, col = n0 + 8 * j + c0;
            if (row >= a.m || col >= a.n)
                continue;
            const float v0 = d[4 * j + 2 * h], v1 = d[4 * j + 2 * h + 1];
            if (a.f32) {
                float *y = (float *)a.y + ((int64_t)split * a.m + row) * a.n + col;
                *(float2 *)y = make_float2(v0, v1);
            } else {
                folio_bf16_bits *y = (folio_bf16_bits *)a.y + (int64_t)row * a.n + col;
                *(uint32_t *)y = (uint32_t)f32_to_bf16(v0) | (uint32_t)f32_to_bf16(v1) << 16;
            }
        }
    }
#else
    __trap();
#endif
}

} // namespace

static_assert(sizeof(struct folio_k_tmap) == sizeof(CUtensorMap), "a tensor map is 128 bytes");

extern "C" int folio_k_tmap_encode(struct folio_k_tmap *map, const folio_bf16_bits *base, int rows,
                                   int k, int box_rows)
{
    PFN_cuTensorMapEncodeTiled_v12000 fn = tensor_map_encoder();
    if (!fn || rows < 1 || k < TK || k % TK != 0 ||
        (box_rows != MT && box_rows != NT && box_rows != NT / 2) || (uintptr_t)base % 16 != 0 ||
        (uintptr_t)map % 64 != 0)
        return -1;
    cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)k * 2};
    cuuint32_t box[2] = {(cuuint32_t)TK, (cuuint32_t)box_rows};
    cuuint32_t elem[2] = {1, 1};
    CUresult r = fn((CUtensorMap *)map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base, dims,
                    strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? 0 : -1;
}

extern "C" cudaError_t folio_k_gemm_tma(const struct folio_k_tmap *xmap,
                                        const struct folio_k_tmap *wmap, void *y, int m, int n,
                                        int k, int splits, int out, int pdl, cudaStream_t s)
{
    if (m <= 0)
        return cudaSuccess;
    const bool glu = out == FOLIO_K_TMA_GLU;
    if (m > MT || n % (glu ? NT / 2 : NT) != 0 || splits < 1 || k % (splits * TK) != 0 ||
        (glu && splits != 1) ||
        (out != FOLIO_K_TMA_BF16 && out != FOLIO_K_TMA_GLU && out != FOLIO_K_TMA_F32))
        return cudaErrorInvalidValue;
    const size_t smem = (size_t)STAGES * STAGE_BYTES + 1024;
    static std::atomic<bool> prepared(false); /* before any capture: the eager first step */
    if (!prepared.load()) {
        cudaError_t e = cudaFuncSetAttribute(
            gemm_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess)
            return e;
        prepared.store(true);
    }
    tma_args a = {y, m, n, k, k / splits, glu, out == FOLIO_K_TMA_F32 || splits > 1};
    const int cols = glu ? NT / 2 : NT;
    cudaError_t e =
        launch_pdl(gemm_tma_kernel, dim3((unsigned)(n / cols), (unsigned)splits), dim3(THREADS),
                   smem, s, pdl != 0, *(const CUtensorMap *)xmap, *(const CUtensorMap *)wmap, a);
    return e != cudaSuccess ? e : cudaGetLastError();
}
