# Session 18 call 7, branch cluster-gemm (f2e4a37, built with -lineinfo): where folio_k_gemm_cluster's
# warps wait. Nsight Compute's full set with source on O at (64, 2) and on cuBLASLt's kernel for
# the same GEMM; the SASS lines with the most stall samples, for each.
set -u
B=$PWD/bundle/bin
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
$NCU --version | tail -1
FOLIO_BENCH_GEMM=o FOLIO_BENCH_CLUSTER_SHAPE=2 timeout 150 $NCU --clock-control none --set full --import-source yes -k regex:gemm_cluster --launch-count 1 -o /tmp/gc $B/gemm_cluster_bench 256 > $OUT/ncu_run_gc.txt 2>&1
FOLIO_BENCH_GEMM=o FOLIO_BENCH_CLUSTER_SHAPE=2 timeout 150 $NCU --clock-control none --set full -k regex:nvjet --launch-skip 1 --launch-count 1 -o /tmp/lt $B/gemm_cluster_bench 256 > $OUT/ncu_run_lt.txt 2>&1
tail -3 $OUT/ncu_run_gc.txt $OUT/ncu_run_lt.txt
for r in gc lt; do
  $NCU -i /tmp/$r.ncu-rep --page source --csv --print-source sass > $OUT/src_$r.csv 2>&1
  $NCU -i /tmp/$r.ncu-rep --page details > $OUT/details_$r.txt 2>&1
done
python3 - "$OUT" <<'PY'
import csv, sys, os, collections
out = sys.argv[1]
for r in ("gc", "lt"):
    path = os.path.join(out, f"src_{r}.csv")
    rows = list(csv.reader(open(path, errors="replace")))
    hdr = None
    for i, row in enumerate(rows):
        if any("Source" == c or "Address" in c for c in row):
            hdr, body = row, rows[i + 1:]
            break
    if not hdr:
        print(r, "no header; first lines:", rows[:3]); continue
    print("==", r, "columns:", [h for h in hdr if "Stall" in h or "Samp" in h][:8])
    scol = next((i for i, h in enumerate(hdr) if h.startswith("Warp Stall Sampling (All")), None)
    srccol = next((i for i, h in enumerate(hdr) if h == "Source"), 1)
    if scol is None:
        print("no sampling column"); continue
    tot = 0; items = []; byop = collections.Counter()
    for row in body:
        try: v = float(row[scol] or 0)
        except: continue
        tot += v; items.append((v, row[srccol][:90]))
        op = row[srccol].strip().split()
        op = op[1] if op and op[0].startswith("@") and len(op) > 1 else (op[0] if op else "?")
        byop[op.split(".")[0]] += v
    print("total samples", tot)
    for v, s in sorted(items, reverse=True)[:22]:
        print(f"{v:8.0f} {100*v/max(tot,1):5.1f}%  {s}")
    print("by opcode:", ", ".join(f"{k} {100*v/max(tot,1):.1f}%" for k, v in byop.most_common(12)))
PY
