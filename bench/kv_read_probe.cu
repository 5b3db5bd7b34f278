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
 *   warp1_tab  warp1_st2 taking its block ids from a block table, as decode
 *              attention does: consecutive blocks (_scat: block i of the
 *              table at (i * 7919) % blocks, as decode_bench's attention mode).
 *   folio      Folio's decode attention itself (folio_k_attention_decode, the
 *              plan the backend would pick, 32 query heads over 4) on the same
 *              cache: consecutive blocks; _scat: scattered; _key1: one key more
 *              (position ctx, as a decode step's new token: 17 tiles at 512);
 *              _rope_norm_key1: that with RoPE and the norm's 1 / rms in the
 *              kernel, the form a b256 step runs.
 *   warp1_attnload  warp1_tab copying through decode attention's own loader
 *              (attention_load_blocks: its shared-memory pitch, per-key masks,
 *              cp.async with a source size).
 *   warp1_zfill  warp1_tab with only the source-size form of cp.async.
 *   warp1_pitch  warp1_tab into decode attention's padded rows (144 bytes a
 *              key); _swizzle: into 128-byte rows with the 16-byte chunks
 *              XOR-swizzled by row; warp1_zfill_wide: warp1_zfill with the
 *              padded stages' shared-memory size. _pitch_read / _swizzle_read:
 *              warp1_pitch / _swizzle with every tile read as decode attention
 *              reads it (16 ldmatrix a tile), no arithmetic.
 *   warp1_bulk_stN  warp1's tiles by TMA bulk copies (cp.async.bulk, one
 *              2 KB block-head each, lane 0 issuing) through N stages, each
 *              with an mbarrier: the copies without the LSU.
 *   ring_bulk_all / _half / _quarter  one one-warp CTA an SM (half, a
 *              quarter of the SMs), each streaming whole blocks (8 KB of K
 *              and 8 KB of V, all four heads) through a 12-stage ring of bulk
 *              copies: can fewer SMs keep the DRAM busy?
 * Each launch reads one of 8 copies of the cache in turn (1.1 GB), so that
 * nothing comes from L2. Prints one RESULT line a pattern: us, the median of
 * 30 launches timed alone (events around each, as decode_bench's attention
 * mode times), and chain_us, a CUDA graph of 8 launches (one a copy, as a
 * step's kernels follow each other) over 8; TB/s over ctx keys' bytes.
 *
 * KV_PROBE_PATTERNS (a comma-separated list of names) runs only those.
 * KV_PROBE_LOOP_S=S then replays each pattern's chain for S seconds after
 * timing it and prints a LOOP line, so that bench/gpu/power_by_pattern.sh can
 * read the card's power and clock while one pattern runs. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_tile.cuh"
#include "folio_kernels.h"
#include "mbarrier.cuh"

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
/* cp16 with the source-size operand (bytes read; the rest zero-filled). */
__device__ __forceinline__ void cp16_size(void *dst, const void *src, int bytes)
{
    uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
                 "r"(bytes)
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

/* The copy ring every cp.async pattern runs: the first ST tiles, then each
 * tile waited for and used (use(stage): by default one 16-byte chunk of it
 * read, so that nothing is dead), its stage refilled with the tile ST ahead.
 * CTA: the whole CTA shares the stages (__syncthreads), else one warp.
 * Returns the XOR of what use returned. */
template <int ST, bool CTA, class Load, class Use>
__device__ __forceinline__ uint32_t copy_ring(int tiles, const Load &load, const Use &use)
{
    uint32_t acc = 0;
    for (int j = 0; j < ST; j++) {
        if (j < tiles)
            load(j);
        commit();
    }
    for (int j = 0; j < tiles; j++) {
        wait_groups<ST - 1>();
        CTA ? __syncthreads() : __syncwarp();
        acc ^= use(j % ST);
        CTA ? __syncthreads() : __syncwarp();
        if (j + ST < tiles)
            load(j + ST);
        commit();
    }
    return acc;
}

/* How a one-warp CTA copies a tile: plain 16-byte cp.async, cp.async's
 * source-size form (every copy whole), or decode attention's own loader
 * (attention_load_blocks: its shared-memory pitch, per-key masks and
 * source-size copies). */
enum copy_form { PLAIN, ZFILL, ATTN_LOADER, PITCH, SWIZZLE, ZFILL_WIDE };

/* PITCH: plain copies into decode attention's padded rows (144 bytes a key);
 * SWIZZLE: into 128-byte rows, chunk c of key r at c ^ (r & 7) (conflict-free
 * for ldmatrix without padding); ZFILL_WIDE: ZFILL with the padded stages'
 * size (their shared-memory footprint, rows unpadded). */
template <int FORM> __host__ __device__ constexpr int warp1_stage_bytes()
{
    return FORM == ATTN_LOADER || FORM == PITCH || FORM == ZFILL_WIDE
               ? 2 * KT * tile_pitch<D>::value * 2
               : 4 * HEAD_BYTES;
}

/* PITCH and SWIZZLE: decode attention's two stage layouts (tile_layout):
 * 16-byte chunks a key row, and the chunk holding chunk col of row `row` of
 * K (or of V, from KT rows on), as the copies write it and ldmatrix reads it. */
template <int FORM> using form_layout = tile_layout<D, FORM == SWIZZLE>;

template <int FORM> __host__ __device__ constexpr int row_chunks()
{
    return form_layout<FORM>::LD / 8;
}

template <int FORM> __device__ __forceinline__ int chunk_at(int row, int col)
{
    return form_layout<FORM>::at(row, col) / 8;
}

/* Tile j of sequence s, head h: blocks 2j and 2j + 1, K then V, 16 B a lane
 * at a time (a block-head is 128 chunks of 16 B). With a block table (tab),
 * lane i holds the id of the sequence's block 32 chunk + i, read when the
 * tiles reach that chunk, as decode attention reads them, and each tile takes
 * its two ids from those lanes; without one the blocks are consecutive. */
template <int ST, int FORM, bool READ = false>
__global__ void warp1_kernel(cache c, const int32_t *tab, int ctx)
{
    extern __shared__ uint4 sm[];
    constexpr int STAGE16 = warp1_stage_bytes<FORM>() / 16;
    const int s = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
    int chunk = -1;
    int32_t my_block = 0;
    auto load = [&](int j) {
        uint4 *st = sm + (j % ST) * STAGE16;
        if ((2 * j) / 32 != chunk) {
            chunk = (2 * j) / 32;
            const int i = 32 * chunk + lane;
            my_block = tab ? (i < c.nb ? tab[s * c.nb + i] : 0) : s * c.nb + i;
        }
        int32_t blocks[2];
        for (int b = 0; b < 2; b++)
            blocks[b] = __shfl_sync(0xffffffffu, my_block, (2 * j + b) & 31);
        if (FORM == ATTN_LOADER) {
            folio_bf16_bits *ks = (folio_bf16_bits *)st;
            attention_load_blocks<D, KT>(ks, ks + KT * tile_pitch<D>::value,
                                         (const folio_bf16_bits *)c.k, (const folio_bf16_bits *)c.v,
                                         blocks, h, KVH, j * KT, ctx, lane, 32);
        } else {
            for (int b = 0; b < 2; b++) {
                const int64_t off = ((int64_t)blocks[b] * KVH + h) * HEAD_BYTES;
                for (int q = lane; q < HEAD_BYTES / 16; q += 32) {
                    const int row = b * BLK + q / 8, col = q % 8;
                    if (FORM == PITCH || FORM == SWIZZLE) {
                        const int at = chunk_at<FORM>(row, col);
                        cp16(st + at, c.k + off + 16 * q);
                        cp16(st + KT * row_chunks<FORM>() + at, c.v + off + 16 * q);
                    } else if (FORM == ZFILL || FORM == ZFILL_WIDE) {
                        cp16_size(st + b * 128 + q, c.k + off + 16 * q, 16);
                        cp16_size(st + 256 + b * 128 + q, c.v + off + 16 * q, 16);
                    } else {
                        cp16(st + b * 128 + q, c.k + off + 16 * q);
                        cp16(st + 256 + b * 128 + q, c.v + off + 16 * q);
                    }
                }
            }
        }
    };
    /* READ: each tile read as decode_tile reads it (ldmatrix of K's rows,
     * ldmatrix.trans of V's, 16 a tile) from the form's rows. */
    auto use = [&](int stage) -> uint32_t {
        const uint4 *st = sm + stage * STAGE16;
        if (!READ) {
            const uint4 x = st[lane];
            return x.x ^ x.w;
        }
        auto at =
            [&](bool v, int row,
                int col) { /* K's chunk, or V's */
                           return (const folio_bf16_bits *)(st + (v ? KT * row_chunks<FORM>() : 0) +
                                                            chunk_at<FORM>(row, col));
            };
        uint32_t x = 0, r[4];
#pragma unroll
        for (int mt = 0; mt < KT / 16; mt++)
#pragma unroll
            for (int q = 0; q < D / 16; q++) {
                ldmatrix_x4(r, at(false, 16 * mt + (lane & 7) + ((lane >> 3) & 1) * 8,
                                  2 * q + (lane >> 4)));
                x ^= r[0] ^ r[1] ^ r[2] ^ r[3];
                ldmatrix_x4_trans(
                    r, at(true, 16 * mt + (lane >> 4) * 8 + (lane & 7), 2 * q + ((lane >> 3) & 1)));
                x ^= r[0] ^ r[1] ^ r[2] ^ r[3];
            }
        return x;
    };
    const uint32_t acc = copy_ring<ST, false>(c.tiles, load, use);
    if (acc == 0x12345678u)
        g_sink = acc;
}

/* warp1_kernel's launch: one one-warp CTA per (sequence, KV head). */
template <int ST, int FORM, bool READ = false>
static void warp1(const cache &c, const int32_t *tab, int ctx, int batch, cudaStream_t st)
{
    warp1_kernel<ST, FORM, READ>
        <<<dim3(batch, KVH), 32, ST * warp1_stage_bytes<FORM>(), st>>>(c, tab, ctx);
}

/* One CTA of 128 threads per sequence; a stage is two whole blocks (all four
 * heads): 16 KB of K, 16 KB of V. */
template <int ST> __global__ void seq4_kernel(cache c)
{
    extern __shared__ uint4 sm[];
    const int s = blockIdx.x, t = threadIdx.x;
    constexpr int BLOCK_BYTES = KVH * HEAD_BYTES; /* 8 KB */
    constexpr int STAGE16 = 4 * BLOCK_BYTES / 16;
    auto load = [&](int j) {
        uint4 *st = sm + (j % ST) * STAGE16;
        const int64_t off = (int64_t)(s * c.nb + 2 * j) * BLOCK_BYTES;
        for (int q = t; q < 2 * BLOCK_BYTES / 16; q += blockDim.x) {
            cp16(st + q, c.k + off + 16 * q);
            cp16(st + 2 * BLOCK_BYTES / 16 + q, c.v + off + 16 * q);
        }
    };
    auto use = [&](int stage) -> uint32_t {
        const uint4 x = sm[stage * STAGE16 + t];
        return x.x ^ x.w;
    };
    const uint32_t acc = copy_ring<ST, true>(c.tiles, load, use);
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

/* One bulk copy of `bytes` (a multiple of 16) from global memory into shared
 * memory, completing on bar. */
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                 "%2, [%3];\n" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}

/* The ring the bulk patterns run, by one warp: lane 0 issues item i's copies
 * (copy(i, stage, bar), after announcing `bytes` on the stage's barrier) ST
 * items ahead; every lane waits for an item, reads one 16-byte chunk of it
 * (nothing is dead), and the stage is refilled. */
template <int ST, class Copy>
__device__ __forceinline__ uint32_t bulk_ring(int items, uint32_t bytes, uint4 *sm, int stage16,
                                              const Copy &copy)
{
    __shared__ uint64_t bar[ST];
    const int lane = threadIdx.x;
    if (lane == 0) {
        for (int s = 0; s < ST; s++)
            mbar_init(&bar[s], 1);
        mbar_init_fence();
    }
    __syncwarp();
    auto issue = [&](int i) {
        if (lane == 0 && i < items) {
            mbar_arrive_expect_tx(&bar[i % ST], bytes);
            copy(i, sm + (i % ST) * stage16, &bar[i % ST]);
        }
    };
    for (int i = 0; i < ST; i++)
        issue(i);
    uint32_t acc = 0;
    for (int i = 0; i < items; i++) {
        mbar_wait(&bar[i % ST], (uint32_t)(i / ST) & 1);
        const uint4 x = sm[(i % ST) * stage16 + lane];
        acc ^= x.x ^ x.w;
        __syncwarp();
        /* the warp's reads of the stage before the copies that refill it */
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        issue(i + ST);
    }
    return acc;
}

/* warp1's tiles (blocks 2j and 2j + 1 of head h: K then V) by bulk copies. */
template <int ST> __global__ void warp1_bulk_kernel(cache c)
{
    extern __shared__ __align__(128) uint4 sm[];
    const int s = blockIdx.x, h = blockIdx.y;
    const uint32_t acc = bulk_ring<ST>(
        c.tiles, 4 * HEAD_BYTES, sm, 4 * HEAD_BYTES / 16, [&](int j, uint4 *st, uint64_t *bar) {
            for (int b = 0; b < 2; b++) {
                const int64_t off = ((int64_t)(s * c.nb + 2 * j + b) * KVH + h) * HEAD_BYTES;
                bulk_copy(st + b * 128, c.k + off, HEAD_BYTES, bar);
                bulk_copy(st + 256 + b * 128, c.v + off, HEAD_BYTES, bar);
            }
        });
    if (acc == 0x12345678u)
        g_sink = acc;
}

/* Every sequence's ctx / 16 blocks (8 KB of K, 8 KB of V: all four heads),
 * item i to CTA i % gridDim.x, through a ring of RING_ST 16 KB stages. */
enum { RING_ST = 12 };
__global__ void ring_bulk_kernel(cache c, int batch, int blocks_per_seq)
{
    extern __shared__ __align__(128) uint4 sm[];
    constexpr int BLOCK_BYTES = KVH * HEAD_BYTES;
    const int total = batch * blocks_per_seq;
    const int mine = total > (int)blockIdx.x ? (total - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
    const uint32_t acc = bulk_ring<RING_ST>(
        mine, 2 * BLOCK_BYTES, sm, 2 * BLOCK_BYTES / 16, [&](int i, uint4 *st, uint64_t *bar) {
            const int item = blockIdx.x + i * gridDim.x;
            const int s = item / blocks_per_seq, b = item % blocks_per_seq;
            const int64_t off = (int64_t)(s * c.nb + b) * BLOCK_BYTES;
            bulk_copy(st, c.k + off, BLOCK_BYTES, bar);
            bulk_copy(st + BLOCK_BYTES / 16, c.v + off, BLOCK_BYTES, bar);
        });
    if (acc == 0x12345678u)
        g_sink = acc;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Whether pattern `name` is in the comma-separated list (NULL: every one). */
static bool selected(const char *list, const char *name)
{
    if (!list || !*list)
        return true;
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n))
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

static void sort_floats(float *t, int n) /* insertion sort, for medians */
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            float x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
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

    /* Block tables: consecutive (as decode_bench's steps) and scattered (as
     * its attention mode: block i of the copy at (i * 7919) % blocks). */
    const int nblocks = batch * nb;
    int32_t *h_tab = (int32_t *)malloc(sizeof(int32_t) * 2 * nblocks);
    for (int i = 0; i < nblocks; i++) {
        h_tab[i] = i;
        h_tab[nblocks + i] = (int32_t)(((int64_t)i * 7919) % nblocks);
    }
    int32_t *tab;
    CK(cudaMalloc(&tab, sizeof(int32_t) * 2 * nblocks));
    CK(cudaMemcpy(tab, h_tab, sizeof(int32_t) * 2 * nblocks, cudaMemcpyHostToDevice));

    /* Folio's decode attention on the same cache: 32 query heads over 4,
     * q from a qkv buffer, every sequence at position ctx - 1 (ctx keys, as
     * the patterns read) or ctx (one more key: a decode step's new token). */
    enum { H = 32 };
    folio_bf16_bits *qkv, *out;
    CK(cudaMalloc(&qkv, sizeof(folio_bf16_bits) * batch * (H + 2 * KVH) * D));
    CK(cudaMemset(qkv, 0x3c, sizeof(folio_bf16_bits) * batch * (H + 2 * KVH) * D));
    CK(cudaMalloc(&out, sizeof(folio_bf16_bits) * batch * H * D));
    int32_t *h_meta = (int32_t *)malloc(sizeof(int32_t) * 6 * batch);
    for (int i = 0; i < batch; i++) {
        h_meta[i] = i;                   /* token_seq */
        h_meta[batch + i] = ctx - 1;     /* token_pos */
        h_meta[2 * batch + i] = ctx;     /* seq_ctx_len */
        h_meta[3 * batch + i] = ctx;     /* token_pos, one key more */
        h_meta[4 * batch + i] = ctx + 1; /* seq_ctx_len, one key more */
    }
    int32_t *meta;
    CK(cudaMalloc(&meta, sizeof(int32_t) * 6 * batch));
    CK(cudaMemcpy(meta, h_meta, sizeof(int32_t) * 6 * batch, cudaMemcpyHostToDevice));
    int bucket = 1;
    while (bucket < batch)
        bucket <<= 1;
    const struct folio_k_decode_plan plan =
        folio_k_attention_decode_plan(bucket, KVH, D, sms, FOLIO_K_ATTN_WARPS_PER_SM, 0, 0);
    const size_t ws_bytes = folio_k_attention_decode_workspace_bytes(batch, plan, H, D);
    void *ws = NULL;
    int *counters;
    if (ws_bytes)
        CK(cudaMalloc(&ws, ws_bytes));
    CK(cudaMalloc(&counters, sizeof(int) * batch * KVH));
    CK(cudaMemset(counters, 0, sizeof(int) * batch * KVH));
    /* The b256 step's form (the cuBLASLt path): RoPE and the norm's 1 / rms
     * in attention, which reads the residual rows (hidden 2048) for it. */
    uint32_t *rope;
    CK(cudaMalloc(&rope, sizeof(uint32_t) * (ctx + 2) * (D / 2)));
    CK(cudaMemset(rope, 0x3c, sizeof(uint32_t) * (ctx + 2) * (D / 2)));
    folio_bf16_bits *residual;
    CK(cudaMalloc(&residual, sizeof(folio_bf16_bits) * batch * 2048));
    CK(cudaMemset(residual, 0x3c, sizeof(folio_bf16_bits) * batch * 2048));
    const struct folio_k_row_norm norm = {residual, 2048, 1e-5f};
    folio_k_set_smem_carveout(100); /* as the backend */
    CK(folio_k_attention_prepare(D));
    printf("PLAN warps=%d splits=%d\n", plan.warps, plan.splits);

    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const char *names[] = {"flat",
                           "warp1_st2",
                           "warp1_st3",
                           "warp1_st4",
                           "seq4_st2",
                           "seq4_st3",
                           "seq4_st4",
                           "warp1_ldg",
                           "warp1_tab",
                           "warp1_tab_scat",
                           "folio",
                           "folio_scat",
                           "folio_key1",
                           "folio_rope_norm_key1",
                           "warp1_attnload",
                           "warp1_zfill",
                           "warp1_pitch",
                           "warp1_swizzle",
                           "warp1_zfill_wide",
                           "warp1_pitch_read",
                           "warp1_swizzle_read",
                           "warp1_bulk_st2",
                           "warp1_bulk_st4",
                           "ring_bulk_all",
                           "ring_bulk_half",
                           "ring_bulk_quarter"};
    const int n_patterns = (int)(sizeof names / sizeof names[0]);
    CK(cudaFuncSetAttribute(seq4_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            4 * 4 * KVH * HEAD_BYTES));
    CK(cudaFuncSetAttribute(seq4_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            3 * 4 * KVH * HEAD_BYTES));
    CK(cudaFuncSetAttribute(seq4_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            2 * 4 * KVH * HEAD_BYTES));
    CK(cudaFuncSetAttribute(warp1_bulk_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            2 * 4 * HEAD_BYTES));
    CK(cudaFuncSetAttribute(warp1_bulk_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            4 * 4 * HEAD_BYTES));
    CK(cudaFuncSetAttribute(ring_bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            RING_ST * 2 * KVH * HEAD_BYTES));
    /* Pattern p on copy cpy of the cache, on stream st. */
    auto launch = [&](int p, int cpy, cudaStream_t st) -> cudaError_t {
        cache c = {pool + 2 * arr * cpy, pool + 2 * arr * cpy + arr, nb, ctx / KT};
        folio_bf16_bits *kc = (folio_bf16_bits *)c.k, *vc = (folio_bf16_bits *)c.v;
        struct folio_k_batch kb = {batch, batch, meta, meta + batch, meta + 2 * batch, tab, nb};
        switch (p) {
        case 0:
            flat_kernel<<<sms * 4, 512, 0, st>>>((const uint4 *)c.k, (const uint4 *)c.v,
                                                 (int64_t)batch * (ctx / BLK) * KVH * HEAD_BYTES /
                                                     16 * 2);
            break;
        case 1:
            warp1<2, PLAIN>(c, NULL, ctx, batch, st);
            break;
        case 2:
            warp1<3, PLAIN>(c, NULL, ctx, batch, st);
            break;
        case 3:
            warp1<4, PLAIN>(c, NULL, ctx, batch, st);
            break;
        case 4:
            seq4_kernel<2><<<batch, 128, 2 * 4 * KVH * HEAD_BYTES, st>>>(c);
            break;
        case 5:
            seq4_kernel<3><<<batch, 128, 3 * 4 * KVH * HEAD_BYTES, st>>>(c);
            break;
        case 6:
            seq4_kernel<4><<<batch, 128, 4 * 4 * KVH * HEAD_BYTES, st>>>(c);
            break;
        case 7:
            warp1_ldg_kernel<<<dim3(batch, KVH), 32, 0, st>>>(c);
            break;
        case 8:
            warp1<2, PLAIN>(c, tab, ctx, batch, st);
            break;
        case 9:
            warp1<2, PLAIN>(c, tab + nblocks, ctx, batch, st);
            break;
        case 10:
        case 11:
        case 12:
        case 13:
            if (p == 11)
                kb.block_tables = tab + nblocks;
            if (p >= 12) {
                kb.token_pos = meta + 3 * batch;
                kb.seq_ctx_len = meta + 4 * batch;
            }
            CK(folio_k_attention_decode(out, qkv, kc, vc, kb, plan, ws, counters, H, KVH, D,
                                        p == 13 ? rope : NULL, p == 13 ? norm : folio_k_row_norm{},
                                        folio_k_l2_drop{}, 0, st));
            break;
        case 14:
            warp1<2, ATTN_LOADER>(c, tab, ctx, batch, st);
            break;
        case 15:
            warp1<2, ZFILL>(c, tab, ctx, batch, st);
            break;
        case 16:
            warp1<2, PITCH>(c, tab, ctx, batch, st);
            break;
        case 17:
            warp1<2, SWIZZLE>(c, tab, ctx, batch, st);
            break;
        case 18:
            warp1<2, ZFILL_WIDE>(c, tab, ctx, batch, st);
            break;
        case 19:
            warp1<2, PITCH, true>(c, tab, ctx, batch, st);
            break;
        case 20:
            warp1<2, SWIZZLE, true>(c, tab, ctx, batch, st);
            break;
        case 21:
            warp1_bulk_kernel<2><<<dim3(batch, KVH), 32, 2 * 4 * HEAD_BYTES, st>>>(c);
            break;
        case 22:
            warp1_bulk_kernel<4><<<dim3(batch, KVH), 32, 4 * 4 * HEAD_BYTES, st>>>(c);
            break;
        case 23:
        case 24:
        case 25:
            ring_bulk_kernel<<<p == 23   ? sms
                               : p == 24 ? sms / 2
                                         : sms / 4,
                               32, RING_ST * 2 * KVH * HEAD_BYTES, st>>>(c, batch, ctx / BLK);
            break;
        }
        return cudaGetLastError();
    };
    cudaStream_t gs;
    CK(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking));
    const char *only = getenv("KV_PROBE_PATTERNS");
    const double loop_s = getenv("KV_PROBE_LOOP_S") ? atof(getenv("KV_PROBE_LOOP_S")) : 0.0;
    for (int p = 0; p < n_patterns; p++) {
        if (!selected(only, names[p]))
            continue;
        float t[REPS];
        for (int r = -3; r < REPS; r++) {
            CK(cudaEventRecord(e0));
            CK(launch(p, (r + 3 + p) % COPIES, 0));
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            if (r >= 0)
                CK(cudaEventElapsedTime(&t[r], e0, e1));
        }
        sort_floats(t, REPS);
        const double us = t[REPS / 2] * 1e3;
        /* The same launches as a chain: a CUDA graph of one launch a copy,
         * as a step's kernels follow each other; median replay / COPIES. */
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(gs, cudaStreamCaptureModeThreadLocal));
        for (int cpy = 0; cpy < COPIES; cpy++)
            CK(launch(p, cpy, gs));
        CK(cudaStreamEndCapture(gs, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        float tc[REPS];
        for (int r = -2; r < REPS; r++) {
            CK(cudaEventRecord(e0, gs));
            CK(cudaGraphLaunch(ge, gs));
            CK(cudaEventRecord(e1, gs));
            CK(cudaEventSynchronize(e1));
            if (r >= 0)
                CK(cudaEventElapsedTime(&tc[r], e0, e1));
        }
        if (loop_s > 0) { /* chains of 8 launches, queued 16 at a time */
            const double start = now_s();
            long chains = 0;
            while (now_s() - start < loop_s) {
                for (int r = 0; r < 16; r++)
                    CK(cudaGraphLaunch(ge, gs));
                chains += 16;
                CK(cudaStreamSynchronize(gs));
            }
            const double end = now_s();
            printf("LOOP pattern=%s launches=%ld seconds=%.3f us=%.3f start=%.3f end=%.3f\n",
                   names[p], chains * COPIES, end - start, (end - start) * 1e6 / (chains * COPIES),
                   start, end);
        }
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
        sort_floats(tc, REPS);
        const double chain_us = tc[REPS / 2] * 1e3 / COPIES;
        printf("RESULT pattern=%s batch=%d ctx=%d us=%.2f tbps=%.3f min_us=%.2f chain_us=%.2f "
               "chain_tbps=%.3f\n",
               names[p], batch, ctx, us, bytes / us * 1e-6, t[0] * 1e3, chain_us,
               bytes / chain_us * 1e-6);
    }
    CK(cudaFree(pool));
    free(h_tab);
    free(h_meta);
    return 0;
}
