#!/usr/bin/env bash
# One device call: decode steps of several builds or switch settings side by side, interleaved
# round by round (A B C, A B C, ...) so that clock and thermal drift hit every variant alike;
# prints each variant's per-round medians and their median. Run from the repo root on the GPU
# machine after deploy/bundle.sh (bundle/ carried; a baseline binary may sit beside the new one,
# e.g. bundle/bin/decode_bench_base built from the previous commit):
#     FOLIO_COMPARE="new_b64 decode_bench 64
#     old_b64 decode_bench_base 64
#     nosplitk_b64 decode_bench 64 --paths splitk_o=1,splitk_down=1" bash bench/gpu/compare_decode.sh
# FOLIO_COMPARE_ROUNDS (default 3), FOLIO_COMPARE_STEPS (default 200), context 512.
set -uo pipefail
source bench/gpu/common.sh
folio_tinyllama || exit 1
ROUNDS=${FOLIO_COMPARE_ROUNDS:-3}
STEPS=${FOLIO_COMPARE_STEPS:-200}
LOG=$OUT/compare.log
: >"$LOG"
# Which card: interleaved rounds compare variants on one card, but their figures differ between cards.
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader 2>/dev/null |
  sed 's/^/GPU /' | tee -a "$LOG"
for r in $(seq 1 "$ROUNDS"); do
  while read -r label bin batch opts; do
    [ -n "$label" ] || continue
    # shellcheck disable=SC2086
    out=$(timeout 60 "$B/$bin" $opts /tmp/tl decode "$batch" 512 "$STEPS" 2>&1)
    rc=$?
    if grep -q RESULT <<<"$out"; then
      grep RESULT <<<"$out" | sed "s/name=[^ ]*/name=$label round=$r/" >>"$LOG"
    else # a variant that fails says so (its last line), rather than vanish from the table
      echo "FAIL name=$label round=$r rc=$rc last=$(tail -1 <<<"$out" | tr -s '\t ' ' ' | cut -c1-160)" >>"$LOG"
    fi
  done <<<"$FOLIO_COMPARE"
done
python3 - "$LOG" <<'PY'
import re, statistics, sys
rows = {}
means = {}
hashes = {}
for line in open(sys.argv[1]):
    m = re.search(r"name=(\S+) round=\d+ ms=([\d.]+) median_ms=([\d.]+)", line)
    if m:
        means.setdefault(m.group(1), []).append(float(m.group(2)))
        rows.setdefault(m.group(1), []).append(float(m.group(3)))
        h = re.search(r"tokens_hash=(\S+)", line)
        hashes.setdefault(m.group(1), set()).add(h.group(1) if h else "-")
# Each round's decode_bench reports the median step interval and the mean (total time over the
# steps, what check_and_time's table and the issue's targets read); the mean runs 1-2% higher.
print("| variant | median ms (median of rounds) | mean ms (median of rounds) | rounds (median) | tokens_hash |")
print("|---|---|---|---|---|")
for k, v in rows.items():
    print(f"| {k} | {statistics.median(v):.4f} | {statistics.median(means[k]):.4f} | {' '.join(f'{x:.4f}' for x in v)} | {','.join(sorted(hashes[k]))} |")
for line in open(sys.argv[1]):
    if line.startswith("FAIL "):
        print(line.rstrip())
PY
