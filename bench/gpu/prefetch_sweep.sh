#!/usr/bin/env bash
# One device call: decode steps with the L2 weight prefetch (FOLIO_L2_PREFETCH_MB,
# FOLIO_L2_PREFETCH_SITES: 1 attention, 2 add_rmsnorm, 4 silu_mul, 8 GEMV tails) at several sizes
# and sites against none, interleaved by compare_decode.sh (same tokens_hash = same tokens).
# Run from the repo root on the GPU machine after deploy/bundle.sh (bundle/ carried).
set -uo pipefail
C=""
add() { C+="$1"$'\n'; }
for mb in 0 8 16 32; do add "b1_mb$mb decode_bench 1 FOLIO_L2_PREFETCH_MB=$mb"; done
add "b1_mb16_attn decode_bench 1 FOLIO_L2_PREFETCH_MB=16 FOLIO_L2_PREFETCH_SITES=1"
add "b1_mb16_gemv decode_bench 1 FOLIO_L2_PREFETCH_MB=16 FOLIO_L2_PREFETCH_SITES=8"
for mb in 0 16 32; do add "b8_mb$mb decode_bench 8 FOLIO_L2_PREFETCH_MB=$mb"; done
for mb in 0 8 16 32; do add "b64_mb$mb decode_bench 64 FOLIO_L2_PREFETCH_MB=$mb"; done
add "b64_mb16_attn decode_bench 64 FOLIO_L2_PREFETCH_MB=16 FOLIO_L2_PREFETCH_SITES=1"
add "b64_mb16_norm_silu decode_bench 64 FOLIO_L2_PREFETCH_MB=16 FOLIO_L2_PREFETCH_SITES=6"
for mb in 0 16 32; do add "b256_mb$mb decode_bench 256 FOLIO_L2_PREFETCH_MB=$mb"; done
cat bundle/SOURCE.txt
FOLIO_COMPARE="$C" FOLIO_COMPARE_ROUNDS=${FOLIO_COMPARE_ROUNDS:-2} bash bench/gpu/compare_decode.sh
