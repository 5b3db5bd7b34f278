#!/usr/bin/env bash
# One device call for a kernel change: a smoke step (a hang or a fault stops the call early),
# decode steps of the variants in FOLIO_COMPARE (compare_decode.sh's format; typically the new
# build against the previous one, bundle/bin/decode_bench_base, and a switch of the change) in
# interleaved rounds, then check_and_time's correctness checks and compute-sanitizer.
# Run from the repo root on the GPU machine after deploy/bundle.sh:
#     FOLIO_COMPARE="new_b64 decode_bench 64
#     base_b64 decode_bench_base 64" bash bench/gpu/change_call.sh
# FOLIO_ATTN_BATCHES (below) adds the decode attention alone.
set -uo pipefail
export OUT=${OUT:-/tmp/folio-out}
mkdir -p "$OUT"
ROOT=$(pwd)
export LD_LIBRARY_PATH=$ROOT/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cat bundle/SOURCE.txt
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null || exit 1
echo "== smoke"
if ! timeout 30 bundle/bin/decode_bench /tmp/tl decode ${FOLIO_SMOKE_BATCH:-64} 512 20 2>&1 | tail -3; then
  echo "smoke failed: stopping"
  exit 1
fi
# FOLIO_ATTN_BATCHES: decode attention of one layer alone at these batches (context 512), the
# new build (checked against the reference kernel: CHECK lines) and decode_bench_base if carried.
for b in ${FOLIO_ATTN_BATCHES:-}; do
  for bin in decode_bench decode_bench_base; do
    [ -x "bundle/bin/$bin" ] || continue
    timeout 60 "bundle/bin/$bin" /tmp/tl attention "$b" 512 50 2>&1 | grep -E "^(RESULT|CHECK)" |
      grep -v attnref | sed "s/^/$bin: /" | cut -c1-140
  done
done
echo "== decode steps"
FOLIO_COMPARE_ROUNDS=${FOLIO_COMPARE_ROUNDS:-2} \
  timeout 300 bash bench/gpu/compare_decode.sh 2>&1 | tail -16
echo "== checks"
OUT=/tmp/ct FOLIO_SKIP_SERVE=1 FOLIO_SKIP_TIMINGS=1 FOLIO_SANITIZE_TIMEOUT=60 \
  timeout 330 bash bench/gpu/check_and_time.sh >/tmp/ct.log 2>&1
grep -E "^(PASS|FAIL|correctness|memcheck|racecheck)" /tmp/ct.log | cut -c1-160 | tail -26
cp /tmp/ct.log "$OUT/"
