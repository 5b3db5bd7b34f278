#!/usr/bin/env bash
# One device call: correctness of the CUDA backend, then its timings against the card's floors.
# Run from the repo root on the GPU machine, after deploy/bundle.sh here (bundle/ carried):
#     bash bench/gpu/check_and_time.sh
# Logs and figures go to $OUT (default /tmp/folio-out); the table is printed last.
set -uo pipefail
OUT=${OUT:-/tmp/folio-out}
mkdir -p "$OUT/work"
ROOT=$(pwd)
B=$ROOT/bundle/bin
export LD_LIBRARY_PATH=$ROOT/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
# libcublasLt: the toolkit's, else the one PyTorch's wheels carry.
if ldd "$B/step_driver" | grep -q "not found"; then
  for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null); do
    [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
  done
fi
ldd "$B/step_driver" | grep -E "not found|cublas|cudart" | tee "$OUT/ldd.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv | tee "$OUT/gpu.txt"

echo "== floors"
python3 bench/gpu/floors.py | tee "$OUT/floors.json"
echo "== checkpoints"
python3 bench/gpu/make_checkpoint.py bundle/models/tinyllama-1.1b-shape/config.json \
  bundle/models/llama2-tokenizer /tmp/tl >/dev/null || exit 1
FOLIO_SHARED=$ROOT/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fx --layers 2 \
  --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 >/dev/null || exit 1

echo "== correctness"
timeout 300 python3 bench/gpu/check_cuda.py "$B/step_driver" /tmp/tl /tmp/fx "$OUT/work" 2>&1 |
  tee "$OUT/check.log"
rm -rf "$OUT/work"

echo "== timings"
[ "${FOLIO_SKIP_TIMINGS:-0}" = 1 ] || {
  for b in 1 8 64 256; do timeout 60 "$B/decode_bench" /tmp/tl decode $b 512 64; done
  for n in 512 4096; do timeout 60 "$B/decode_bench" /tmp/tl prefill $n 10; done
  for b in 1 8 64 256; do timeout 60 "$B/decode_bench" /tmp/tl attention $b 512 50; done
  timeout 60 "$B/decode_bench" /tmp/tl attention 1 4096 50
} 2>&1 | tee "$OUT/timings.log"

if [ "${FOLIO_SANITIZE_RUN:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer (fixture model, prefill + graph decode)"
  FOLIO_NUM_KV_BLOCKS=64 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/decode_bench" /tmp/fx decode 4 40 4 >"$OUT/memcheck.log" 2>&1
  echo "memcheck exit $? ($(grep -c 'Invalid\|ERROR' "$OUT/memcheck.log") error lines)"
  FOLIO_NUM_KV_BLOCKS=64 timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$B/decode_bench" /tmp/fx decode 2 40 2 >"$OUT/racecheck.log" 2>&1
  echo "racecheck exit $? ($(grep -c 'hazard\|ERROR' "$OUT/racecheck.log") hazard lines)"
fi

echo "== summary"
grep -E "^(PASS|FAIL|correctness)" "$OUT/check.log"
[ -f "$OUT/timings.log" ] && python3 bench/gpu/table.py "$OUT/floors.json" "$OUT/timings.log" | tee "$OUT/table.txt"
