#!/usr/bin/env bash
# Round 7 of the CUDA decode work (2026-11-29), one device call: correctness (with the sampler-port
# judged penalties checks), standard timings, serve smoke and sanitizers with the QKV projection
# doing RoPE and the K/V cache write in its epilogue; that fusion on and off; and where the
# sampling kernel's time goes (ncu warp-state and source counters of one launch).
set -uo pipefail
export OUT=${OUT:-/tmp/folio-out}
FOLIO_PREFILL_SIZES=4096 FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  bash bench/gpu/check_and_time.sh
FOLIO_NCU_LABELS="new_b1" FOLIO_PROFILE_CONFIGS="new_b1 1
qkvrope0_b1 1 FOLIO_QKV_ROPE=0
new_b2 2
qkvrope0_b2 2 FOLIO_QKV_ROPE=0
new_b8 8
new_b64 64
new_b256 256" bash bench/gpu/profile_decode.sh 2>&1 | grep -v "^RESULT" | tail -20
echo "== sample_kernel under ncu"
export LD_LIBRARY_PATH=$(pwd)/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 120 ncu --clock-control none -k regex:sample_kernel --launch-skip 5 --launch-count 1 \
  --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis bundle/bin/decode_bench /tmp/tl decode 1 512 10 \
  >"$OUT/ncu_sample.txt" 2>&1
grep -E "Duration|Registers|Block Size|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles|Issued Warp|No Eligible|Active Warps|Shared Memory Configuration|Dynamic Shared|Static Shared|Memory Throughput|L2 Hit" \
  "$OUT/ncu_sample.txt" | head -40
echo "== correctness summary"
grep -E "^(PASS|FAIL|correctness)" "$OUT/check.log" | cut -c1-200
echo "== decode step wall times (ms)"
grep RESULT "$OUT/variants.log" | sed 's/ bytes=.*hash=/ hash=/'
cd "$OUT" && tar czf /tmp/round7.tgz --exclude=work . ; mv /tmp/round7.tgz . &&
  find . -maxdepth 1 -type f ! -name round7.tgz ! -name check.log ! -name variants.log \
    ! -name ncu_summary.txt ! -name table.txt ! -name smoke.txt ! -name ncu_sample.txt -delete
