set -u
B=$PWD/bundle/bin
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
mkdir -p $OUT/cubins
CUBIN_DUMP_DIR=$OUT/cubins CUDA_INJECTION64_PATH=$B/libcubin_dump.so timeout 60 $B/decode_bench /tmp/tl decode 256 512 5 2>&1 | grep RESULT
ls -la $OUT/cubins | head; du -sh $OUT/cubins
CUDA_INJECTION64_PATH=$B/libkernel_timeline.so KERNEL_TIMELINE_DETAIL=1 timeout 120 $B/decode_bench /tmp/tl decode 256 512 50 > $OUT/timeline_b256.txt 2>&1
grep -E '^(RESULT|TIMELINE |TIMELINE_KERNEL)' $OUT/timeline_b256.txt | cut -c1-200
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE="main_b256 decode_bench 256
siluwarp_b256 decode_bench_siluwarp 256
samp2_b256 decode_bench_samp2 256
main_b160 decode_bench 160
siluwarp_b160 decode_bench_siluwarp 160
samp2_b160 decode_bench_samp2 160" bash bench/gpu/compare_decode.sh > $OUT/compare_table.txt 2>&1
cat $OUT/compare_table.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for v in decode_bench decode_bench_samp2 decode_bench_siluwarp; do
  timeout 150 $NCU --clock-control none --profile-from-start off --graph-profiling node --kernel-name regex:"sample_kernel|silu_mul_norm" --launch-skip 20 --launch-count 4 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis $B/$v /tmp/tl decode 256 512 3 > $OUT/ncu_$v.txt 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy|DRAM Throughput|L2 Cache Throughput|Waves Per SM" $OUT/ncu_$v.txt | head -30
done
