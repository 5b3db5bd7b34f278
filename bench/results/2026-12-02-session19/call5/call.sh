# Session 19, call 5: check_and_time's correctness checks with checks 9 and 10 (query-head groups of 3 and 16 on every decode path) (head_dim 128 against
# transformers and the CPU backend) and the sanitizers with the head_dim-128 fixture; no timings,
# no serve smoke. Run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session19/call5/call.sh
set -u
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/ct
OUT=/tmp/ct FOLIO_SKIP_TIMINGS=1 FOLIO_SKIP_SERVE=1 FOLIO_SANITIZE_TIMEOUT=60 timeout 560 \
  bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
echo "rc $?"
cp /tmp/ct/check.log $OUT/ 2>/dev/null
grep -E "^(PASS|FAIL)|correctness:|memcheck|racecheck|Traceback|Error" $OUT/ct.log | cut -c1-330
