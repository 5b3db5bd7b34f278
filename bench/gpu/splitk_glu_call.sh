#!/usr/bin/env bash
# One device call: split-K of the gate/up projection (FOLIO_SPLITK_GLU) against none, by batch,
# interleaved (compare_decode.sh), then the correctness checks. Run from the repo root on the GPU
# machine after deploy/bundle.sh (bundle/ carried).
set -uo pipefail
cat bundle/SOURCE.txt
C=""
for b in 8 16 32 64 128; do
  C+="glu2_b$b decode_bench $b"$'\n'"glu1_b$b decode_bench $b FOLIO_SPLITK_GLU=1"$'\n'
done
C+="glu4_b64 decode_bench 64 FOLIO_SPLITK_GLU=4"$'\n'"glu4_b32 decode_bench 32 FOLIO_SPLITK_GLU=4"$'\n'
C+="glu1_b256 decode_bench 256"$'\n'"glu2_b256 decode_bench 256 FOLIO_SPLITK_GLU=2"$'\n'
FOLIO_COMPARE="$C" FOLIO_COMPARE_ROUNDS=2 bash bench/gpu/compare_decode.sh 2>&1 | tail -16
FOLIO_SKIP_SERVE=1 FOLIO_SANITIZE_RUN=0 FOLIO_SKIP_TIMINGS=1 OUT=/tmp/ct timeout 300 \
  bash bench/gpu/check_and_time.sh >/tmp/ct.log 2>&1
grep -E "^(PASS|FAIL|correctness)" /tmp/ct/check.log | cut -c1-160
cp /tmp/ct.log "${OUT:-/tmp}/"
