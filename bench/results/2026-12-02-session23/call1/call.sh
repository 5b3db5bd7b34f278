# The next session's first device call (written in session 22, not run).
# Where a b256 step's time goes after round 28: the per-kernel timeline of main at b256 (in-step
# durations; round 25's put attention at 39.5 us a layer, before the swizzled stages), then
# Nsight Compute's details of the two kernels of Folio's own that a b256 layer runs:
# - silu_mul_norm_kernel: 5.7 us a layer for 8.7 MB that the gate/up GEMM just wrote (L2), where
#   the other small kernels of the step take 1.5-3.2 us and a one-CTA-a-token form changed
#   nothing (round 28, silu-row). What it waits on decides whether it can shrink (up to ~3%
#   of the step);
# - attention_decode_kernel<64, 1, 1, 2>: 35.9 us in the probe against 32.1 for plain copies.
# Prepare here: git checkout main && cmake --build build-bundle -j2 && deploy/bundle.sh &&
#     deploy/pack.sh
# then run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session22/next_call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
FOLIO_TIMELINE_BATCHES=256 FOLIO_LT_ARGS=skip timeout 200 bash bench/gpu/timeline_call.sh 2>&1 |
  grep -E "^(RESULT|TIMELINE )|^TIMELINE_KERNEL" | cut -c1-200 | head -20
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
# The 45th launch of each kernel: the third step's, inside its graph (the first steps run eagerly
# and capture).
for k in silu_mul_norm_kernel attention_decode_kernel; do
  timeout 150 $NCU --clock-control none --cache-control none --set full -k regex:$k \
    --launch-skip 44 --launch-count 1 -o /tmp/$k $B/decode_bench /tmp/tl decode 256 512 4 \
    > $OUT/ncu_run_$k.txt 2>&1
  echo "$k: ncu rc $?"
  $NCU -i /tmp/$k.ncu-rep --page details > $OUT/details_$k.txt 2>&1
  grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Hit|L2 Hit Rate|Memory Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Grid Size|Block Size|One or More Eligible" \
    $OUT/details_$k.txt | head -20
done
