#!/usr/bin/env bash
# One device call: decode steps side by side (compare_decode.sh, when FOLIO_COMPARE is set), then
# lt_search_bench over the projections at 256 rows: O and down in the plain and split-K partial
# forms, QKV and gate/up plain. Run from the repo root on the GPU machine, after deploy/bundle.sh
# and deploy/pack.sh here:
#     tar xJf build-pack/carry.tar.xz && bash bench/gpu/lt_search_call.sh
# FOLIO_SEARCH_M: the rows (default 256).
set -uo pipefail
OUT=${OUT:-/tmp/folio-out}
mkdir -p "$OUT"
ROOT=$(pwd)
B=$ROOT/bundle/bin
export LD_LIBRARY_PATH=$ROOT/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cat "$ROOT/bundle/SOURCE.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if [ -n "${FOLIO_COMPARE:-}" ]; then
  echo "== compare_decode"
  bash bench/gpu/compare_decode.sh 2>&1 | tail -30
fi
M=${FOLIO_SEARCH_M:-256}
echo "== lt_search_bench m=$M"
timeout 260 "$B/lt_search_bench" --m "$M" --splits 1,2,4 o:2048:2048 down:2048:5632 >"$OUT/lt_search_od.txt" 2>&1
echo "rc=$?"
timeout 150 "$B/lt_search_bench" --m "$M" --splits 1 qkv:2560:2048 gateup:11264:2048 >"$OUT/lt_search_qg.txt" 2>&1
echo "rc=$?"
for f in "$OUT"/lt_search_od.txt "$OUT"/lt_search_qg.txt; do
  grep -E '^(SEARCH|BEST|lt_search_bench)' "$f"
  grep -E '^RESULT' "$f" | grep -E 'rank=(0|1|2|3) ' | cut -c1-250
  tail -2 "$f" | grep -v '^lt_search_bench' | cut -c1-200
done
