#!/usr/bin/env bash
# One device call for the skinny tensor-core GEMM (kernels/gemm_skinny.cu): gemm_bench against
# cuBLASLt (checks, then times, at the kernel's split rule and at forced splits), the backend's
# correctness checks with FOLIO_SKINNY_GEMM=1, then decode steps with it on and off, interleaved.
# Run from the repo root on the GPU machine after deploy/bundle.sh (bundle/ carried):
#     bash bench/gpu/skinny_call.sh
# FOLIO_SKINNY_SPLIT_SWEEP (default "2 4"): forced splits gemm_bench also times;
# FOLIO_SKINNY_BATCHES (default "8 16 32 64"): decode batches compared; FOLIO_SKINNY_ENV: extra
# switches for the "on" variant.
set -uo pipefail
OUT=${OUT:-/tmp/folio-out}
mkdir -p "$OUT"
ROOT=$(pwd)
B=$ROOT/bundle/bin
export LD_LIBRARY_PATH=$ROOT/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cat bundle/SOURCE.txt
echo "== gemm_bench (kernel's split rule)"
timeout 120 "$B/gemm_bench" 2>&1 | tee "$OUT/gemm.log" | grep -vE "^RESULT" | tail -20
for s in ${FOLIO_SKINNY_SPLIT_SWEEP-2 4}; do
  FOLIO_SKINNY_SPLITS=$s timeout 120 "$B/gemm_bench" 2>&1 | sed "s/name=skinny_/name=s${s}_skinny_/" >>"$OUT/gemm.log"
done
python3 - "$OUT/gemm.log" <<'PY'
import re, sys
print("| case | skinny ms | cuBLASLt ms | ratio | GB/s | max_err | ok |")
print("|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    if not line.startswith("RESULT"):
        if "ok," in line or "failed" in line: print(line.strip())
        continue
    f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    try: r = float(f["ms"]) / float(f["ref_ms"])
    except Exception: r = float("nan")
    print(f"| {f.get('name')} | {f.get('ms')} | {f.get('ref_ms')} | {r:.2f} | {f.get('GBps')} | {f.get('max_err')} | {f.get('ok')} |")
PY
echo "== correctness with FOLIO_SKINNY_GEMM=1"
FOLIO_SKINNY_GEMM=1 FOLIO_SKIP_SERVE=1 FOLIO_SANITIZE_RUN=0 FOLIO_SKIP_TIMINGS=1 OUT=$OUT/ct \
  timeout 300 bash bench/gpu/check_and_time.sh >"$OUT/check.txt" 2>&1
grep -E "^(PASS|FAIL|correctness)" "$OUT/check.txt" | cut -c1-200
echo "== decode steps, skinny on/off"
CMP=""
for b in ${FOLIO_SKINNY_BATCHES-8 16 32 64}; do
  CMP+="off_b$b decode_bench $b"$'\n'"on_b$b decode_bench $b FOLIO_SKINNY_GEMM=1 ${FOLIO_SKINNY_ENV:-}"$'\n'
done
FOLIO_COMPARE="$CMP" FOLIO_COMPARE_ROUNDS=${FOLIO_COMPARE_ROUNDS:-2} timeout 200 bash bench/gpu/compare_decode.sh | tee "$OUT/compare.txt"
rm -rf "$OUT/ct/work"
