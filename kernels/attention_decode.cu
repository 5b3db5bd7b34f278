/* Decode attention in one launch per layer: RoPE of the new token's q and k,
 * its K/V cache write, split-KV attention on the tensor cores and the merge
 * of the splits, where the unfused path takes three or four launches (rope_kv
 * write, split kernel, combine). At small batch those launches, not bytes,
 * were the time (bench/results/2026-11-29-cuda-attention-gemv.md).
 *
 * Grid: (token, KV head, split); a CTA of DEC_WARPS warps. The rows of every
 * warp are the group's query heads of the token (mma.sync m16n8k16 rows, as
 * attention_mma.cu lays them out); the warps split the CTA's key range among
 * themselves, each with its own cp.async pipeline of DEC_STAGES tiles, and
 * merge through shared memory. With several splits each CTA writes an f32
 * partial and the last CTA of the (token, KV head) to finish, found by an
 * atomic counter, merges them in split order (so the result does not depend
 * on which CTA came last) and resets the counter for the next launch.
 *
 * The new key is position pos = context - 1, the last key: the warp whose
 * range holds it writes its rotated k and its v into the cache and into its
 * shared tile itself instead of reading them back. q and k are rotated and
 * rounded exactly as rope_kv.cu does. Splits beyond what the context needs
 * (DEC_WARPS * DEC_KT keys per split at least) leave at once. */
#include "mma_helpers.cuh"

#define DEC_WARPS 4
#define DEC_KT 16
#define DEC_STAGES 3
#define DEC_MAX_SPLITS 32
#define NEG_INF (-INFINITY)

template <int D> struct dec_pitch {
    static constexpr int value = D + 8; /* 16 bytes of padding: conflict-free ldmatrix */
};

template <int D> constexpr size_t dec_smem_bytes()
{
    return sizeof(folio_bf16_bits) * DEC_WARPS * DEC_STAGES * 2 * DEC_KT * dec_pitch<D>::value;
}

__device__ __forceinline__ float rope_lo(float x1, float x2, float c, float s)
{
    return round_bf16(round_bf16(x1 * c) + round_bf16(-x2 * s));
}

__device__ __forceinline__ float rope_hi(float x1, float x2, float c, float s)
{
    return round_bf16(round_bf16(x2 * c) + round_bf16(x1 * s));
}

/* Rotates the bf16 pair (x1 in lo/hi halves of a, x2 likewise in b) for dims i, i + 1. */
__device__ __forceinline__ void rope_pack(uint32_t &a, uint32_t &b, int i, int pos,
                                          const float *inv_freq)
{
    float c0 = round_bf16(cosf((float)pos * inv_freq[i])),
          s0 = round_bf16(sinf((float)pos * inv_freq[i]));
    float c1 = round_bf16(cosf((float)pos * inv_freq[i + 1])),
          s1 = round_bf16(sinf((float)pos * inv_freq[i + 1]));
    float a0 = __uint_as_float(a << 16), a1 = __uint_as_float(a & 0xffff0000u);
    float b0 = __uint_as_float(b << 16), b1 = __uint_as_float(b & 0xffff0000u);
    float na0 = rope_lo(a0, b0, c0, s0), nb0 = rope_hi(a0, b0, c0, s0);
    float na1 = rope_lo(a1, b1, c1, s1), nb1 = rope_hi(a1, b1, c1, s1);
    a = (uint32_t)f32_to_bf16(na0) | ((uint32_t)f32_to_bf16(na1) << 16);
    b = (uint32_t)f32_to_bf16(nb0) | ((uint32_t)f32_to_bf16(nb1) << 16);
}

