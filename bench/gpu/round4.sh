#!/usr/bin/env bash
# Round 4 of the CUDA decode work (2026-11-29), one device call: correctness (untuned GEMMs, and
# once more with every step of <= 8 rows on the GEMV), the standard timings and sanitizers, then
# the new switches side by side and an Nsight Compute breakdown of the new defaults.
# Run from the repo root on the GPU machine after deploy/bundle.sh (bundle/ carried).
set -uo pipefail
export OUT=${OUT:-/tmp/folio-out}
FOLIO_SKIP_SERVE=1 FOLIO_PREFILL_SIZES=4096 FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  FOLIO_CHECK_GEMV8=1 bash bench/gpu/check_and_time.sh
FOLIO_NCU_LABELS="new_b1 new_b64" FOLIO_PROFILE_CONFIGS="new_b1 1
nopdl_b1 1 FOLIO_PDL=0
fusedattn_b1 1 FOLIO_DECODE_ATTN=fused
new_b2 2
new_b4 4
gemv8_b4 4 FOLIO_GEMV_MAX_ROWS=8
new_b8 8
gemv8_b8 8 FOLIO_GEMV_MAX_ROWS=8
notune_b8 8 FOLIO_GEMM_TUNE=0
new_b64 64
notune_b64 64 FOLIO_GEMM_TUNE=0
nopdl_b64 64 FOLIO_PDL=0
fusedattn_b64 64 FOLIO_DECODE_ATTN=fused
new_b256 256
notune_b256 256 FOLIO_GEMM_TUNE=0" bash bench/gpu/profile_decode.sh 2>&1 | grep -v "^RESULT" | tail -60
echo "== correctness summary"
grep -E "^(PASS|FAIL)" "$OUT/check.log" | cut -c1-200
echo "== decode step wall times (ms)"
grep RESULT "$OUT/variants.log" | sed 's/ bytes=.*hash=/ hash=/'
# The device tool returns at most 8 files: everything in one archive, plus the summaries.
cd "$OUT" && tar czf round4.tgz --exclude=round4.tgz --exclude=work . &&
  find . -maxdepth 1 -type f ! -name round4.tgz ! -name check.log ! -name variants.log \
    ! -name ncu_summary.txt ! -name table.txt -delete
