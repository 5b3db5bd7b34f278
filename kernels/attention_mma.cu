/* Paged attention on the tensor cores (mma.sync m16n8k16, bf16 in, f32
 * accumulate), FlashAttention-2 style: online softmax in f32 per query row,
 * K/V tiles staged in shared memory by cp.async (double-buffered) and read
 * into fragments with ldmatrix (.trans for V). Works on sm_80 and later, so
 * the portable PTX path keeps it.
 *
 * Query rows: a warp owns 16 rows of the product, each row one (query token,
 * query head) pair of one KV head, so the heads that share a KV head (GQA)
 * share every K/V load. Two launch shapes use the same tile code:
 *
 *   prefill/mixed (8 warps, grid = query tiles x KV heads): a tile is up to
 *     128 / group consecutive new tokens of one sequence (host-made list);
 *     row r is token r / group, head r % group; the CTA streams the keys
 *     0..pos(last token) once for the whole tile, causal mask per row.
 *
 *   decode (1 warp, grid = tokens x KV heads x splits): rows are the group's
 *     heads of one token; split s takes one chunk of its context (split-KV),
 *     so batch 1 still fills the chip. With several splits each CTA writes an
 *     unnormalized f32 partial (O, running max, sum) and combine_kernel merges
 *     them; with one split the CTA writes the bf16 output itself.
 *
 * Keys past the context are zero-filled in shared memory (a stale cache slot
 * may hold a NaN bit pattern, and 0 * NaN would leak into the output). */
#include "mma_helpers.cuh"

#define NEG_INF (-INFINITY)

/* Shared-memory row pitch of a K/V tile: 16 bytes of padding keep the eight
 * rows of each ldmatrix 8x8 block in different banks. */
template <int D> struct tile_pitch {
    static constexpr int value = D + 8;
};

template <int D, int NW, int KT> constexpr size_t attention_smem_bytes()
{
    return sizeof(folio_bf16_bits) * 2 /* stages */ * 2 /* K, V */ * KT * tile_pitch<D>::value;
}

/* One CTA's work: rows (token, head) of one sequence and KV head, keys
 * [k_begin, k_end). DECODE: one token, rows = heads; writes a partial when
 * splits > 1. */
