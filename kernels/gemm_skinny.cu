/* Weight-streaming GEMM for decode batches of 1..64 rows on the tensor cores:
 * y[m, n] = x[m, k] . w[n, k]^T, bf16 in, f32 accumulate (folio_k_gemm_skinny).
 *
 * Swap-AB: with m this small, the weights are the bytes, so they are the MMA
 * A operand (16 output features x 16 k, row-major: w's rows as they lie) and
 * the activations the B operand (16 k x 8 tokens, "col": x's rows as they
 * lie). mma.sync.m16n8k16 then yields C[feature][token]. A CTA of 4 warps
 * takes 64 weight rows (warp w: rows 16 w .. 16 w + 15) against all M tokens
 * (M = m rounded up to 16, 32 or 64; rows >= m zero-filled by cp.async with
 * src-size 0) over one K slice (blockIdx.y of S), streaming [64 x 64k] weight
 * and [M x 64k] activation tiles through a STAGES-deep cp.async ring whose
 * 144-byte row pitch puts the eight rows of every ldmatrix 8x8 block in
 * different banks.
 *
 * Fragments (lane = 4 g + tq; PTX ISA, mma.m16n8k16 .bf16):
 *   A a[0]: row g, k 2tq..+1; a[1]: row g+8, k 2tq..+1; a[2]: row g, k 2tq+8..+9;
 *     a[3]: row g+8, k 2tq+8..+9. ldmatrix.x4 matrix j is addressed by lanes
 *     8j..8j+7 and lands in register j (lane l: row l/4, elements 2(l%4), +1),
 *     so lane l points at weight row (l & 7) + 8 ((l >> 3) & 1), k 8 (l >> 4).
 *   B b0: k 2tq..+1 of token g; b1: k 2tq+8..+9 of token g. x is [token][k],
 *     so an 8x8 block of it loaded without .trans gives lane l token l/4,
 *     k 2(l%4), +1: exactly b0 (k 0-7) or b1 (k 8-15). One ldmatrix.x4 loads
 *     two token tiles: lane l points at token 16 jp + (l & 7) + 8 (l >> 4),
 *     k 8 ((l >> 3) & 1); registers 0, 1 are b0, b1 of tokens 16 jp .. +7,
 *     registers 2, 3 those of tokens 16 jp + 8 .. +15.
 *   C acc[j][0], [1]: feature row g, tokens 8j + 2tq, +1; acc[j][2], [3]:
 *     feature row g + 8, the same tokens.
 * (Replayed against a plain matmul by a CPU emulation of ldmatrix/mma before
 * the first GPU run.)
 *
 * Outputs:
 *   BF16: y bf16 [m][n]. With S > 1 the S CTAs of a column tile form a
 *     thread-block cluster (1, S, 1): each leaves its f32 tile in shared memory
 *     and the cluster sums the S tiles through distributed shared memory in
 *     the order s = 0, 1, .., one bf16 rounding (deterministic, no atomics).
 *   PARTIALS: y f32 [S][m][n], slice s's sums at s*m*n + r*n + c (what
 *     folio_k_add_rmsnorm_partials reads).
 *   GLU: w is [gate; up] (2n rows); the CTA's 64 rows are 32 gate features
 *     and their 32 up features, interleaved so that warp w's rows 0-7 are gate
 *     features 8 w .. 8 w + 7 of the tile and rows 8-15 the same up features:
 *     a lane's c0/c2 (and c1/c3) are gate and up of one (feature, token).
 *     y bf16 [m][n] = bf16(bf16(silu(bf16(gate))) * bf16(up)), as GEMM +
 *     folio_k_silu_mul round it. S > 1 sums through the cluster as BF16 does.
 * No allocation, no synchronization: fit for CUDA graph capture. */
#include <atomic>

#include <cooperative_groups.h>

#include "mma_helpers.cuh"

namespace cg = cooperative_groups;

