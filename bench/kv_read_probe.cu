/* kv_read_probe: how fast can one kernel read the bytes of a b256 decode
 * attention layer (TinyLlama: 256 sequences x 4 KV heads x 512 keys x 64 dims,
 * K and V, bf16: 134 MB), by access pattern, with no arithmetic?
 *
 *     kv_read_probe [batch [ctx]]
 *
 * The cache is laid out as Folio's: K and V arrays of [block][KV head][16
 * keys][64 dims]; sequence s owns blocks s * nb .. s * nb + nb - 1 (as in
 * decode_bench). Patterns:
 *   flat       the used K and V ranges read front to back, grid-stride, four
 *              16-byte loads a thread in flight: the ceiling for 134 MB in one
 *              launch.
 *   warp1_stN  decode attention's shape at b256 without its arithmetic: one
 *              one-warp CTA per (sequence, KV head), tiles of 32 keys (two
 *              2 KB blocks of K and of V) through N cp.async stages.
 *   seq4_stN   one 4-warp CTA per sequence reading whole blocks (all four
 *              heads: 8 KB runs of K and of V) through N cp.async stages.
 *   warp1_ldg  warp1's work with register loads: a lane's 16 loads of the
 *              next tile issued as the previous tile is used (ptxas keeps
 *              about one tile, 8 KB a warp, in flight).
 * Each launch reads one of 8 copies of the cache in turn (1.1 GB), so that
 * nothing comes from L2. Prints one RESULT line a pattern: median us over 30
 * launches and TB/s over the 134 MB. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { KVH = 4, D = 64, BLK = 16, KT = 32, COPIES = 8, REPS = 30 };
constexpr int HEAD_BYTES = BLK * D * 2; /* one head of one block: 2 KB */

struct cache {
    const char *k, *v; /* one copy */
    int nb;            /* blocks a sequence owns */
    int tiles;         /* tiles of KT keys a sequence reads */
};

__device__ uint32_t g_sink;

__device__ __forceinline__ void cp16(void *dst, const void *src)
{
    uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(d), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wait_groups()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__global__ void flat_kernel(const uint4 *k, const uint4 *v, int64_t n16)
{
    uint32_t acc = 0;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n16; i += 4 * stride) {
        uint4 x[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            int64_t j = i + u * stride;
            x[u] =
                j < n16 ? __ldg(j < n16 / 2 ? k + j : v + (j - n16 / 2)) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < 4; u++)
            acc ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
    }
    if (acc == 0x12345678u)
        g_sink = acc;
}

/* Tile j of sequence s, head h: blocks 2j and 2j + 1, K then V, 16 B a lane
 * at a time (a block-head is 128 chunks of 16 B). */
template <int ST> __global__ void warp1_kernel(cache c)
{
    extern __shared__ uint4 sm[];
    const int s = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
    uint32_t acc = 0;
    auto load = [&](int j) {
        uint4 *st = sm + (j % ST) * (4 * HEAD_BYTES / 16);
        for (int b = 0; b < 2; b++) {
            const int64_t off = ((int64_t)(s * c.nb + 2 * j + b) * KVH + h) * HEAD_BYTES;
            for (int q = lane; q < HEAD_BYTES / 16; q += 32) {
                cp16(st + b * 128 + q, c.k + off + 16 * q);
                cp16(st + 256 + b * 128 + q, c.v + off + 16 * q);
            }
        }
    };
    for (int j = 0; j < ST; j++) {
        if (j < c.tiles)
            load(j);
        commit();
    }
    for (int j = 0; j < c.tiles; j++) {
        wait_groups<ST - 1>();
        __syncwarp();
        const uint4 x = sm[(j % ST) * (4 * HEAD_BYTES / 16) + lane];
        acc ^= x.x ^ x.w;
        __syncwarp();
        if (j + ST < c.tiles)
            load(j + ST);
        commit();
    }
    if (acc == 0x12345678u)
        g_sink = acc;
}

/* One CTA of 128 threads per sequence; a stage is two whole blocks (all four
 * heads): 16 KB of K, 16 KB of V. */
template <int ST> __global__ void seq4_kernel(cache c)
{
    extern __shared__ uint4 sm[];
    const int s = blockIdx.x, t = threadIdx.x;
    constexpr int BLOCK_BYTES = KVH * HEAD_BYTES; /* 8 KB */
    constexpr int STAGE16 = 4 * BLOCK_BYTES / 16;
    uint32_t acc = 0;
    auto load = [&](int j) {
        uint4 *st = sm + (j % ST) * STAGE16;
        const int64_t off = (int64_t)(s * c.nb + 2 * j) * BLOCK_BYTES;
        for (int q = t; q < 2 * BLOCK_BYTES / 16; q += blockDim.x) {
            cp16(st + q, c.k + off + 16 * q);
            cp16(st + 2 * BLOCK_BYTES / 16 + q, c.v + off + 16 * q);
        }
    };
    for (int j = 0; j < ST; j++) {
        if (j < c.tiles)
            load(j);
        commit();
    }
    for (int j = 0; j < c.tiles; j++) {
        wait_groups<ST - 1>();
        __syncthreads();
        const uint4 x = sm[(j % ST) * STAGE16 + t];
        acc ^= x.x ^ x.w;
        __syncthreads();
        if (j + ST < c.tiles)
            load(j + ST);
        commit();
    }
    if (acc == 0x12345678u)
        g_sink = acc;
}

