# Session 27, call 2: check_and_time in full at main (869945d's GPU code) with its new racecheck on
# the group-3 fixture (hazard reports attributed by kernel, bench/gpu/racecheck_by_kernel.py), and
# b256 interleaved 3 rounds (a figure of this session's card).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session27/call2/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=90 \
  bash bench/gpu/check_and_time.sh >"$OUT/check_and_time.log" 2>&1
echo "check_and_time rc $?"
grep -E "^(PASS|FAIL)" "$OUT/check_and_time.log" | grep -v "^PASS" | cut -c1-200
grep -E "correctness:|sampling:|smoke|memcheck|racecheck|exit" "$OUT/check_and_time.log" | cut -c1-300 | tail -24
gzip -k "$OUT/check_and_time.log"
gzip "$OUT/ct/sanitizer.log" 2>/dev/null
tail -22 "$OUT/check_and_time.log"
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench 256" \
  timeout 60 bash bench/gpu/compare_decode.sh 2>&1 | tail -3
