# Session 17 call 5 (branch glu-norm): folio_k_gemm_glu_norm with x shared by TMA multicast in
# clusters of 1, 2, 4 CTAs, alone against cuBLASLt + silu_mul; Nsight Compute on clusters 1 and 4.
set -u
B=$PWD/bundle/bin
timeout 150 $B/gemm_glu_bench 256 8 2>&1 | tee $OUT/glu_bench.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for c in 1 4; do
  timeout 120 $NCU --clock-control none --kernel-name regex:gemm_glu --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section LaunchStats --section Occupancy \
    $B/gemm_glu_bench --cluster $c 256 > $OUT/ncu_c$c.txt 2>&1
  grep -E "Duration|Throughput|Pipe|Busy|Hit Rate|Warp Cycles|Active Clusters|Cluster Size" $OUT/ncu_c$c.txt | head -30
done
