# Session 21 call 5: swizzle (decode attention's stages in unpadded, swizzled rows) against
# main's build (*_main, 281760f's GPU code): kv_read_probe's folio patterns at b256/512, steps
# side by side (2 rounds), then the checks and sanitizers (no timings, no smoke).
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for v in kv_read_probe_main kv_read_probe; do
  $B/$v 256 512 | grep -E "warp1_tab |folio" | sed "s/^RESULT /RESULT build=$v /"
done | tee $OUT/kv_read_probe.txt
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=2 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench_main 256
new_b256 decode_bench 256
main_b64 decode_bench_main 64
new_b64 decode_bench 64
main_b1 decode_bench_main 1
new_b1 decode_bench 1" timeout 120 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
mkdir -p /tmp/ct
OUT=/tmp/ct FOLIO_SKIP_TIMINGS=1 FOLIO_SKIP_SERVE=1 FOLIO_SANITIZE_TIMEOUT=40 timeout 220 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
echo "check_and_time (no timings) rc $?"
grep -E "^FAIL|correctness:|memcheck|racecheck" $OUT/ct.log | cut -c1-200
cp /tmp/ct/check.log $OUT/ 2>/dev/null
