#!/usr/bin/env bash
# compute-sanitizer over decode_bench steps on each decode path of the CUDA backend (called by
# tests/gpu/run.sh, models already made): memcheck and racecheck, one line a run, exit 1 if any
# run failed. FOLIO_SANITIZE_TIMEOUT: seconds a run (default 120). The full log: $OUT/sanitizer.log.
set -uo pipefail
source bench/gpu/common.sh
T=${FOLIO_SANITIZE_TIMEOUT:-120}
LOG=$OUT/sanitizer.log
: >"$LOG"
failed=0

# run TOOL BLOCKS WHAT MODEL BATCH CONTEXT STEPS: decode_bench under the tool, exit 9 on an error.
run() {
  local tool=$1 blocks=$2 what=$3 model=$4
  shift 4
  timeout "$T" compute-sanitizer --tool "$tool" --error-exitcode 9 \
    "$B/decode_bench" --num-kv-blocks "$blocks" "/tmp/$model" decode "$@" >"$OUT/san.tmp" 2>&1
  local rc=$?
  echo "$tool ($what) exit $rc ($(grep -c 'Invalid\|ERROR\|hazard' "$OUT/san.tmp") error lines)"
  cat "$OUT/san.tmp" >>"$LOG"
  [ $rc = 0 ] || failed=1
}

run memcheck 64 "batch 1: GEMV path, PDL" fx 1 40 4
run memcheck 64 "batch 4: TMA GEMM, QKV in K slices, attention with PDL" fx 4 40 4
run memcheck 256 "batch 40: TMA GEMM in a graph of bucket 64" fx 40 40 4
run memcheck 512 "batch 160: cuBLASLt fused path, RoPE and the norms in attention and silu_mul" fx 160 40 4
for rb in 2 4 40; do run racecheck 256 "batch $rb" fx "$rb" 40 2; done
for mb in 1 4 160; do run memcheck 512 "head_dim 128, batch $mb" fx128 "$mb" 40 4; done
run racecheck 256 "head_dim 128, batch 4" fx128 4 40 2

# cuBLASLt's own GEMMs report racecheck hazards (every one in an nvjet kernel) and fail when left
# uninstrumented, so on the cuBLASLt paths each report is attributed to its kernel and only those
# in Folio's kernels fail the run. Few tokens of context: racecheck is slow at 160 rows.
for rc_args in "fxg3 4 40 2" "fx 160 8 1" "fxg3 160 8 1"; do
  read -r model rb ctx steps <<<"$rc_args"
  timeout 240 compute-sanitizer --tool racecheck \
    "$B/decode_bench" --num-kv-blocks 512 "/tmp/$model" decode "$rb" "$ctx" "$steps" >"$OUT/san.tmp" 2>&1
  rc=$?
  by=$(python3 tests/gpu/racecheck_by_kernel.py "$OUT/san.tmp")
  by_rc=$?
  echo "racecheck ($model, batch $rb) exit $rc; by kernel: exit $by_rc ($by)"
  cat "$OUT/san.tmp" >>"$LOG"
  [ $by_rc = 0 ] || failed=1
done
rm -f "$OUT/san.tmp"
exit $failed