template <int D, int NW, int KT, bool DECODE>
__global__ void __launch_bounds__(NW * 32)
    attention_mma_kernel(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                         const folio_bf16_bits *k_cache, const folio_bf16_bits *v_cache,
                         struct folio_k_batch b, const int32_t *tiles, int num_heads,
                         int num_kv_heads, float *part_o, float2 *part_ml)
{
    constexpr int LD = tile_pitch<D>::value;
    constexpr int NT = KT / 8;    /* n-tiles of keys per K tile */
    constexpr int DT = D / 8;     /* n-tiles of output dims */
    constexpr int KS = D / 16;    /* k-steps over head dims */
    constexpr int CHUNKS = D / 8; /* 16-byte chunks per K/V row */
    extern __shared__ __align__(16) folio_bf16_bits smem_kv[];

    if (DECODE) { /* launched with PDL in decode steps (the prefill kernel never is) */
        pdl_trigger();
        pdl_wait();
    }
    const int group = num_heads / num_kv_heads;
    const int kvh = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tq = lane & 3;
    const int qkv_stride = (num_heads + 2 * num_kv_heads) * D;

    int t0, n_tok, k_begin, k_end, split = 0, splits = 1;
    if (DECODE) {
        t0 = blockIdx.x;
        n_tok = 1;
        split = blockIdx.z;
        splits = gridDim.z;
        int n_keys = b.token_pos[t0] + 1; /* 0 for a padding row */
        int per = (n_keys + splits - 1) / splits;
        per = (per + KT - 1) / KT * KT;
        k_begin = min(split * per, n_keys);
        k_end = min(k_begin + per, n_keys);
    } else {
        t0 = tiles[2 * blockIdx.x];
        n_tok = tiles[2 * blockIdx.x + 1];
        k_begin = 0;
        k_end = b.token_pos[t0 + n_tok - 1] + 1;
    }
    const int seq = b.token_seq[t0];
    const int32_t *table = b.block_tables + (int64_t)seq * b.block_stride;

    /* This lane's two rows: g and g + 8 of the warp's 16. */
    int row_pos[2], row_tok[2], row_head[2];
    bool row_live[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int r = warp * 16 + g + 8 * i;
        int tok = r / group, hl = r - tok * group;
        row_live[i] = tok < n_tok;
        row_tok[i] = t0 + (row_live[i] ? tok : 0);
        row_head[i] = kvh * group + hl;
        row_pos[i] = row_live[i] ? b.token_pos[row_tok[i]] : -1;
    }
    int warp_max_pos = max(row_pos[0], row_pos[1]);
    warp_max_pos = max(warp_max_pos, __shfl_xor_sync(0xffffffffu, warp_max_pos, 4));
    warp_max_pos = max(warp_max_pos, __shfl_xor_sync(0xffffffffu, warp_max_pos, 8));
    warp_max_pos = max(warp_max_pos, __shfl_xor_sync(0xffffffffu, warp_max_pos, 16));

    /* Q fragments (A operand, row-major 16 x D), straight from global. */
    uint32_t qa[KS][4];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const uint32_t *q =
            (const uint32_t *)(qkv + (int64_t)row_tok[i] * qkv_stride + (int64_t)row_head[i] * D);
#pragma unroll
        for (int s = 0; s < KS; s++) {
            qa[s][i] = row_live[i] ? q[(16 * s + 2 * tq) / 2] : 0u;
            qa[s][i + 2] = row_live[i] ? q[(16 * s + 8 + 2 * tq) / 2] : 0u;
        }
    }

    float o[DT][4];
