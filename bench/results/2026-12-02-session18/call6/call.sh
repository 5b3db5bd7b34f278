# Session 18 call 6, branch cluster-gemm: clusters of 3 and the residual loaded early, alone; Nsight
# Compute on O for folio_k_gemm_cluster (64, 2), (128, 3) and cuBLASLt's kernel; O on (128, 3) and
# (64, 2) in b256 steps.
set -u
B=$PWD/bundle/bin
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
echo "== gemm_cluster_bench"
timeout 120 $B/gemm_cluster_bench 256 2>&1 | tee $OUT/cluster_bench.txt | cut -c1-190
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SECT="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for sh in 2 3; do
  FOLIO_BENCH_GEMM=o FOLIO_BENCH_CLUSTER_SHAPE=$sh timeout 120 $NCU --clock-control none -k regex:gemm_cluster --launch-count 1 $SECT $B/gemm_cluster_bench 256 > $OUT/ncu_shape$sh.txt 2>&1
done
FOLIO_BENCH_GEMM=o FOLIO_BENCH_CLUSTER_SHAPE=2 timeout 120 $NCU --clock-control none -k regex:nvjet --launch-count 2 $SECT $B/gemm_cluster_bench 256 > $OUT/ncu_lt.txt 2>&1
for f in $OUT/ncu_*.txt; do echo "-- $f"; grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|L2 Cache Throughput|Memory Throughput|Compute \(SM\)|Registers Per|Achieved Occ|Warp Cycles Per Issued|Block Size|Grid Size|Cluster Size|stalled_(long_scoreboard|barrier|wait|membar|math|short|mio|lg|branch|no_inst|sleeping|dispatch|drain|imc|tex|selected|not_selected)" $f | grep -v "^\s*$" | cut -c1-150 | head -60; done
echo "== compare"
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE="lt_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=0
o3_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=1 FOLIO_K_CLUSTER_SHAPE=3
o2_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=1 FOLIO_K_CLUSTER_SHAPE=2" bash bench/gpu/compare_decode.sh > $OUT/compare_table.txt 2>&1
cat $OUT/compare_table.txt
