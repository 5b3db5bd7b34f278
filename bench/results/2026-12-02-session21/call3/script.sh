# Session 21 call 3: lean-loader (attention_load_blocks copies wholly-live blocks with no per-chunk
# tests). *_main: main's build (281760f). Probe patterns at b256/512, steps side by side, then
# check_and_time in full on the new build.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for v in kv_read_probe_main kv_read_probe; do
  $B/$v 256 512 | grep -E "warp1_tab |warp1_attnload|warp1_zfill|folio " | sed "s/^RESULT /RESULT build=$v /"
done | tee $OUT/kv_read_probe.txt
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench_main 256
new_b256 decode_bench 256
main_b128 decode_bench_main 128
new_b128 decode_bench 128
main_b64 decode_bench_main 64
new_b64 decode_bench 64
main_b8 decode_bench_main 8
new_b8 decode_bench 8
main_b1 decode_bench_main 1
new_b1 decode_bench 1" timeout 200 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
mkdir -p /tmp/ct
OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  timeout 330 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
echo "check_and_time rc $?"
grep -E "^FAIL|correctness:|smoke|memcheck|racecheck" $OUT/ct.log | cut -c1-200
cp /tmp/ct/check.log /tmp/ct/table.txt $OUT/ 2>/dev/null; cat /tmp/ct/table.txt
