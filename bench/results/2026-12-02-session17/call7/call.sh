# Session 17 call 7 (branch glu-norm, patches/glu-two-rings.diff): folio_k_gemm_glu_norm with two
# rings (x: 4 stages from L2; weights: 8 stages from memory) against cuBLASLt + silu_mul; Nsight
# Compute's tensor-pipe share.
set -u
B=$PWD/bundle/bin
timeout 100 $B/gemm_glu_bench 256 192 129 8 2>&1 | tee $OUT/glu_bench.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 60 $NCU --clock-control none --kernel-name regex:gemm_glu --launch-count 1 --section SpeedOfLight \
  --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
  $B/gemm_glu_bench 256 > $OUT/ncu.txt 2>&1
grep -E "Duration|Throughput|tensor" $OUT/ncu.txt