#pragma unroll
    for (int n = 0; n < DT; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
    const float scale_log2 = rsqrtf((float)D) * 1.4426950408889634f;

    const int64_t head_stride = (int64_t)FOLIO_K_BLOCK * D;
    auto load_tile = [&](int kbase, int stage) {
        folio_bf16_bits *ks = smem_kv + (size_t)stage * 2 * KT * LD;
        folio_bf16_bits *vs = ks + KT * LD;
        for (int e = threadIdx.x; e < KT * CHUNKS; e += NW * 32) {
            int j = e / CHUNKS, c = e - j * CHUNKS;
            int key = kbase + j;
            const folio_bf16_bits *ksrc = k_cache, *vsrc = v_cache;
            int bytes = 0;
            if (key < k_end) {
                int blk = table[key / FOLIO_K_BLOCK];
                int64_t off = ((int64_t)blk * num_kv_heads + kvh) * head_stride +
                              (int64_t)(key % FOLIO_K_BLOCK) * D + c * 8;
                ksrc = k_cache + off;
                vsrc = v_cache + off;
                bytes = 16;
            }
            cp_async_16(ks + j * LD + c * 8, ksrc, bytes);
            cp_async_16(vs + j * LD + c * 8, vsrc, bytes);
        }
    };

    const int n_tiles = k_end > k_begin ? (k_end - k_begin + KT - 1) / KT : 0;
    if (n_tiles > 0)
        load_tile(k_begin, 0);
    cp_async_commit();
    for (int it = 0; it < n_tiles; it++) {
        const int kbase = k_begin + it * KT;
        if (it + 1 < n_tiles) {
            load_tile(kbase + KT, (it + 1) & 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        /* A warp whose rows all sit before this tile (causal) skips it. */
        if (kbase <= warp_max_pos) {
            const folio_bf16_bits *ks = smem_kv + (size_t)(it & 1) * 2 * KT * LD;
            const folio_bf16_bits *vs = ks + KT * LD;

            /* S = Q K^T: B operand is K^T, i.e. K rows, non-transposed ldmatrix. */
            float sc[NT][4];
#pragma unroll
            for (int j = 0; j < NT; j++)
                sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll
            for (int s = 0; s < KS; s++) {
#pragma unroll
                for (int jp = 0; jp < NT / 2; jp++) {
                    uint32_t kb[4];
                    ldmatrix_x4(kb, ks + (jp * 16 + (lane >> 4) * 8 + (lane & 7)) * LD + s * 16 +
                                        ((lane >> 3) & 1) * 8);
                    mma_16816(sc[2 * jp], qa[s], kb[0], kb[1]);
                    mma_16816(sc[2 * jp + 1], qa[s], kb[2], kb[3]);
                }
            }

            /* Mask, online softmax (log2 domain), P in bf16 for the PV product. */
            float tile_max[2] = {NEG_INF, NEG_INF};
#pragma unroll
            for (int j = 0; j < NT; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int i = e >> 1;
                    int key = kbase + 8 * j + 2 * tq + (e & 1);
                    bool ok = key < k_end && key <= row_pos[i];
                    sc[j][e] = ok ? sc[j][e] * scale_log2 : NEG_INF;
                    tile_max[i] = fmaxf(tile_max[i], sc[j][e]);
                }
            }
            float alpha[2], m_use[2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
                tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
                float m_new = fmaxf(m[i], tile_max[i]);
                m_use[i] = m_new == NEG_INF ? 0.0f : m_new; /* no -inf - -inf */
                alpha[i] = exp2f(m[i] - m_use[i]);
                m[i] = m_new;
                l[i] *= alpha[i];
            }
#pragma unroll
            for (int n = 0; n < DT; n++) {
                o[n][0] *= alpha[0];
                o[n][1] *= alpha[0];
                o[n][2] *= alpha[1];
                o[n][3] *= alpha[1];
            }
#pragma unroll
            for (int j = 0; j < NT; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float p = exp2f(sc[j][e] - m_use[e >> 1]);
                    sc[j][e] = p;
                    l[e >> 1] += p;
                }
            }

            /* O += P V: P's C fragments are the A fragments; V via ldmatrix.trans. */
#pragma unroll
            for (int kk = 0; kk < KT / 16; kk++) {
                uint32_t pa[4] = {pack_bf16x2(sc[2 * kk][0], sc[2 * kk][1]),
                                  pack_bf16x2(sc[2 * kk][2], sc[2 * kk][3]),
                                  pack_bf16x2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                                  pack_bf16x2(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
                for (int np = 0; np < DT / 2; np++) {
                    uint32_t vb[4];
                    ldmatrix_x4_trans(vb, vs + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD +
                                              np * 16 + (lane >> 4) * 8);
                    mma_16816(o[2 * np], pa, vb[0], vb[1]);
                    mma_16816(o[2 * np + 1], pa, vb[2], vb[3]);
                }
            }
        }
        __syncthreads(); /* this stage is free for the load two tiles ahead */
    }

    /* Row sums live spread over the quad's four lanes. */
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if (!row_live[i])
            continue;
        int64_t row = (int64_t)row_tok[i] * num_heads + row_head[i];
        if (splits == 1) {
            float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f; /* no key (padding row): zeros */
            uint32_t *dst = (uint32_t *)(out + row * D);
#pragma unroll
            for (int n = 0; n < DT; n++)
                dst[(8 * n + 2 * tq) / 2] = pack_bf16x2(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
        } else {
            float *dst = part_o + (row * splits + split) * D;
#pragma unroll
            for (int n = 0; n < DT; n++)
                *(float2 *)(dst + 8 * n + 2 * tq) = make_float2(o[n][2 * i], o[n][2 * i + 1]);
            if (tq == 0)
                part_ml[row * splits + split] = make_float2(m[i], l[i]);
        }
    }
}

/* Merges the splits of one (token, head): weights 2^(m_s - M), divides by the
 * merged sum; a row no split saw (padding) gets zeros. One thread per dim. */
/* One CTA of D threads per (token, head) row: warp 0 turns the splits' (max,
 * sum) into weights (splits <= 32, one per lane), then each thread sums its
 * output dimension over the splits with independent loads (a serial loop of
 * dependent loads took ~5 us at 32 splits). */
template <int D>
__global__ void combine_kernel(folio_bf16_bits *out, const float *part_o, const float2 *part_ml,
                               int splits)
{
    __shared__ float w_s[32];
    __shared__ float sum_s;
    pdl_trigger();
    pdl_wait();
    int64_t row = blockIdx.x;
    int d = threadIdx.x;
    if (threadIdx.x < 32) {
        float2 ml =
            threadIdx.x < splits ? part_ml[row * splits + threadIdx.x] : make_float2(NEG_INF, 0.0f);
        float mmax = warp_max(ml.x);
        float w = mmax == NEG_INF || ml.x == NEG_INF ? 0.0f : exp2f(ml.x - mmax);
        float sum = warp_sum(w * ml.y);
        w_s[threadIdx.x] = w;
        if (threadIdx.x == 0)
            sum_s = sum;
    }
    __syncthreads();
    float acc = 0.0f;
    const float *po = part_o + row * splits * D + d;
#pragma unroll 8
    for (int s = 0; s < splits; s++)
        acc += w_s[s] * po[(int64_t)s * D];
    float sum = sum_s;
    out[row * D + d] = f32_to_bf16(sum > 0.0f ? acc / sum : 0.0f);
}

#define PREFILL_WARPS 8
#define PREFILL_KT 64
#define DECODE_WARPS 1
#define DECODE_KT 32
#define MAX_SPLITS 32

static bool mma_shape_ok(int num_heads, int num_kv_heads, int head_dim)
{
    if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0)
        return false;
    int group = num_heads / num_kv_heads;
    return (head_dim == 64 || head_dim == 128) && group <= 16 && (group & (group - 1)) == 0;
}

extern "C" int folio_k_attention_tile_tokens(int num_heads, int num_kv_heads, int head_dim)
{
    if (!mma_shape_ok(num_heads, num_kv_heads, head_dim))
        return 0;
    return PREFILL_WARPS * 16 / (num_heads / num_kv_heads);
}

extern "C" int folio_k_attention_decode_splits(int num_tokens, int num_kv_heads, int target_ctas)
{
    int ctas = num_tokens * num_kv_heads;
    if (ctas <= 0)
        return 1;
    int s = (target_ctas + ctas - 1) / ctas;
    return s < 1 ? 1 : s > MAX_SPLITS ? MAX_SPLITS : s;
}

extern "C" size_t folio_k_attention_workspace_bytes(int num_tokens, int splits, int num_heads,
                                                    int head_dim)
{
    if (splits <= 1)
        return 0;
    size_t rows = (size_t)num_tokens * num_heads * splits;
    return rows * (sizeof(float) * head_dim + sizeof(float2));
}

template <int D> static cudaError_t prepare_d()
{
    cudaError_t e = cudaFuncSetAttribute(attention_mma_kernel<D, PREFILL_WARPS, PREFILL_KT, false>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)attention_smem_bytes<D, PREFILL_WARPS, PREFILL_KT>());
    if (e != cudaSuccess)
        return e;
    return cudaFuncSetAttribute(attention_mma_kernel<D, DECODE_WARPS, DECODE_KT, true>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)attention_smem_bytes<D, DECODE_WARPS, DECODE_KT>());
}