template <int D>
__global__ void __launch_bounds__(DEC_WARPS * 32)
    attention_decode_kernel(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                            folio_bf16_bits *k_cache, folio_bf16_bits *v_cache,
                            const float *inv_freq, struct folio_k_batch b, int num_heads,
                            int num_kv_heads, float *part_o, float2 *part_ml, int *counters)
{
    constexpr int LD = dec_pitch<D>::value;
    constexpr int KT = DEC_KT;
    constexpr int NT = KT / 8;
    constexpr int DT = D / 8;
    constexpr int KS = D / 16;
    constexpr int CHUNKS = D / 8;
    constexpr int HALF = D / 2;
    extern __shared__ __align__(16) folio_bf16_bits smem_kv[];
    __shared__ int last_flag;

    const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
    const int group = num_heads / num_kv_heads;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tq = lane & 3;
    const int qkv_stride = (num_heads + 2 * num_kv_heads) * D;

    const int pos = b.token_pos[t];
    const int n_keys = pos + 1; /* 0 for a padding row */
    int eff = (n_keys + DEC_WARPS * KT - 1) / (DEC_WARPS * KT);
    eff = eff < 1 ? 1 : eff > splits ? splits : eff;
    if (split >= eff)
        return;
    int per = (n_keys + eff - 1) / eff;
    per = (per + KT - 1) / KT * KT;
    const int k_begin = min(split * per, n_keys), k_end = min(k_begin + per, n_keys);
    int wper = (k_end - k_begin + DEC_WARPS - 1) / DEC_WARPS;
    wper = (wper + KT - 1) / KT * KT;
    const int w_begin = min(k_begin + warp * wper, k_end), w_end = min(w_begin + wper, k_end);

    const int seq = pos >= 0 ? b.token_seq[t] : 0;
    const int32_t *table = b.block_tables + (int64_t)seq * b.block_stride;
    const folio_bf16_bits *row = qkv + (int64_t)t * qkv_stride;

    float o[DT][4];
#pragma unroll
    for (int n = 0; n < DT; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
    const float scale_log2 = rsqrtf((float)D) * 1.4426950408889634f;
    const int64_t head_stride = (int64_t)FOLIO_K_BLOCK * D;
    folio_bf16_bits *wsm = smem_kv + (size_t)warp * DEC_STAGES * 2 * KT * LD;

    auto load_tile = [&](int kbase, int stage) {
        folio_bf16_bits *ks = wsm + (size_t)stage * 2 * KT * LD;
        folio_bf16_bits *vs = ks + KT * LD;
        for (int e = lane; e < KT * CHUNKS; e += 32) {
            int j = e / CHUNKS, c = e - j * CHUNKS;
            int key = kbase + j;
            if (key == pos && key < w_end)
                continue; /* the new token: write_new_row puts it there */
            const folio_bf16_bits *ksrc = k_cache, *vsrc = v_cache;
            int bytes = 0;
            if (key < w_end) {
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

    /* The new token's row of the tile at kbase (its cp.async was skipped). */
    auto write_new_row = [&](int kbase, folio_bf16_bits *ks, folio_bf16_bits *vs) {
        if (pos >= kbase && pos < kbase + KT && pos < w_end) {
            /* RoPE of k and the cache write of k and v, as rope_kv.cu rounds them. */
            int j = pos - kbase;
            int blk = table[pos / FOLIO_K_BLOCK];
            int64_t off = ((int64_t)blk * num_kv_heads + kvh) * head_stride +
                          (int64_t)(pos % FOLIO_K_BLOCK) * D;
            const folio_bf16_bits *kin = row + (int64_t)(num_heads + kvh) * D;
            const folio_bf16_bits *vin = row + (int64_t)(num_heads + num_kv_heads + kvh) * D;
            for (int i = lane; i < HALF; i += 32) {
                float ang = (float)pos * inv_freq[i];
                float c = round_bf16(cosf(ang)), s = round_bf16(sinf(ang));
                float x1 = bf16_to_f32(kin[i]), x2 = bf16_to_f32(kin[i + HALF]);
                folio_bf16_bits k1 = f32_to_bf16(round_bf16(x1 * c) + round_bf16(-x2 * s));
                folio_bf16_bits k2 = f32_to_bf16(round_bf16(x2 * c) + round_bf16(x1 * s));
                k_cache[off + i] = k1;
                k_cache[off + i + HALF] = k2;
                ks[j * LD + i] = k1;
                ks[j * LD + i + HALF] = k2;
            }
            for (int i = lane; i < D; i += 32) {
                folio_bf16_bits v = vin[i];
                v_cache[off + i] = v;
                vs[j * LD + i] = v;
            }
        }
    };

    /* Keys before pos were written by earlier steps: their loads may start before the
     * kernel this one depends on (the QKV GEMM) has finished. */
    const int n_tiles = w_end > w_begin ? (w_end - w_begin + KT - 1) / KT : 0;
#pragma unroll
    for (int st = 0; st < DEC_STAGES - 1; st++) {
        if (st < n_tiles)
            load_tile(w_begin + st * KT, st);
        cp_async_commit();
    }
    pdl_trigger();
    pdl_wait();

    /* Q fragments of rows g and g + 8 (heads of this KV head), rotated. */
    uint32_t qa[KS][4];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int r = g + 8 * i;
        bool live = r < group && pos >= 0;
        const uint32_t *q = (const uint32_t *)(row + (int64_t)(kvh * group + (live ? r : 0)) * D);
#pragma unroll
        for (int s = 0; s < KS; s++) {
            qa[s][i] = live ? q[(16 * s + 2 * tq) / 2] : 0u;
            qa[s][i + 2] = live ? q[(16 * s + 8 + 2 * tq) / 2] : 0u;
        }
        if (live) {
#pragma unroll
            for (int s = 0; s < KS / 2; s++) { /* dim d pairs with d + D/2: k-step s + KS/2 */
                rope_pack(qa[s][i], qa[s + KS / 2][i], 16 * s + 2 * tq, pos, inv_freq);
                rope_pack(qa[s][i + 2], qa[s + KS / 2][i + 2], 16 * s + 8 + 2 * tq, pos, inv_freq);
            }
        }
    }

    for (int it = 0; it < n_tiles; it++) {
        const int nxt = it + DEC_STAGES - 1;
        if (nxt < n_tiles)
            load_tile(w_begin + nxt * KT, nxt % DEC_STAGES);
        cp_async_commit();
        const int kbase = w_begin + it * KT;
        folio_bf16_bits *ks = wsm + (size_t)(it % DEC_STAGES) * 2 * KT * LD;
        folio_bf16_bits *vs = ks + KT * LD;
        write_new_row(kbase, ks, vs);
        cp_async_wait<DEC_STAGES - 1>();
        __syncwarp();

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
        float tile_max[2] = {NEG_INF, NEG_INF};
#pragma unroll
        for (int j = 0; j < NT; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = kbase + 8 * j + 2 * tq + (e & 1);
                sc[j][e] = key < w_end ? sc[j][e] * scale_log2 : NEG_INF;
                tile_max[e >> 1] = fmaxf(tile_max[e >> 1], sc[j][e]);
            }
        }
        float alpha[2], m_use[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
            tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
            float m_new = fmaxf(m[i], tile_max[i]);
            m_use[i] = m_new == NEG_INF ? 0.0f : m_new;
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
        __syncwarp(); /* this stage is free for the load DEC_STAGES - 1 tiles ahead */
    }
    cp_async_wait<0>();
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }

    /* Merge the warps: [warp][16 rows][D] f32 and (m, l), over the tile buffers. */
    __syncthreads();
    float *wo = (float *)smem_kv;
    float2 *wml = (float2 *)(wo + DEC_WARPS * 16 * D);
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int r = g + 8 * i;
        if (r >= group)
            continue;
        float *dst = wo + (warp * 16 + r) * D;
#pragma unroll
        for (int n = 0; n < DT; n++)
            *(float2 *)(dst + 8 * n + 2 * tq) = make_float2(o[n][2 * i], o[n][2 * i + 1]);
        if (tq == 0)
            wml[warp * 16 + r] = make_float2(m[i], l[i]);
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < group * D; idx += DEC_WARPS * 32) {
        int r = idx / D, d = idx - r * D;
        float mmax = NEG_INF;
#pragma unroll
        for (int w = 0; w < DEC_WARPS; w++)
            mmax = fmaxf(mmax, wml[w * 16 + r].x);
        float sum = 0.0f, acc = 0.0f;
        if (mmax != NEG_INF) {
#pragma unroll
            for (int w = 0; w < DEC_WARPS; w++) {
                float wt = exp2f(wml[w * 16 + r].x - mmax); /* 0 for an empty warp */
                sum += wt * wml[w * 16 + r].y;
                acc += wt * wo[(w * 16 + r) * D + d];
            }
        }
        int64_t orow = (int64_t)t * num_heads + kvh * group + r;
        if (eff == 1) {
            out[orow * D + d] = f32_to_bf16(sum > 0.0f ? acc / sum : 0.0f);
        } else {
            part_o[(orow * splits + split) * D + d] = acc;
            if (d == 0)
                part_ml[orow * splits + split] = make_float2(mmax, sum);
        }
    }
    if (eff == 1)
        return;

    /* Last CTA of this (token, KV head) merges the splits. */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        int *ctr = counters + (int64_t)t * num_kv_heads + kvh;
        int prev = atomicAdd(ctr, 1);
        last_flag = prev == eff - 1;
        if (last_flag)
            *ctr = 0; /* every CTA of this launch has counted: ready for the next */
    }
    __syncthreads();
    if (!last_flag)
        return;
    __threadfence();
    for (int idx = threadIdx.x; idx < group * D; idx += DEC_WARPS * 32) {
        int r = idx / D, d = idx - r * D;
        int64_t orow = (int64_t)t * num_heads + kvh * group + r;
        const float2 *ml = part_ml + orow * splits;
        float mmax = NEG_INF;
        for (int s = 0; s < eff; s++)
            mmax = fmaxf(mmax, __ldcg(&ml[s].x));
        float sum = 0.0f, acc = 0.0f;
        if (mmax != NEG_INF) {
            for (int s = 0; s < eff; s++) {
                float2 v = __ldcg(&ml[s]);
                float wt = exp2f(v.x - mmax);
                sum += wt * v.y;
                acc += wt * __ldcg(&part_o[(orow * splits + s) * D + d]);
            }
        }
        out[orow * D + d] = f32_to_bf16(sum > 0.0f ? acc / sum : 0.0f);
    }
}

