# Session 20, call 1: session 19's next_call.sh as written, plus the help text of --kernel-name-exclude and bench/kv_read_probe.
# The next session's first device call (written in session 19, not run): check_and_time in full
# at main, its first full run with checks 9 and 10 (head_dim 128; groups of 3 at head_dim 128 and
# of 16), then racecheck on the group-3 fixture with cuBLASLt's kernels left out (in call 6 of
# round 25 every hazard racecheck reported there lay inside cuBLASLt's nvjet kernels). Prepare:
#     cmake --build build-bundle -j2 && deploy/bundle.sh && deploy/pack.sh
# then run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session19/next_call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/ct
OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  timeout 500 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
echo "check_and_time rc $?"
grep -E "^FAIL|correctness:|smoke|memcheck|racecheck" $OUT/ct.log | cut -c1-200
cp /tmp/ct/check.log /tmp/ct/table.txt $OUT/ 2>/dev/null; cat /tmp/ct/table.txt
# Session 20: the bytes of a b256 attention layer read by access pattern, no arithmetic.
$B/kv_read_probe 256 512 | tee $OUT/kv_read_probe.txt
$B/kv_read_probe 256 2048 | tee -a $OUT/kv_read_probe.txt
# /tmp/fxg3 is check_and_time's group-3 fixture.
FOLIO_NUM_KV_BLOCKS=256 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 \
  --kernel-name-exclude kns=nvjet $B/decode_bench /tmp/fxg3 decode 4 40 2 > $OUT/racecheck_g3.log 2>&1
echo "racecheck (group 3, batch 4, nvjet left out) exit $? ($(grep -c 'hazard' $OUT/racecheck_g3.log) hazard lines)"
tail -3 $OUT/racecheck_g3.log
# Session 20: the option's spelling, from the tool itself, in case the run above refused it.
compute-sanitizer --help 2>&1 | grep -B1 -A6 "kernel-name-exclude" | head -20