extern "C" cudaError_t folio_k_attention_prepare(int head_dim)
{
    if (head_dim == 64)
        return prepare_d<64>();
    if (head_dim == 128)
        return prepare_d<128>();
    return cudaErrorInvalidValue;
}

template <int D>
static cudaError_t prefill_d(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                             const folio_bf16_bits *k_cache, const folio_bf16_bits *v_cache,
                             struct folio_k_batch b, const int32_t *tiles, int num_tiles,
                             int num_heads, int num_kv_heads, cudaStream_t s)
{
    dim3 grid(num_tiles, num_kv_heads);
    attention_mma_kernel<D, PREFILL_WARPS, PREFILL_KT, false>
        <<<grid, PREFILL_WARPS * 32, attention_smem_bytes<D, PREFILL_WARPS, PREFILL_KT>(), s>>>(
            out, qkv, k_cache, v_cache, b, tiles, num_heads, num_kv_heads, NULL, NULL);
    return cudaGetLastError();
}

extern "C" cudaError_t folio_k_attention_prefill(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                                 const folio_bf16_bits *k_cache,
                                                 const folio_bf16_bits *v_cache,
                                                 struct folio_k_batch b, const int32_t *tiles,
                                                 int num_tiles, int num_heads, int num_kv_heads,
                                                 int head_dim, cudaStream_t s)
{
    if (num_tiles <= 0)
        return cudaSuccess;
    if (!mma_shape_ok(num_heads, num_kv_heads, head_dim))
        return cudaErrorInvalidValue;
    if (head_dim == 64)
        return prefill_d<64>(out, qkv, k_cache, v_cache, b, tiles, num_tiles, num_heads,
                             num_kv_heads, s);
    return prefill_d<128>(out, qkv, k_cache, v_cache, b, tiles, num_tiles, num_heads, num_kv_heads,
                          s);
}

