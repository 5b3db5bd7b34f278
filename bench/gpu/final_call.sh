#!/usr/bin/env bash
# One device call (about 8 minutes) that shows a change altered no behaviour: the new build's
# decode steps against the previous build's (bundle/bin/decode_bench_base, when there) at b1, b64
# and b256 in interleaved rounds; the GPU correctness suite (tests/gpu/run.sh, sanitizers off
# unless FOLIO_SANITIZE_RUN=1); check_and_time's timing part (decode b1, b64, b256 over 1000
# steps against the card's floors) with the greedy tokens' hashes against the expected ones;
# and GuideLLM's rate2 workload (when the wheels are staged), against the previous build's
# programs too where bundle/bin/base/ holds them (folio, folio-scheduler, -frontend, -worker).
# Run from the repo root on the GPU machine after, here: deploy/bundle.sh, the baseline binary
# (docs/benchmarks.md), bench/fetch_guidellm_wheels.sh, `bash bench/gpu/guidellm_bench.sh --stage`
# and deploy/pack.sh (carry build-pack):
#     tar xJf build-pack/carry.tar.xz && bash bench/gpu/final_call.sh
# Prints a summary; every log comes back in $OUT/final_call.tgz. FOLIO_FINAL_BUDGET (default 560
# s): a part that would no longer fit is skipped, so the call ends inside the device's 10 minutes.
set -uo pipefail
BUDGET=${FOLIO_FINAL_BUDGET:-560}
left() { echo $((BUDGET - SECONDS)); }
source bench/gpu/common.sh
W=/tmp/fc
mkdir -p "$W"
folio_env_report >"$W/env.txt" 2>&1
folio_tinyllama || exit 1

if [ -x "$B/decode_bench_base" ]; then
  C=""
  for b in 1 64 256; do
    C+="new_b$b decode_bench $b"$'\n'"base_b$b decode_bench_base $b"$'\n'
  done
  echo "== new build against the previous one (interleaved, 2 rounds of 200 steps)"
  OUT=$W FOLIO_COMPARE="$C" FOLIO_COMPARE_ROUNDS=2 timeout 120 bash bench/gpu/compare_decode.sh 2>&1 |
    tee "$W/compare.txt" | grep -E "^\||FAIL"
fi

echo "== GPU correctness suite"
OUT=$W/tests FOLIO_SANITIZE_RUN=${FOLIO_SANITIZE_RUN:-0} timeout $(($(left) - 280)) bash tests/gpu/run.sh \
  >"$W/tests.log" 2>&1
echo "tests/gpu/run.sh exit $?"
grep -E "^(FAIL|correctness|qwen2:|gpu tests)" "$W/tests.log"

echo "== decode timings (check_and_time's timing part)"
OUT=$W/ct FOLIO_SKIP_CHECKS=1 FOLIO_SKIP_SERVE=1 FOLIO_DECODE_BATCHES="1 64 256" \
  FOLIO_PREFILL_SIZES= FOLIO_CUBLAS_BATCHES= timeout 120 bash bench/gpu/check_and_time.sh \
  >"$W/ct.log" 2>&1
grep -E "^(GPU|what|decode)" "$W/ct/table.txt" 2>/dev/null || tail -5 "$W/ct.log"
# The greedy tokens of decode_bench's steps (seeded checkpoint, fixed contexts) are the same on
# every card; these are the hashes every build printed from round 34 to 73aa2ed. A change that
# alters no behaviour prints them again (FOLIO_EXPECT_HASHES: NAME=HASH pairs).
for pair in ${FOLIO_EXPECT_HASHES-decode_b1_ctx512=a8625191 decode_b64_ctx512=f163e4c4 decode_b256_ctx512=390fcfbb}; do
  got=$(grep -o "name=${pair%%=*} .*tokens_hash=[0-9a-f]*" "$W/ct/timings.log" 2>/dev/null | sed 's/.*tokens_hash=//')
  echo "tokens_hash ${pair%%=*}: ${got:-missing} (expected ${pair#*=}: $([ "$got" = "${pair#*=}" ] && echo same || echo DIFFERENT))"
done

if [ -d .whl ] && [ "$(left)" -gt 120 ]; then
  echo "== GuideLLM rate2 ($(left) s left)"
  servers=(--server folio)
  [ -x "$B/base/folio" ] && servers+=(--server \
    "folio-base=env LD_LIBRARY_PATH={ld} $B/base/folio serve --backend cuda --model {model} --port {port}")
  OUT=$W/guidellm timeout $(($(left) - 10)) bash bench/gpu/guidellm_bench.sh --workloads rate2 \
    "${servers[@]}" --budget-s $(($(left) - 20)) \
    >"$W/guidellm.log" 2>&1
  tail -12 "$W/guidellm.log"
fi
tar czf "$OUT/final_call.tgz" -C /tmp fc
