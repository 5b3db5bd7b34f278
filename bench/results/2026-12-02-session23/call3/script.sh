# Session 23, call 3: main (f8326a8, fast-silu merged) against two variants, 3 interleaved rounds
# of 100 steps at b256, b128, b64: decode_bench_row (branch silu-token: silu_mul_norm one CTA a
# token) and decode_bench_lms (branch lm-stream: the cuBLASLt LM head's weights evict-first in
# L2). Then b256 timelines of lms and row, and Nsight Compute of the sampler under lms.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench 256
row_b256 decode_bench_row 256
lms_b256 decode_bench_lms 256
main_b128 decode_bench 128
row_b128 decode_bench_row 128
lms_b128 decode_bench_lms 128
main_b64 decode_bench 64
row_b64 decode_bench_row 64
lms_b64 decode_bench_lms 64" timeout 200 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
for v in lms row; do
  CUDA_INJECTION64_PATH=$B/libkernel_timeline.so KERNEL_TIMELINE_DETAIL=1 \
    timeout 60 "$B/decode_bench_$v" /tmp/tl decode 256 512 50 >"$OUT/timeline_${v}_b256.txt" 2>&1
  echo "== $v"; grep -E '^(RESULT|TIMELINE_KERNEL)' "$OUT/timeline_${v}_b256.txt" | cut -c1-160 | head -9
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for v in decode_bench decode_bench_lms; do
  timeout 100 $NCU --clock-control none --cache-control none --set full -k regex:sample_kernel --launch-skip 35 --launch-count 1 \
    -o /tmp/s_$v $B/$v /tmp/tl decode 256 512 40 > /dev/null 2>&1
  echo "$v sampler: ncu rc $?"
  $NCU -i /tmp/s_$v.ncu-rep --page details 2>&1 | grep -E " Duration|DRAM Throughput|L2 Hit Rate |Grid Size" | head -5
done