static bool decode_shape_ok(int num_heads, int num_kv_heads, int head_dim)
{
    if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0)
        return false;
    int group = num_heads / num_kv_heads;
    return (head_dim == 64 || head_dim == 128) && group <= 16 && (group & (group - 1)) == 0;
}

extern "C" cudaError_t folio_k_attention_decode_fused_prepare(int head_dim)
{
    if (head_dim == 64)
        return cudaFuncSetAttribute(attention_decode_kernel<64>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)dec_smem_bytes<64>());
    if (head_dim == 128)
        return cudaFuncSetAttribute(attention_decode_kernel<128>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)dec_smem_bytes<128>());
    return cudaErrorInvalidValue;
}

template <int D>
static cudaError_t decode_fused_d(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                                  folio_bf16_bits *k_cache, folio_bf16_bits *v_cache,
                                  const float *inv_freq, struct folio_k_batch b, int splits,
                                  void *workspace, int *counters, int num_heads, int num_kv_heads,
                                  int pdl, cudaStream_t s)
{
    static_assert(dec_smem_bytes<D>() >= sizeof(float) * DEC_WARPS * 16 * (D + 2),
                  "the warp merge reuses the tile buffers");
    size_t rows = (size_t)b.num_tokens * num_heads * (splits > 1 ? splits : 0);
    float *part_o = (float *)workspace;
    float2 *part_ml = (float2 *)(part_o + rows * D);
    dim3 grid(b.num_tokens, num_kv_heads, splits);
    cudaError_t e = launch_pdl(attention_decode_kernel<D>, grid, dim3(DEC_WARPS * 32),
                               dec_smem_bytes<D>(), s, pdl != 0, out, qkv, k_cache, v_cache,
                               inv_freq, b, num_heads, num_kv_heads, part_o, part_ml, counters);
    return e != cudaSuccess ? e : cudaGetLastError();
}

extern "C" cudaError_t
folio_k_attention_decode_fused(folio_bf16_bits *out, const folio_bf16_bits *qkv,
                               folio_bf16_bits *k_cache, folio_bf16_bits *v_cache,
                               const float *inv_freq, struct folio_k_batch b, int splits,
                               void *workspace, int *counters, int num_heads, int num_kv_heads,
                               int head_dim, int pdl, cudaStream_t s)
{
    if (b.num_tokens <= 0)
        return cudaSuccess;
    if (!decode_shape_ok(num_heads, num_kv_heads, head_dim) || splits < 1 ||
        splits > DEC_MAX_SPLITS || (splits > 1 && (!workspace || !counters)))
        return cudaErrorInvalidValue;
    if (head_dim == 64)
        return decode_fused_d<64>(out, qkv, k_cache, v_cache, inv_freq, b, splits, workspace,
                                  counters, num_heads, num_kv_heads, pdl, s);
    return decode_fused_d<128>(out, qkv, k_cache, v_cache, inv_freq, b, splits, workspace, counters,
                               num_heads, num_kv_heads, pdl, s);
}