namespace
{

constexpr int SK_WARPS = 4;
constexpr int SK_BN = 64;         /* weight rows per CTA */
constexpr int SK_BK = 64;         /* k per ring stage */
constexpr int SK_LD = SK_BK + 8;  /* smem row pitch (elements): 144 bytes */
constexpr int SK_STAGES = 4;      /* ring depth */
constexpr int SK_RLD = SK_BN + 4; /* f32 pitch of the cluster-reduction tile */
constexpr int SK_MAX_SPLITS = 8;  /* portable cluster size */

struct skinny_args {
    void *y;
    const folio_bf16_bits *x, *w;
    int m, n, k, kslice;
};

template <int M> constexpr size_t skinny_smem_bytes()
{
    size_t ring = sizeof(folio_bf16_bits) * SK_STAGES * (SK_BN + M) * SK_LD;
    size_t red = sizeof(float) * M * SK_RLD;
    return ring > red ? ring : red;
}

__device__ __forceinline__ float glu_act(float gate_sum, float up_sum)
{
    float gate = round_bf16(gate_sum), up = round_bf16(up_sum);
    float act = round_bf16(gate / (1.0f + expf(-gate)));
    return act * up;
}

template <int M, int MODE>
__global__ void __launch_bounds__(SK_WARPS * 32) gemm_skinny_kernel(skinny_args a)
{
    extern __shared__ __align__(16) unsigned char sk_smem[];
    folio_bf16_bits *ws = (folio_bf16_bits *)sk_smem;     /* [STAGES][BN][LD] */
    folio_bf16_bits *xs = ws + SK_STAGES * SK_BN * SK_LD; /* [STAGES][M][LD] */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
    const int tile = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
    const int64_t k = a.k;
    const int k_tiles = a.kslice / SK_BK;
    const int64_t k0 = (int64_t)split * a.kslice;

    /* This thread's cp.async chunks: weight rows and activation rows. */
    constexpr int W_CHUNKS = SK_BN * (SK_BK / 8) / (SK_WARPS * 32);
    constexpr int X_CHUNKS = (M * (SK_BK / 8) + SK_WARPS * 32 - 1) / (SK_WARPS * 32);
    const folio_bf16_bits *wsrc[W_CHUNKS];
    int wdst[W_CHUNKS];
#pragma unroll
    for (int i = 0; i < W_CHUNKS; i++) {
        int c = tid + i * SK_WARPS * 32, r = c >> 3, ch = c & 7;
        int64_t row;
        if (MODE == FOLIO_K_SKINNY_GLU) {
            int f = tile * (SK_BN / 2) + (r >> 4) * 8 + (r & 7); /* gate feature */
            row = (r & 8) ? a.n + f : f;
        } else {
            row = (int64_t)tile * SK_BN + r;
        }
        wsrc[i] = a.w + row * k + k0 + ch * 8;
        wdst[i] = r * SK_LD + ch * 8;
    }
    const folio_bf16_bits *xsrc[X_CHUNKS];
    int xdst[X_CHUNKS], xbytes[X_CHUNKS];
#pragma unroll
    for (int i = 0; i < X_CHUNKS; i++) {
        int c = tid + i * SK_WARPS * 32, r = c >> 3, ch = c & 7;
        bool live = r < a.m;
        xsrc[i] = live ? a.x + (int64_t)r * k + k0 + ch * 8 : a.x;
        xdst[i] = c < M * (SK_BK / 8) ? r * SK_LD + ch * 8 : -1;
        xbytes[i] = live ? 16 : 0;
    }
    auto load_stage = [&](int slot, int kt) {
        folio_bf16_bits *wd = ws + slot * SK_BN * SK_LD, *xd = xs + slot * M * SK_LD;
        const int off = kt * SK_BK;
#pragma unroll
        for (int i = 0; i < W_CHUNKS; i++)
            cp_async_16(wd + wdst[i], wsrc[i] + off, 16);
#pragma unroll
        for (int i = 0; i < X_CHUNKS; i++)
            if (xdst[i] >= 0)
                cp_async_16(xd + xdst[i], xsrc[i] + (xbytes[i] ? off : 0), xbytes[i]);
    };

    float acc[M / 8][4];
#pragma unroll
    for (int j = 0; j < M / 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

#pragma unroll
    for (int st = 0; st < SK_STAGES - 1; st++) {
        if (st < k_tiles)
            load_stage(st, st);
        cp_async_commit();
    }
    /* Lane offsets of the ldmatrix addresses (see the comment at the top). */
    const int a_off = (warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * SK_LD + (lane >> 4) * 8;
    const int b_off = ((lane & 7) + (lane >> 4) * 8) * SK_LD + ((lane >> 3) & 1) * 8;
    for (int kt = 0; kt < k_tiles; kt++) {
        cp_async_wait<SK_STAGES - 2>(); /* tile kt has landed (this thread's copies) */
        __syncthreads();                /* everyone's, and slot kt - 1 is free */
        int next = kt + SK_STAGES - 1;
        if (next < k_tiles)
            load_stage(next % SK_STAGES, next);
        cp_async_commit();
        const int slot = kt % SK_STAGES;
        const folio_bf16_bits *wt = ws + slot * SK_BN * SK_LD + a_off;
        const folio_bf16_bits *xt = xs + slot * M * SK_LD + b_off;
#pragma unroll
        for (int s = 0; s < SK_BK / 16; s++) {
            uint32_t af[4];
            ldmatrix_x4(af, wt + s * 16);
#pragma unroll
            for (int jp = 0; jp < M / 16; jp++) {
                uint32_t bf[4];
                ldmatrix_x4(bf, xt + jp * 16 * SK_LD + s * 16);
                mma_16816(acc[2 * jp], af, bf[0], bf[1]);
                mma_16816(acc[2 * jp + 1], af, bf[2], bf[3]);
            }
        }
    }
    cp_async_wait<0>();

    const int row = warp * 16 + g; /* the CTA's weight row of acc[.][0..1]; +8 for [2..3] */
    if (MODE == FOLIO_K_SKINNY_PARTIALS || splits == 1) {
        /* Straight from the fragments. */
#pragma unroll
        for (int j = 0; j < M / 8; j++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int t = 8 * j + 2 * tq + e;
                if (t >= a.m)
                    continue;
                if (MODE == FOLIO_K_SKINNY_PARTIALS) {
                    float *y = (float *)a.y + (int64_t)split * a.m * a.n + (int64_t)t * a.n +
                               (int64_t)tile * SK_BN + row;
                    y[0] = acc[j][e];
                    y[8] = acc[j][2 + e];
                } else if (MODE == FOLIO_K_SKINNY_BF16) {
                    folio_bf16_bits *y =
                        (folio_bf16_bits *)a.y + (int64_t)t * a.n + (int64_t)tile * SK_BN + row;
                    y[0] = f32_to_bf16(acc[j][e]);
                    y[8] = f32_to_bf16(acc[j][2 + e]);
                } else {
                    int f = tile * (SK_BN / 2) + warp * 8 + g;
                    ((folio_bf16_bits *)a.y)[(int64_t)t * a.n + f] =
                        f32_to_bf16(glu_act(acc[j][e], acc[j][2 + e]));
                }
            }
        }
        return;
    }

    /* S > 1 (BF16, GLU): the cluster of the tile's S slices sums them. */
    float *red = (float *)sk_smem; /* [M][RLD]: red[t][row] */
    __syncthreads();               /* every warp is done with the ring */
#pragma unroll
    for (int j = 0; j < M / 8; j++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            int t = 8 * j + 2 * tq + e;
            red[t * SK_RLD + row] = acc[j][e];
            red[t * SK_RLD + row + 8] = acc[j][2 + e];
        }
    }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync(); /* all S tiles written and visible cluster-wide */
    /* This CTA's share of the tile's outputs: consecutive threads take
     * consecutive features (coalesced stores). */
    const int cols = MODE == FOLIO_K_SKINNY_GLU ? SK_BN / 2 : SK_BN;
    const int total = a.m * cols, rank = (int)cluster.block_rank();
    const int per = (total + splits - 1) / splits;
    const int end = min(total, (rank + 1) * per);
    for (int i = rank * per + tid; i < end; i += SK_WARPS * 32) {
        int t = i / cols, c = i - t * cols;
        folio_bf16_bits *y = (folio_bf16_bits *)a.y + (int64_t)t * a.n;
        if (MODE == FOLIO_K_SKINNY_GLU) {
            float *gate = red + t * SK_RLD + (c >> 3) * 16 + (c & 7); /* up: 8 rows on */
            float gs = *cluster.map_shared_rank(gate, 0),
                  us = *cluster.map_shared_rank(gate + 8, 0);
            for (int s = 1; s < splits; s++) {
                gs += *cluster.map_shared_rank(gate, s);
                us += *cluster.map_shared_rank(gate + 8, s);
            }
            y[tile * (SK_BN / 2) + c] = f32_to_bf16(glu_act(gs, us));
        } else {
            float *p = red + t * SK_RLD + c;
            float v = *cluster.map_shared_rank(p, 0);
            for (int s = 1; s < splits; s++)
                v += *cluster.map_shared_rank(p, s);
            y[tile * SK_BN + c] = f32_to_bf16(v);
        }
    }
    cluster.sync(); /* no CTA leaves while another still reads its tile */
}

template <int M, int MODE>
static cudaError_t launch(const skinny_args &a, int splits, cudaStream_t s)
{
    auto kernel = gemm_skinny_kernel<M, MODE>;
    constexpr size_t smem = skinny_smem_bytes<M>();
    static std::atomic<bool> prepared(false); /* once, before any capture (the eager first step) */
    if (!prepared.load()) {
        cudaError_t e =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e == cudaSuccess && folio_k_smem_carveout() >= 0)
            e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     folio_k_smem_carveout());
        if (e != cudaSuccess)
            return e;
        prepared.store(true);
    }
    const int cols = MODE == FOLIO_K_SKINNY_GLU ? SK_BN / 2 : SK_BN;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(a.n / cols), (unsigned)splits);
    cfg.blockDim = dim3(SK_WARPS * 32);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = (unsigned)splits;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = MODE != FOLIO_K_SKINNY_PARTIALS && splits > 1 ? 1 : 0;
    cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, a);
    return e != cudaSuccess ? e : cudaGetLastError();
}

