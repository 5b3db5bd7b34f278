#!/usr/bin/env bash
# One device call: the card's power and SM clock while one kind of b256 work runs alone for a few
# seconds: each projection GEMM at 256 rows (cuBLASLt's first choice, lt_algos_bench --loop), the
# LM head, decode attention (decode_bench's attention mode), and whole b256 and b64 decode steps.
# Round 34 found b256 steps at the 700 W cap (SM clock about 1820 MHz where b64 keeps 1980); this
# says which kernels draw that power. Run from the repo root on the GPU machine after
# deploy/bundle.sh (bundle/ carried):
#     OUT=/tmp/out bash bench/gpu/power_by_kernel.sh
# FOLIO_POWER_SECONDS (default 3): how long each GEMM loops.
# nvidia-smi samples every 100 ms; power.draw.instant where the driver has it (power.draw is a
# one-second average). A row's figures are the medians of the samples taken while the measured
# work ran (the LOOP seconds, or the decode steps' time, before the program ended, less its last
# 0.5 s), and mJ a launch = median power (W) x ms a launch.
set -uo pipefail
OUT=${OUT:-/tmp/folio-out}
mkdir -p "$OUT"
ROOT=$(pwd)
B=$ROOT/bundle/bin
export LD_LIBRARY_PATH=$ROOT/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SECS=${FOLIO_POWER_SECONDS:-3}
[ -f /tmp/tl/config.json ] || python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1 || exit 1
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,power.limit --format=csv,noheader | sed 's/^/GPU /'
field=power.draw.instant
nvidia-smi --query-gpu=$field --format=csv,noheader >/dev/null 2>&1 || field=power.draw
echo "power field: $field"

# run TAG CMD...: CMD under nvidia-smi sampling; its stdout to $OUT/TAG.out, the samples to TAG.csv.
run() {
  local tag=$1
  shift
  nvidia-smi --query-gpu=timestamp,clocks.sm,$field,clocks_event_reasons.active \
    --format=csv,noheader,nounits -lms 100 >"$OUT/$tag.csv" 2>&1 &
  local smi=$!
  sleep 0.3
  date +%s.%N >"$OUT/$tag.start"
  timeout 90 "$@" >"$OUT/$tag.out" 2>&1
  date +%s.%N >"$OUT/$tag.end"
  kill $smi
  wait $smi 2>/dev/null
}

for shape in qkv:2560:2048 o:2048:2048 gateup:11264:2048 down:2048:5632 lmhead:32000:2048; do
  run "gemm_${shape%%:*}" "$B/lt_algos_bench" --m 256 --max 1 --loop "$SECS" "$shape"
done
# Attention reads the same 134 MB each launch (a step's layers each read their own), so up to the
# L2's 50 MB of it may come from there: its row reads somewhat low against a step's attention.
FOLIO_BENCH_LOOP_S=$SECS run attention "$B/decode_bench" /tmp/tl attention 256 512 50
run decode_b256 "$B/decode_bench" /tmp/tl decode 256 512 1500
run decode_b64 "$B/decode_bench" /tmp/tl decode 64 512 3000
echo 1500 >"$OUT/decode_b256.steps"
echo 3000 >"$OUT/decode_b64.steps"

python3 - "$OUT" <<'PY'
import os, re, sys
sys.path.insert(0, "bench/gpu")
import smi_samples
out = sys.argv[1]
print("| work | launches | ms a launch | power W | SM MHz | power-capped samples | mJ a launch |")
print("|---|---|---|---|---|---|---|")
for tag in ["gemm_qkv", "gemm_o", "gemm_gateup", "gemm_down", "gemm_lmhead", "attention",
            "decode_b256", "decode_b64"]:
    path = os.path.join(out, tag + ".out")
    if not os.path.exists(path):
        continue
    text = open(path).read()
    launches = ms = seconds = None
    m = re.search(r"LOOP .*launches=(\d+) seconds=([\d.]+) ms=([\d.]+)", text)
    if m:
        launches, seconds, ms = int(m.group(1)), float(m.group(2)), float(m.group(3))
    else:
        m = re.search(r"RESULT name=\S+ ms=([\d.]+)", text)
        steps = os.path.join(out, tag + ".steps")
        if m and os.path.exists(steps):
            ms = float(m.group(1))
            launches = int(open(steps).read())
            seconds = ms * launches / 1e3
    end = float(open(os.path.join(out, tag + ".end")).read())
    samples = smi_samples.read(os.path.join(out, tag + ".csv"))
    # The measured work: the `seconds` before the program ended, less the last 0.5 s (the
    # program's teardown may fall in them; a little of its setup may fall in the first ones).
    w = smi_samples.window(samples, end - seconds, end - 0.5) if seconds else None
    if not w or ms is None:
        print(f"| {tag} | - | {ms} | no samples in the work's window ({len(samples)} in all) | | | |")
        continue
    pw, mhz, capped, n = w
    print(f"| {tag} | {launches} | {ms:.4f} | {pw:.0f} | {mhz:.0f} | "
          f"{capped} of {n} | {pw * ms:.1f} |")
PY
