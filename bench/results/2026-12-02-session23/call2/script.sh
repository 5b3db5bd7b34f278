# Session 23, call 2: branch fast-silu (packed bf16x2 SwiGLU with MUFU exp/rcp) against main's
# decode_bench (decode_bench_main) at b256, b64, b1, 3 interleaved rounds of 100 steps; the b256
# timeline of fast-silu; then check_and_time in full on fast-silu.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench_main 256
fast_b256 decode_bench 256
main_b64 decode_bench_main 64
fast_b64 decode_bench 64
main_b1 decode_bench_main 1
fast_b1 decode_bench 1" timeout 150 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
FOLIO_TIMELINE_BATCHES=256 FOLIO_LT_ARGS=skip timeout 100 bash bench/gpu/timeline_call.sh 2>&1 |
  grep -E "^TIMELINE_KERNEL" | cut -c1-200 | head -8
mkdir -p /tmp/ct
OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 timeout 320 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
echo "check_and_time rc $?"
cp /tmp/ct/check.log /tmp/ct/table.txt $OUT/ 2>/dev/null
grep -E "^FAIL|correctness:|memcheck|racecheck|smoke" $OUT/ct.log | cut -c1-200
cat $OUT/table.txt 2>/dev/null
