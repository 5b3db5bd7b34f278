# Session 21 call 2: early-start (branch early-start): the kernels after a cuBLASLt GEMM in a
# captured decode graph start once the GEMM's CTAs are all out (launch-completion programmatic
# edges); FOLIO_EARLY_START 0 off, 1 edges, 2 edges + attention's first copies before its wait.
# decode_bench_main: main's build (281760f). Then the checks and sanitizers at the default (2).
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench_main 256
es0_b256 decode_bench 256 FOLIO_EARLY_START=0
es1_b256 decode_bench 256 FOLIO_EARLY_START=1
es2_b256 decode_bench 256 FOLIO_EARLY_START=2
main_b128 decode_bench_main 128
es2_b128 decode_bench 128 FOLIO_EARLY_START=2
main_b192 decode_bench_main 192
es2_b192 decode_bench 192 FOLIO_EARLY_START=2
main_b80 decode_bench_main 80
es2_b80 decode_bench 80 FOLIO_EARLY_START=2" timeout 330 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
mkdir -p /tmp/ct
OUT=/tmp/ct FOLIO_SKIP_TIMINGS=1 FOLIO_SANITIZE_TIMEOUT=60 timeout 240 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
echo "check_and_time (no timings) rc $?"
grep -E "^FAIL|correctness:|smoke|memcheck|racecheck" $OUT/ct.log | cut -c1-200
cp /tmp/ct/check.log $OUT/ 2>/dev/null
