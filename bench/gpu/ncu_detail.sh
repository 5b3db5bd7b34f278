#!/usr/bin/env bash
# One device call: Nsight Compute's detailed sections (speed of light, memory workload, occupancy,
# launch statistics, warp states, and each stall reason's warps per issued instruction) for the
# kernels of the first layer of a steady-state decode step, to see why a kernel is below the
# bandwidth. Run from the repo root on the GPU machine after
# deploy/bundle.sh (bundle/ carried):
#     bash bench/gpu/ncu_detail.sh
# FOLIO_NCU_DETAIL: lines of "LABEL BATCH KERNELS [ENV...]" (KERNELS: how many launches from the
# step's first, default below); one text report per line in $OUT/detail_LABEL.txt, and a digest
# (per kernel: duration, DRAM GB/s, achieved occupancy, top stall reasons) printed last.
set -uo pipefail
source bench/gpu/common.sh
cat "$ROOT/bundle/SOURCE.txt"
folio_tinyllama || exit 1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
CONFIGS=${FOLIO_NCU_DETAIL:-"b1 1 10
b64 64 12
b256 256 12"}
while read -r label batch count envs; do
  [ -n "$label" ] || continue
  env $envs timeout 240 "$NCU" --clock-control none --cache-control none --profile-from-start off \
    --graph-profiling node --launch-count "$count" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    "$B/decode_bench" /tmp/tl decode "$batch" 512 1 >"$OUT/detail_$label.txt" 2>&1
done <<<"$CONFIGS"
python3 - "$OUT" <<'PY'
import re, sys, glob, os
for path in sorted(glob.glob(os.path.join(sys.argv[1], "detail_*.txt"))):
    print("==", os.path.basename(path))
    text = open(path, errors="replace").read()
    blocks = re.split(r"\n  (?=\S[^\n]*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\))", text)
    for b in blocks[1:]:
        name = b.splitlines()[0].strip()[:70]
        def metric(label):
            m = re.search(r"\n\s+" + re.escape(label) + r"\s+(\S+)\s+([\d.,]+)", b)
            return f"{m.group(2)} {m.group(1)}" if m else "-"
        stalls = re.findall(r"(Stall \w[\w ]*?)\s+\S+\s+([\d.,]+)\n", b)
        print(f"{name}\n   dur {metric('Duration')} | DRAM {metric('DRAM Throughput')} | mem {metric('Memory Throughput')}"
              f" | occ {metric('Achieved Occupancy')} (theor {metric('Theoretical Occupancy')}) | grid {metric('Grid Size')}"
              f" x block {metric('Block Size')} | regs {metric('Registers Per Thread')} | waves {metric('Waves Per SM')}")
PY
