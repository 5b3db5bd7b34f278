#!/usr/bin/env bash
# One device call: where a decode step's time goes. Times decode steps (wall time per step,
# graphs on, as the worker runs them), then profiles two steady-state steps of each
# configuration with Nsight Compute (per-kernel duration and DRAM bytes; kernels serialized by
# the profiler, so the sum per step against the wall time shows what launches and gaps cost).
# Run from the repo root on the GPU machine, after deploy/bundle.sh decode_bench here:
#     bash bench/gpu/profile_decode.sh
# FOLIO_PROFILE_CONFIGS: lines of "LABEL BATCH [decode_bench OPTIONS]" (default below).
set -uo pipefail
source bench/gpu/common.sh
cat "$ROOT/bundle/SOURCE.txt" | tee "$OUT/profile_env.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee -a "$OUT/profile_env.txt"
folio_tinyllama || exit 1

CONFIGS=${FOLIO_PROFILE_CONFIGS:-"default_b1 1
default_b8 8
default_b64 64
default_b256 256"}

echo "== timings (wall ms per step, 200 steps)"
while read -r label batch opts; do
  [ -n "$label" ] || continue
  # shellcheck disable=SC2086
  timeout 60 "$B/decode_bench" $opts /tmp/tl decode "$batch" 512 200 |
    sed "s/name=decode_[^ ]*/name=$label/"
done <<<"$CONFIGS" | tee "$OUT/variants.log"

NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "== ncu ($NCU)"
# FOLIO_NCU_LABELS: the configurations to profile (default: all).
while read -r label batch opts; do
  [ -n "$label" ] || continue
  case " ${FOLIO_NCU_LABELS:-$label} " in *" $label "*) ;; *) continue ;; esac
  timeout 180 "$NCU" --clock-control none --cache-control none --profile-from-start off \
    --graph-profiling node --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    "$B/decode_bench" $opts /tmp/tl decode "$batch" 512 2 >"$OUT/ncu_$label.csv" 2>"$OUT/ncu_$label.err"
  python3 bench/gpu/ncu_summary.py "$OUT/ncu_$label.csv" 2 "$label" || tail -5 "$OUT/ncu_$label.err"
done <<<"$CONFIGS" | tee "$OUT/ncu_summary.txt"
rm -f "$OUT"/ncu_*.err
tar -C "$OUT" -czf "$OUT/ncu_csv.tgz" $(cd "$OUT" && ls ncu_*.csv) && rm -f "$OUT"/ncu_*.csv
echo "== step wall times"
grep RESULT "$OUT/variants.log" | sed 's/bytes=.*//'
