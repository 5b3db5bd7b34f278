# Session 18 call 8, branch sampler-profile (main's code built with -lineinfo): where sample_kernel's
# warps wait at batch 256 (Nsight Compute's stall samples per source line and per SASS line).
set -u
B=$PWD/bundle/bin
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 200 $NCU --clock-control none --set full --import-source yes --graph-profiling node --profile-from-start off -k regex:sample_kernel --launch-count 1 -o /tmp/sm $B/decode_bench /tmp/tl decode 256 512 8 > $OUT/ncu_run.txt 2>&1
tail -4 $OUT/ncu_run.txt
$NCU -i /tmp/sm.ncu-rep --page source --csv --print-source sass > $OUT/src_sass.csv 2>&1
$NCU -i /tmp/sm.ncu-rep --page source --csv --print-source cuda > $OUT/src_cuda.csv 2>&1
$NCU -i /tmp/sm.ncu-rep --page details > $OUT/details.txt 2>&1
grep -E "Duration|Grid Size|Block Size|DRAM Through|Registers|Achieved Occ|Warp Cycles Per Issued" $OUT/details.txt | head -12
python3 - "$OUT" <<'PY'
import csv, sys, os, collections
out = sys.argv[1]
for name in ("src_cuda.csv", "src_sass.csv"):
    rows = list(csv.reader(open(os.path.join(out, name), errors="replace")))
    hi = next((i for i, r in enumerate(rows) if "Source" in r), None)
    if hi is None:
        print(name, "no header:", rows[:2]); continue
    hdr, body = rows[hi], rows[hi + 1:]
    sc = hdr.index("Warp Stall Sampling (All Samples)"); src = hdr.index("Source")
    ln = hdr.index("#") if "#" in hdr else (hdr.index("Line") if "Line" in hdr else None)
    tot = sum(float(r[sc] or 0) for r in body if len(r) > sc and r[sc].replace('.', '', 1).isdigit())
    items = []
    for r in body:
        try: v = float(r[sc] or 0)
        except Exception: continue
        items.append((v, (r[ln] + ": " if ln is not None else "") + r[src].strip()[:100]))
    print("==", name, "total samples", tot)
    for v, s in sorted(items, reverse=True)[:25]:
        print(f"{v:7.0f} {100*v/max(tot,1):5.1f}%  {s}")
PY
