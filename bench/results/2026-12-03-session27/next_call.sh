# For the next session's first device call: check_and_time in full at main, so that its final
# racecheck form (session 27's 6663944: the group-3 fixture at batches 4 and 160 and the hidden-256
# fixture at 160, each report attributed by kernel, 240 s limits) runs once as a whole. About 570 s:
# run it alone in a call.
#   deploy/bundle.sh && deploy/pack.sh   (here, from a committed tree)
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session27/next_call.sh
set -u
OUT=$OUT/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  bash bench/gpu/check_and_time.sh >"$OUT/check_and_time.log" 2>&1
echo "check_and_time rc $?"
grep -E "^(PASS|FAIL)" "$OUT/check_and_time.log" | grep -v "^PASS" | cut -c1-200
grep -E "uuid|GPU-|correctness:|smoke|memcheck|racecheck" "$OUT/check_and_time.log" | cut -c1-300 | tail -24
gzip -k "$OUT/check_and_time.log"
gzip "$OUT/ct/sanitizer.log" 2>/dev/null
sed -n '/^what  /,/^== compute/p' "$OUT/check_and_time.log"
