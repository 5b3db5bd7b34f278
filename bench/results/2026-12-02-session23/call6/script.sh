# Session 23, call 6: branch sampler-wide (the split sampler at every row count, about 1024 CTAs
# past 64 rows, its scan in one pass) as bundle/bin/decode_bench, against main's code
# (decode_bench_main, f8326a8), 3 interleaved rounds of 100 steps, greedy and tempered; then, only
# if sampler-wide is faster at b256, check_and_time in full on it.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench_main 256
sw_b256 decode_bench 256
main_b128 decode_bench_main 128
sw_b128 decode_bench 128
main_b64 decode_bench_main 64
sw_b64 decode_bench 64
main_b16 decode_bench_main 16
sw_b16 decode_bench 16
main_b1 decode_bench_main 1
sw_b1 decode_bench 1
main_t_b256 decode_bench_main 256 FOLIO_BENCH_TEMPERATURE=0.8
sw_t_b256 decode_bench 256 FOLIO_BENCH_TEMPERATURE=0.8
main_t_b64 decode_bench_main 64 FOLIO_BENCH_TEMPERATURE=0.8
sw_t_b64 decode_bench 64 FOLIO_BENCH_TEMPERATURE=0.8" timeout 250 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|" | tee $OUT/compare_table.txt
cp /tmp/cmp/compare.log $OUT/
CUDA_INJECTION64_PATH=$B/libkernel_timeline.so KERNEL_TIMELINE_DETAIL=1 \
  timeout 60 "$B/decode_bench" /tmp/tl decode 256 512 50 >"$OUT/timeline_sw_b256.txt" 2>&1
grep -E '^(RESULT|TIMELINE_KERNEL)' "$OUT/timeline_sw_b256.txt" | grep -E "RESULT|sample" | cut -c1-160
m=$(awk -F'|' '$2 ~ /^ main_b256 /{print $3}' $OUT/compare_table.txt)
w=$(awk -F'|' '$2 ~ /^ sw_b256 /{print $3}' $OUT/compare_table.txt)
echo "b256: main $m, sampler-wide $w"
if python3 -c "import sys; sys.exit(0 if float('$w') < float('$m') * 0.998 else 1)"; then
  mkdir -p /tmp/ct
  OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 timeout 320 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
  echo "check_and_time rc $?"
  cp /tmp/ct/check.log /tmp/ct/table.txt $OUT/ 2>/dev/null
  grep -E "^FAIL|correctness:|memcheck|racecheck|smoke" $OUT/ct.log | cut -c1-200
  cat $OUT/table.txt 2>/dev/null
else
  echo "sampler-wide not faster at b256: no check"
fi
