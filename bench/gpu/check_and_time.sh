#!/usr/bin/env bash
# One device call: the GPU correctness suite (tests/gpu/run.sh: check_cuda.py and the
# sanitizers), then the CUDA backend's timings against the card's floors and an end-to-end
# `folio serve --backend cuda` smoke. Run from the repo root on the GPU machine, after
# deploy/bundle.sh here (bundle/ carried):
#     bash bench/gpu/check_and_time.sh
# FOLIO_SKIP_CHECKS=1: timings and smoke only. FOLIO_DECODE_BATCHES (default "1 8 64 256"): the
# decode batches timed.
# Logs and figures go to $OUT (default /tmp/folio-out); the table is printed last.
set -uo pipefail
source bench/gpu/common.sh

if [ "${FOLIO_SKIP_CHECKS:-0}" = 1 ]; then
  folio_env_report 2>&1 | tee "$OUT/env.txt"
  folio_tinyllama || exit 1
else
  bash tests/gpu/run.sh
fi
echo "== floors"
python3 bench/gpu/floors.py | tee "$OUT/floors.json"

echo "== timings"
[ "${FOLIO_SKIP_TIMINGS:-0}" = 1 ] || {
  # The decode figures: 1000 steps each (2 s at b256), so that they read what a card keeps
  # up (b256 steps run at the 700 W power cap); session 28's card read b256 1.9976 over 64 steps
  # and 2.018-2.025 over 1000-1500 (2026-12-03-cuda-round34.md).
  for b in ${FOLIO_DECODE_BATCHES-1 8 64 256}; do timeout 60 "$B/decode_bench" /tmp/tl decode $b 512 1000; done
  for n in ${FOLIO_PREFILL_SIZES-512 4096}; do timeout 60 "$B/decode_bench" /tmp/tl prefill $n 10; done
  # A saturated server's step: its decodes beside a prompt chunk (the shape of the saturate run's
  # /metrics, 2026-12-05: 892 tokens a step, 375 of them prompt, ~366 tokens of context).
  timeout 60 "$B/decode_bench" /tmp/tl mixed 517 366 375 200
  for b in 1 8 64 256; do timeout 60 "$B/decode_bench" /tmp/tl attention $b 512 50; done
  timeout 60 "$B/decode_bench" /tmp/tl attention 1 4096 50
  # The paths' thresholds: the same decode steps with every projection through cuBLASLt, and
  # (batches 1-2, the GEMV's) on the TMA GEMM.
  for b in ${FOLIO_CUBLAS_BATCHES-1 8}; do
    timeout 60 "$B/decode_bench" --paths gemv_max_rows=0,no_tma_gemm /tmp/tl decode $b 512 64 |
      sed 's/name=decode_/name=cublas_decode_/'
  done
  for b in 1 2; do
    timeout 60 "$B/decode_bench" --paths gemv_max_rows=0 /tmp/tl decode $b 512 64 |
      sed 's/name=decode_/name=tma_decode_/'
  done
  timeout 60 "$B/decode_bench" /tmp/tl decode 2 512 64
} 2>&1 | tee "$OUT/timings.log"

echo "== serve smoke (folio serve --backend cuda)"
[ "${FOLIO_SKIP_SERVE:-0}" = 1 ] || timeout 150 bash bench/gpu/serve_smoke.sh /tmp/tl cuda \
  --gpu-memory-utilization 0.3 --max-num-seqs 64 2>&1 | tee "$OUT/smoke.txt" | cut -c1-400

echo "== summary"
grep -E "^(PASS|FAIL|correctness|gpu tests)" "$OUT/check.log" 2>/dev/null | cut -c1-300
grep -E "^serve:" "$OUT/smoke.txt" 2>/dev/null
[ -f "$OUT/timings.log" ] && python3 bench/gpu/table.py "$OUT/floors.json" "$OUT/timings.log" | tee "$OUT/table.txt"
