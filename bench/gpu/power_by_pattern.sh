#!/usr/bin/env bash
# One device call: the card's power and SM clock while kv_read_probe replays one way of reading a
# b256 decode layer's K/V (134 MB, from device memory) for a few seconds, for each pattern named.
# Session 29 found b256 steps at the 700 W cap with the GEMMs throttled (1500-1830 MHz looped alone)
# and decode attention alone at 626 W: the energy attention's copies take is the share of the cap
# that the GEMMs do not get. This asks whether another way of copying (TMA bulk copies, fewer SMs)
# moves the same bytes as fast for less power. Run from the repo root on the GPU machine after
# deploy/bundle.sh (bundle/ carried):
#     OUT=/tmp/out bash bench/gpu/power_by_pattern.sh
# FOLIO_POWER_SECONDS (default 3): how long each pattern loops; FOLIO_PATTERNS: the patterns.
set -uo pipefail
OUT=${OUT:-/tmp/folio-out}
mkdir -p "$OUT"
ROOT=$(pwd)
B=$ROOT/bundle/bin
export LD_LIBRARY_PATH=$ROOT/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PATTERNS=${FOLIO_PATTERNS:-flat,warp1_st2,warp1_ldg,seq4_st2,warp1_swizzle_read,folio_rope_norm_key1,warp1_bulk_st2,warp1_bulk_st4,ring_bulk_all,ring_bulk_half,ring_bulk_quarter}
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,power.limit --format=csv,noheader | sed 's/^/GPU /'
field=power.draw.instant
nvidia-smi --query-gpu=$field --format=csv,noheader >/dev/null 2>&1 || field=power.draw
nvidia-smi --query-gpu=timestamp,clocks.sm,$field,clocks_event_reasons.active \
  --format=csv,noheader,nounits -lms 100 >"$OUT/patterns.csv" 2>&1 &
smi=$!
sleep 0.3
KV_PROBE_PATTERNS=$PATTERNS KV_PROBE_LOOP_S=${FOLIO_POWER_SECONDS:-3} timeout 200 "$B/kv_read_probe" 256 512 \
  >"$OUT/patterns.out" 2>&1
kill $smi
wait $smi 2>/dev/null
grep -E '^(PLAN|RESULT)' "$OUT/patterns.out" | cut -c1-160

python3 - "$OUT" <<'PY'
import os, re, statistics, sys
sys.path.insert(0, "bench/gpu")
import smi_samples
out = sys.argv[1]
samples = smi_samples.read(os.path.join(out, "patterns.csv"))
idle = [s[2] for s in samples if s[2] < 200]
print(f"idle (samples under 200 W): {statistics.median(idle):.0f} W" if idle else "no idle samples")
print("| pattern | us a launch (looped) | TB/s | power W | SM MHz | capped samples | mJ a launch |")
print("|---|---|---|---|---|---|---|")
for line in open(os.path.join(out, "patterns.out")):
    m = re.match(r"LOOP pattern=(\S+) launches=(\d+) seconds=\S+ us=([\d.]+) start=([\d.]+) end=([\d.]+)", line)
    if not m:
        continue
    name, us, start, end = m.group(1), float(m.group(3)), float(m.group(4)), float(m.group(5))
    w = smi_samples.window(samples, start + 0.5, end - 0.2)
    if not w:
        print(f"| {name} | {us:.2f} | | no samples | | | |")
        continue
    pw, mhz, capped, n = w
    tbps = 2.0 * 256 * 4 * 512 * 64 * 2 / us * 1e-6
    print(f"| {name} | {us:.2f} | {tbps:.3f} | {pw:.0f} | {mhz:.0f} | {capped} of {n} | {pw * us / 1e3:.1f} |")
PY
