#!/usr/bin/env bash
# Round 8 of the CUDA decode work (2026-11-29), one device call: correctness, timings, serve smoke
# and sanitizers with the streaming GEMV (FOLIO_GEMV_STREAM=1) and the reworked sampling kernel;
# the streaming GEMV against the register one side by side (equal token hashes expected against
# FOLIO_GEMV_SPLITK=1, which sums in the same order); ncu breakdown at batch 1.
set -uo pipefail
export OUT=${OUT:-/tmp/folio-out}
FOLIO_GEMV_STREAM=1 FOLIO_PREFILL_SIZES=4096 FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  bash bench/gpu/check_and_time.sh
FOLIO_NCU_LABELS="stream_b1" FOLIO_PROFILE_CONFIGS="stream_b1 1 FOLIO_GEMV_STREAM=1
reg_b1 1
regsplit1_b1 1 FOLIO_GEMV_SPLITK=1
stream_b2 2 FOLIO_GEMV_STREAM=1
reg_b2 2
stream4_b4 4 FOLIO_GEMV_STREAM=1 FOLIO_GEMV_MAX_ROWS=4
reg_b4 4
stream8_b8 8 FOLIO_GEMV_STREAM=1 FOLIO_GEMV_MAX_ROWS=8
reg_b8 8
reg_b64 64
reg_b256 256" bash bench/gpu/profile_decode.sh 2>&1 | grep -v "^RESULT" | tail -16
echo "== correctness summary"
grep -E "^(PASS|FAIL|correctness)" "$OUT/check.log" | cut -c1-200
echo "== decode step wall times (ms)"
grep RESULT "$OUT/variants.log" | sed 's/ bytes=.*hash=/ hash=/'
cd "$OUT" && tar czf /tmp/round8.tgz --exclude=work . ; mv /tmp/round8.tgz . &&
  find . -maxdepth 1 -type f ! -name round8.tgz ! -name check.log ! -name variants.log \
    ! -name ncu_summary.txt ! -name table.txt ! -name smoke.txt -delete
