#!/usr/bin/env bash
# The GPU correctness suite of the CUDA backend, in one device call: check_cuda.py (against
# transformers and the CPU backend; every decode path), the Qwen2 biases (check_qwen2.py), then
# compute-sanitizer's memcheck and racecheck on each path. Run from the repo root on the GPU
# machine, after deploy/bundle.sh here (bundle/ carried):
#     bash tests/gpu/run.sh
# FOLIO_CHECK_GEMV8=1: check_cuda.py once more with every step of <= 8 rows through the GEMV.
# FOLIO_SANITIZE_RUN=0: no sanitizer runs. Logs go to $OUT; the PASS/FAIL lines are printed last,
# and the exit status is 1 if any check failed.
set -uo pipefail
source bench/gpu/common.sh
failed=0

echo "== models"
folio_env_report 2>&1 | tee "$OUT/env.txt"
folio_tinyllama || exit 1
folio_fixture /tmp/fx --layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 || exit 1
# head_dim 128, the kernels' other head size: 4 layers of 16 heads over 4 KV heads, and a fixture
# of 2 heads over 1.
[ -f /tmp/hd128/config.json ] || python3 bench/make_checkpoint.py /tmp/hd128 \
  --config tests/gpu/head_dim_128.json --tokenizer-dir bundle/models/llama2-tokenizer \
  --device cuda >/dev/null || exit 1
folio_fixture /tmp/fx128 --layers 2 --hidden 256 --heads 2 --kv-heads 1 --intermediate 512 --seed 5 || exit 1
# Query-head groups of 3 (not a power of two; head_dim 128, as Llama 3.2 3B) and 16.
folio_fixture /tmp/fxg3 --layers 2 --hidden 768 --heads 6 --kv-heads 2 --intermediate 512 --seed 7 || exit 1
folio_fixture /tmp/fxg16 --layers 2 --hidden 1024 --heads 16 --kv-heads 1 --intermediate 512 --seed 7 || exit 1
# A Qwen2 model (biases on Q, K and V).
[ -f /tmp/qwen2/config.json ] || python3 bench/make_checkpoint.py /tmp/qwen2 \
  --config tests/gpu/qwen2_small.json --tokenizer-dir bundle/models/llama2-tokenizer \
  --device cuda >/dev/null || exit 1

echo "== correctness"
mkdir -p "$OUT/work"
timeout 520 python3 tests/gpu/check_cuda.py "$B/step_driver" /tmp/tl /tmp/fx \
  "$OUT/work" /tmp/hd128 /tmp/fx128 /tmp/fxg3 /tmp/fxg16 2>&1 | tee "$OUT/check.log"
[ "${PIPESTATUS[0]}" = 0 ] || failed=1
timeout 120 python3 tests/gpu/check_qwen2.py "$B/step_driver" /tmp/qwen2 "$OUT/work" 2>&1 |
  tee -a "$OUT/check.log"
[ "${PIPESTATUS[0]}" = 0 ] || failed=1
rm -rf "$OUT/work"

if [ "${FOLIO_SANITIZE_RUN:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer"
  bash tests/gpu/sanitize.sh 2>&1 | tee "$OUT/sanitize.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || failed=1
fi

echo "== summary"
grep -E "^(PASS|FAIL|correctness)" "$OUT/check.log" | cut -c1-300
grep -E "^(memcheck|racecheck)" "$OUT/sanitize.txt" 2>/dev/null
echo "gpu tests: $([ $failed = 0 ] && echo PASS || echo FAIL)"
exit $failed