template <int M>
static cudaError_t launch_mode(const skinny_args &a, int mode, int splits, cudaStream_t s)
{
    switch (mode) {
    case FOLIO_K_SKINNY_BF16:
        return launch<M, FOLIO_K_SKINNY_BF16>(a, splits, s);
    case FOLIO_K_SKINNY_PARTIALS:
        return launch<M, FOLIO_K_SKINNY_PARTIALS>(a, splits, s);
    default:
        return launch<M, FOLIO_K_SKINNY_GLU>(a, splits, s);
    }
}

} // namespace

extern "C" int folio_k_gemm_skinny_splits(int m, int n, int k, int mode, int num_sms)
{
    (void)m;
    int cols = mode == FOLIO_K_SKINNY_GLU ? SK_BN / 2 : SK_BN;
    int tiles = n / cols, s = 1;
    while (s < SK_MAX_SPLITS && tiles * s < 2 * num_sms && k % (2 * s * SK_BK) == 0)
        s *= 2;
    return s;
}

extern "C" cudaError_t folio_k_gemm_skinny(void *y, const folio_bf16_bits *x,
                                           const folio_bf16_bits *w, int m, int n, int k, int mode,
                                           int splits, cudaStream_t s)
{
    if (m <= 0)
        return cudaSuccess;
    int cols = mode == FOLIO_K_SKINNY_GLU ? SK_BN / 2 : SK_BN;
    if (m > FOLIO_K_SKINNY_MAX_ROWS || n <= 0 || n % cols != 0 || k <= 0 || splits < 1 ||
        splits > SK_MAX_SPLITS || k % (splits * SK_BK) != 0 ||
        (mode != FOLIO_K_SKINNY_BF16 && mode != FOLIO_K_SKINNY_PARTIALS &&
         mode != FOLIO_K_SKINNY_GLU) ||
        ((uintptr_t)x | (uintptr_t)w | (uintptr_t)y) % 16 != 0)
        return cudaErrorInvalidValue;
    skinny_args a = {y, x, w, m, n, k, k / splits};
    if (m <= 16)
        return launch_mode<16>(a, mode, splits, s);
    if (m <= 32)
        return launch_mode<32>(a, mode, splits, s);
    return launch_mode<64>(a, mode, splits, s);
}
