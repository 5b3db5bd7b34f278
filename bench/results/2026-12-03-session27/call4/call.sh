# Session 27, call 4 (the budget's last 268 s): b256 on this start's card, 5 interleaved rounds
# (compare_decode.sh now logs the card's UUID and limits), and a kernel timeline at b256.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session27/call4/call.sh
set -u
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cat bundle/SOURCE.txt
FOLIO_COMPARE_ROUNDS=5 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench 256" \
  timeout 90 bash bench/gpu/compare_decode.sh 2>&1 | tail -4
head -1 "$OUT/compare.log"
FOLIO_TIMELINE_BATCHES="256" FOLIO_LT_ARGS=skip timeout 60 bash bench/gpu/timeline_call.sh 2>&1 | tail -14
