#!/usr/bin/env bash
# One device call: the decode step's kernels as they overlap in the step (kernel_timeline, a
# CUPTI injection library; Nsight Compute serializes kernels and Nsight Systems does not run on
# the device), then every cuBLASLt candidate for the projections at 65-256 rows (lt_algos_bench).
# Run from the repo root on the GPU machine, after deploy/bundle.sh and deploy/pack.sh here:
#     tar xJf build-pack/carry.tar.xz && bash bench/gpu/timeline_call.sh
# FOLIO_TIMELINE_BATCHES: the decode batches to trace (default 64 8 256 128).
# FOLIO_LT_ARGS: lt_algos_bench's arguments (default: its own; "skip" skips it).
set -uo pipefail
OUT=${OUT:-/tmp/folio-out}
mkdir -p "$OUT"
ROOT=$(pwd)
B=$ROOT/bundle/bin
export LD_LIBRARY_PATH=$ROOT/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cat "$ROOT/bundle/SOURCE.txt" | tee "$OUT/timeline_env.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee -a "$OUT/timeline_env.txt"
[ -f /tmp/tl/config.json ] || python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null || exit 1

for b in ${FOLIO_TIMELINE_BATCHES:-64 8 256 128}; do
  echo "== decode b$b: untraced, then traced"
  timeout 60 "$B/decode_bench" /tmp/tl decode "$b" 512 200 | grep '^RESULT'
  CUDA_INJECTION64_PATH=$B/libkernel_timeline.so KERNEL_TIMELINE_DETAIL=1 \
    timeout 120 "$B/decode_bench" /tmp/tl decode "$b" 512 50 >"$OUT/timeline_b$b.txt" 2>&1
  grep -E '^(RESULT|TIMELINE |TIMELINE_KERNEL)' "$OUT/timeline_b$b.txt" | cut -c1-200
done

if [ "${FOLIO_LT_ARGS:-}" != skip ]; then
  echo "== lt_algos_bench ${FOLIO_LT_ARGS:-}"
  # shellcheck disable=SC2086
  timeout 300 "$B/lt_algos_bench" ${FOLIO_LT_ARGS:-} >"$OUT/lt_algos.txt" 2>&1
  echo "rc=$?"
  grep -E '^(BEST|lt_algos_bench)' "$OUT/lt_algos.txt"
  # the first choice and the best three of each shape
  awk '/^RESULT/ && / cand=0 /' "$OUT/lt_algos.txt" | cut -c1-220
fi