template <int D>
static cudaError_t decode_d(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                            const folio_bf16_bits *k_cache, const folio_bf16_bits *v_cache,
                            struct folio_k_batch b, int splits, void *workspace, int num_heads,
                            int num_kv_heads, bool pdl, cudaStream_t s)
{
    float *part_o = (float *)workspace;
    float2 *part_ml =
        (float2 *)(part_o + (size_t)b.num_tokens * num_heads * (splits > 1 ? splits : 0) * D);
    dim3 grid(b.num_tokens, num_kv_heads, splits);
    const int32_t *no_tiles = NULL;
    cudaError_t e = launch_pdl(
        attention_mma_kernel<D, DECODE_WARPS, DECODE_KT, true>, grid, dim3(DECODE_WARPS * 32),
        attention_smem_bytes<D, DECODE_WARPS, DECODE_KT>(), s, pdl, out, qkv, k_cache, v_cache, b,
        no_tiles, num_heads, num_kv_heads, part_o, part_ml);
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e != cudaSuccess || splits == 1)
        return e;
    e = launch_pdl(combine_kernel<D>, dim3(b.num_tokens * num_heads), dim3(D), 0, s, pdl, out,
                   (const float *)part_o, (const float2 *)part_ml, splits);
    return e != cudaSuccess ? e : cudaGetLastError();
}

extern "C" cudaError_t folio_k_attention_decode(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                                const folio_bf16_bits *k_cache,
                                                const folio_bf16_bits *v_cache,
                                                struct folio_k_batch b, int splits, void *workspace,
                                                int num_heads, int num_kv_heads, int head_dim,
                                                int pdl, cudaStream_t s)
{
    if (b.num_tokens <= 0)
        return cudaSuccess;
    if (!mma_shape_ok(num_heads, num_kv_heads, head_dim) || splits < 1 || splits > MAX_SPLITS ||
        (splits > 1 && !workspace))
        return cudaErrorInvalidValue;
    if (head_dim == 64)
        return decode_d<64>(out, qkv, k_cache, v_cache, b, splits, workspace, num_heads,
                            num_kv_heads, pdl != 0, s);
    return decode_d<128>(out, qkv, k_cache, v_cache, b, splits, workspace, num_heads, num_kv_heads,
                         pdl != 0, s);
}
