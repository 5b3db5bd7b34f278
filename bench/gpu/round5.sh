#!/usr/bin/env bash
# Round 5 of the CUDA decode work (2026-11-29), one device call: correctness (untuned GEMMs; now
# with the GPU penalties check), the standard timings, serve smoke (a penalized request too) and
# sanitizers, then the L2 prefetch and other switches side by side, and an ncu breakdown at batch 1.
# Run from the repo root on the GPU machine after deploy/bundle.sh (bundle/ carried).
set -uo pipefail
export OUT=${OUT:-/tmp/folio-out}
FOLIO_PREFILL_SIZES=4096 FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 bash bench/gpu/check_and_time.sh
FOLIO_NCU_LABELS="new_b1" FOLIO_PROFILE_CONFIGS="new_b1 1
pf0_b1 1 FOLIO_L2_PREFETCH_MB=0
pf16_b1 1 FOLIO_L2_PREFETCH_MB=16
pf48_b1 1 FOLIO_L2_PREFETCH_MB=48
nopdl_b1 1 FOLIO_PDL=0
new_b2 2
pf0_b2 2 FOLIO_L2_PREFETCH_MB=0
cublas_b2 2 FOLIO_GEMV_MAX_ROWS=1
new_b4 4
gemv4_b4 4 FOLIO_GEMV_MAX_ROWS=4
new_b8 8
new_b64 64
fusedattn_b64 64 FOLIO_DECODE_ATTN=fused
notune_b64 64 FOLIO_GEMM_TUNE=0
new_b256 256
notune_b256 256 FOLIO_GEMM_TUNE=0" bash bench/gpu/profile_decode.sh 2>&1 | grep -v "^RESULT" | tail -60
echo "== correctness summary"
grep -E "^(PASS|FAIL)" "$OUT/check.log" | cut -c1-200
echo "== decode step wall times (ms)"
grep RESULT "$OUT/variants.log" | sed 's/ bytes=.*hash=/ hash=/'
# The device tool returns at most 8 files: everything in one archive, plus the summaries.
cd "$OUT" && tar czf /tmp/round5.tgz --exclude=work . ; mv /tmp/round5.tgz . &&
  find . -maxdepth 1 -type f ! -name round5.tgz ! -name check.log ! -name variants.log \
    ! -name ncu_summary.txt ! -name table.txt ! -name smoke.txt -delete
