# Session 20, call 4: decode attention's table-read and store changes (the commit before this
# script's), old against new: kv_read_probe (old: kv_read_probe_old, main before the change,
# stripped), decode_bench b256 / b128 / b64 interleaved (old: decode_bench_old), then
# check_and_time in full at the new code (correctness, sanitizers, timings).
# Prepare: cmake --build build-bundle -j2 && deploy/bundle.sh, then
#     cp /tmp/kv_read_probe_old /tmp/decode_bench_old bundle/bin/ && deploy/pack.sh
# run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session20/call4/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for b in 256 128; do
  for v in kv_read_probe_old kv_read_probe; do
    $B/$v $b 512 | grep -E "warp1_tab |folio" | sed "s/^RESULT /RESULT build=$v /"
  done
done | tee $OUT/kv_read_probe.txt
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE="new_b256 decode_bench 256
old_b256 decode_bench_old 256
new_b128 decode_bench 128
old_b128 decode_bench_old 128
new_b64 decode_bench 64
old_b64 decode_bench_old 64" bash bench/gpu/compare_decode.sh 2>&1 | tail -12
cp /tmp/cmp/compare.log $OUT/
mkdir -p /tmp/ct
OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  timeout 420 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
echo "check_and_time rc $?"
grep -E "^FAIL|correctness:|smoke|memcheck|racecheck" $OUT/ct.log | cut -c1-200
cp /tmp/ct/check.log /tmp/ct/table.txt $OUT/ 2>/dev/null; cat /tmp/ct/table.txt
