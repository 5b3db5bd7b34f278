#!/usr/bin/env bash
# A session's last kernel call: the latest build against the previous one (bundle/bin/decode_bench_base)
# in interleaved rounds, then check_and_time.sh in full (correctness, timings against the floors,
# serve smoke, compute-sanitizer). Run from the repo root on the GPU machine after deploy/bundle.sh
# (bundle/ carried):   bash bench/gpu/final_call.sh
set -uo pipefail
export OUT=${OUT:-/tmp/folio-out}
mkdir -p "$OUT"
C=""
for b in ${FOLIO_FINAL_BATCHES:-1 8 64 256}; do
  C+="new_b$b decode_bench $b"$'\n'"base_b$b decode_bench_base $b"$'\n'
done
FOLIO_COMPARE="$C" FOLIO_COMPARE_ROUNDS=2 bash bench/gpu/compare_decode.sh 2>&1 | tail -10
OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  bash bench/gpu/check_and_time.sh >/tmp/ct.log 2>&1
tail -40 /tmp/ct.log | cut -c1-220
cp /tmp/ct.log "$OUT/"
tar czf "$OUT/check_and_time.tgz" -C /tmp ct