/* warp1's tiles through registers: 16 loads of 16 B a lane a tile. */
__global__ void warp1_ldg_kernel(cache c)
{
    const int s = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
    uint32_t acc = 0;
    uint4 cur[16], nxt[16];
    auto load = [&](int j, uint4(&r)[16]) {
#pragma unroll
        for (int b = 0; b < 2; b++) {
            const int64_t off = ((int64_t)(s * c.nb + 2 * j + b) * KVH + h) * HEAD_BYTES;
#pragma unroll
            for (int q = 0; q < 4; q++) {
                r[b * 8 + q] = __ldg((const uint4 *)(c.k + off) + lane + 32 * q);
                r[b * 8 + 4 + q] = __ldg((const uint4 *)(c.v + off) + lane + 32 * q);
            }
        }
    };
    load(0, cur);
    for (int j = 0; j < c.tiles; j++) {
        if (j + 1 < c.tiles)
            load(j + 1, nxt);
#pragma unroll
        for (int q = 0; q < 16; q++) {
            acc ^= cur[q].x ^ cur[q].y ^ cur[q].z ^ cur[q].w;
            cur[q] = nxt[q];
        }
    }
    if (acc == 0x12345678u)
        g_sink = acc;
}

int main(int argc, char **argv)
{
    const int batch = argc > 1 ? atoi(argv[1]) : 256;
    const int ctx = argc > 2 ? atoi(argv[2]) : 512;
    if (batch < 1 || ctx < KT || ctx % KT != 0) {
        fprintf(stderr, "usage: kv_read_probe [batch [ctx: a multiple of %d]]\n", KT);
        return 2;
    }
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int nb = ctx / BLK + 1; /* as decode_bench: room for the next key */
    const size_t arr = (size_t)batch * nb * KVH * HEAD_BYTES; /* one K (or V) array */
    char *pool;
    CK(cudaMalloc(&pool, 2 * arr * COPIES));
    CK(cudaMemset(pool, 0x3c, 2 * arr * COPIES));
    const double bytes = 2.0 * batch * KVH * ctx * D * 2;

    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const char *names[] = {"flat",     "warp1_st2", "warp1_st3", "warp1_st4",
                           "seq4_st2", "seq4_st3",  "seq4_st4",  "warp1_ldg"};
    const int n_patterns = (int)(sizeof names / sizeof names[0]);
    CK(cudaFuncSetAttribute(seq4_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            4 * 4 * KVH * HEAD_BYTES));
    CK(cudaFuncSetAttribute(seq4_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            3 * 4 * KVH * HEAD_BYTES));
    CK(cudaFuncSetAttribute(seq4_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            2 * 4 * KVH * HEAD_BYTES));
    for (int p = 0; p < n_patterns; p++) {
        float t[REPS];
        for (int r = -3; r < REPS; r++) {
            const int cpy = (r + 3 + p) % COPIES;
            cache c = {pool + 2 * arr * cpy, pool + 2 * arr * cpy + arr, nb, ctx / KT};
            CK(cudaEventRecord(e0));
            switch (p) {
            case 0:
                flat_kernel<<<sms * 4, 512>>>((const uint4 *)c.k, (const uint4 *)c.v,
                                              (int64_t)batch * (ctx / BLK) * KVH * HEAD_BYTES / 16 *
                                                  2);
                break;
            case 1:
                warp1_kernel<2><<<dim3(batch, KVH), 32, 2 * 4 * HEAD_BYTES>>>(c);
                break;
            case 2:
                warp1_kernel<3><<<dim3(batch, KVH), 32, 3 * 4 * HEAD_BYTES>>>(c);
                break;
            case 3:
                warp1_kernel<4><<<dim3(batch, KVH), 32, 4 * 4 * HEAD_BYTES>>>(c);
                break;
            case 4:
                seq4_kernel<2><<<batch, 128, 2 * 4 * KVH * HEAD_BYTES>>>(c);
                break;
            case 5:
                seq4_kernel<3><<<batch, 128, 3 * 4 * KVH * HEAD_BYTES>>>(c);
                break;
            case 6:
                seq4_kernel<4><<<batch, 128, 4 * 4 * KVH * HEAD_BYTES>>>(c);
                break;
            case 7:
                warp1_ldg_kernel<<<dim3(batch, KVH), 32>>>(c);
                break;
            }
            CK(cudaGetLastError());
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            if (r >= 0)
                CK(cudaEventElapsedTime(&t[r], e0, e1));
        }
        for (int i = 1; i < REPS; i++) /* insertion sort for the median */
            for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
                float x = t[j];
                t[j] = t[j - 1];
                t[j - 1] = x;
            }
        const double us = t[REPS / 2] * 1e3;
        printf("RESULT pattern=%s batch=%d ctx=%d us=%.2f tbps=%.3f min_us=%.2f\n", names[p], batch,
               ctx, us, bytes / us * 1e-6, t[0] * 1e3);
    }
    CK(cudaFree(pool));
    return 0;
}
