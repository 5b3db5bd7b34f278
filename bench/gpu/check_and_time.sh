#!/usr/bin/env bash
# One device call: correctness of the CUDA backend, its timings against the card's floors, an
# end-to-end `folio serve --backend cuda` smoke, then compute-sanitizer (each step time-boxed).
# Run from the repo root on the GPU machine, after deploy/bundle.sh here (bundle/ carried):
#     bash bench/gpu/check_and_time.sh
# The backend's switches travel through the environment (FOLIO_GEMV_MAX_ROWS, FOLIO_PDL,
# FOLIO_ATTN_WARPS_PER_SM, ...): the correctness checks, timings, smoke and sanitizer runs use them.
# Logs and figures go to $OUT (default /tmp/folio-out; at most 8 files, as the device tool
# returns); the table is printed last.
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
{
  ldd "$B/step_driver" | grep -E "not found|cublas|cudart"
  # The card's identity and limits: b256 means differ by up to 3% between cards whose floors agree
  # (bench/results/2026-12-03-cuda-round33.md), so each figure names its card.
  nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu --format=csv
  env | grep -E "^FOLIO_" || true
  cat "$ROOT/bundle/SOURCE.txt" 2>/dev/null || echo "bundle/SOURCE.txt missing (bundle from an older deploy/bundle.sh)"
} 2>&1 | tee "$OUT/env.txt"

echo "== floors"
python3 bench/gpu/floors.py | tee "$OUT/floors.json"
echo "== checkpoints"
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null || exit 1
FOLIO_SHARED=$ROOT/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fx --layers 2 \
  --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 >/dev/null || exit 1
# head_dim 128, the kernels' other head size (check 9): 4 layers of 16 heads over 4 KV heads, and
# a fixture of 2 heads over 1.
python3 bench/make_checkpoint.py /tmp/hd128 --config bench/gpu/head_dim_128.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null || exit 1
FOLIO_SHARED=$ROOT/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fx128 --layers 2 \
  --hidden 256 --heads 2 --kv-heads 1 --intermediate 512 --seed 5 >/dev/null || exit 1
# Query-head groups of 3 (not a power of two; head_dim 128, as Llama 3.2 3B) and 16 (check 10).
FOLIO_SHARED=$ROOT/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fxg3 --layers 2 \
  --hidden 768 --heads 6 --kv-heads 2 --intermediate 512 --seed 7 >/dev/null || exit 1
FOLIO_SHARED=$ROOT/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fxg16 --layers 2 \
  --hidden 1024 --heads 16 --kv-heads 1 --intermediate 512 --seed 7 >/dev/null || exit 1

echo "== correctness"
# FOLIO_CHECK_GEMV8=1: once more with every step of <= 8 rows through the GEMV.
timeout 520 python3 bench/gpu/check_cuda.py "$B/step_driver" /tmp/tl /tmp/fx \
  "$OUT/work" /tmp/hd128 /tmp/fx128 /tmp/fxg3 /tmp/fxg16 2>&1 | tee "$OUT/check.log"
if [ "${FOLIO_CHECK_GEMV8:-0}" = 1 ]; then
  FOLIO_GEMV_MAX_ROWS=8 timeout 200 python3 bench/gpu/check_cuda.py \
    "$B/step_driver" /tmp/tl /tmp/fx "$OUT/work" 2>&1 | sed 's/^\(PASS\|FAIL\) /\1 [gemv<=8] /' |
    tee -a "$OUT/check.log"
fi
rm -rf "$OUT/work"

echo "== timings"
[ "${FOLIO_SKIP_TIMINGS:-0}" = 1 ] || {
  # The issue's decode figures: 1000 steps each (2 s at b256), so that they read what a card keeps
  # up (b256 steps run at the 700 W power cap); session 28's card read b256 1.9976 over 64 steps
  # and 2.018-2.025 over 1000-1500 (2026-12-03-cuda-round34.md).
  for b in 1 8 64 256; do timeout 60 "$B/decode_bench" /tmp/tl decode $b 512 1000; done
  # FOLIO_COMPARE_PDL=1: the same decode steps without programmatic dependent launch ("nopdl_").
  if [ "${FOLIO_COMPARE_PDL:-0}" = 1 ]; then
    for b in 1 8 64 256; do
      FOLIO_PDL=0 timeout 60 "$B/decode_bench" /tmp/tl decode $b 512 64 |
        sed 's/name=decode_/name=nopdl_decode_/'
    done
  fi
  for n in ${FOLIO_PREFILL_SIZES-512 4096}; do timeout 60 "$B/decode_bench" /tmp/tl prefill $n 10; done
  for b in 1 8 64 256; do timeout 60 "$B/decode_bench" /tmp/tl attention $b 512 50; done
  timeout 60 "$B/decode_bench" /tmp/tl attention 1 4096 50
  # The paths' thresholds: the same decode steps with every projection through cuBLASLt, and
  # (batches 1-2, the GEMV's) on the TMA GEMM.
  for b in ${FOLIO_CUBLAS_BATCHES-1 8}; do
    FOLIO_GEMV_MAX_ROWS=0 FOLIO_TMA_GEMM=0 timeout 60 "$B/decode_bench" /tmp/tl decode $b 512 64 |
      sed 's/name=decode_/name=cublas_decode_/'
  done
  for b in 1 2; do
    FOLIO_GEMV_MAX_ROWS=0 timeout 60 "$B/decode_bench" /tmp/tl decode $b 512 64 |
      sed 's/name=decode_/name=tma_decode_/'
  done
  timeout 60 "$B/decode_bench" /tmp/tl decode 2 512 64
} 2>&1 | tee "$OUT/timings.log"

echo "== serve smoke (folio serve --backend cuda)"
[ "${FOLIO_SKIP_SERVE:-0}" = 1 ] || timeout 150 bash bench/gpu/serve_smoke.sh /tmp/tl cuda \
  --gpu-memory-utilization 0.3 --max-num-seqs 64 2>&1 | tee "$OUT/smoke.txt" | cut -c1-400

echo "== summary"
grep -E "^(PASS|FAIL|correctness)" "$OUT/check.log" | cut -c1-300
grep -E "^serve:" "$OUT/smoke.txt" 2>/dev/null
[ -f "$OUT/timings.log" ] && python3 bench/gpu/table.py "$OUT/floors.json" "$OUT/timings.log" | tee "$OUT/table.txt"

if [ "${FOLIO_SANITIZE_RUN:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer (fixture model, prefill + graph decode)"
  FOLIO_NUM_KV_BLOCKS=64 timeout ${FOLIO_SANITIZE_TIMEOUT:-120} compute-sanitizer --tool memcheck \
    --error-exitcode 9 "$B/decode_bench" /tmp/fx decode 4 40 4 >"$OUT/sanitizer.log" 2>&1
  echo "memcheck (batch 4: TMA GEMM, QKV in K slices, attention with PDL) exit $? ($(grep -c 'Invalid\|ERROR' "$OUT/sanitizer.log") error lines)"
  FOLIO_NUM_KV_BLOCKS=64 timeout ${FOLIO_SANITIZE_TIMEOUT:-120} compute-sanitizer --tool memcheck \
    --error-exitcode 9 "$B/decode_bench" /tmp/fx decode 1 40 4 >"$OUT/memcheck1.tmp" 2>&1
  echo "memcheck (batch 1: GEMV path, PDL) exit $? ($(grep -c 'Invalid\|ERROR' "$OUT/memcheck1.tmp") error lines)"
  cat "$OUT/memcheck1.tmp" >>"$OUT/sanitizer.log"
  rm -f "$OUT/memcheck1.tmp"
  # Batch 40 (a graph of bucket 64: decode_bench sizes the backend for it):
  # the TMA + wgmma GEMM with QKV in K slices and attention launched with PDL (3-64 rows).
  FOLIO_NUM_KV_BLOCKS=256 timeout ${FOLIO_SANITIZE_TIMEOUT:-120} compute-sanitizer --tool memcheck \
    --error-exitcode 9 "$B/decode_bench" /tmp/fx decode 40 40 4 >"$OUT/memcheck40.tmp" 2>&1
  echo "memcheck (batch 40: TMA GEMM, QKV in K slices, attention with PDL) exit $? ($(grep -c 'Invalid\|ERROR' "$OUT/memcheck40.tmp") error lines)"
  cat "$OUT/memcheck40.tmp" >>"$OUT/sanitizer.log"
  rm -f "$OUT/memcheck40.tmp"
  FOLIO_NUM_KV_BLOCKS=512 timeout ${FOLIO_SANITIZE_TIMEOUT:-120} compute-sanitizer --tool memcheck \
    --error-exitcode 9 "$B/decode_bench" /tmp/fx decode 160 40 4 >"$OUT/memcheck160.tmp" 2>&1
  echo "memcheck (batch 160: cuBLASLt path, RoPE and the norms in attention and silu_mul) exit $? ($(grep -c 'Invalid\|ERROR' "$OUT/memcheck160.tmp") error lines)"
  cat "$OUT/memcheck160.tmp" >>"$OUT/sanitizer.log"
  rm -f "$OUT/memcheck160.tmp"
  # Batch 2 (GEMV path), 4 and 40 (TMA GEMM, QKV summed by RoPE).
  for rb in 2 4 40; do
    FOLIO_NUM_KV_BLOCKS=256 timeout ${FOLIO_SANITIZE_TIMEOUT:-120} compute-sanitizer --tool racecheck \
      --error-exitcode 9 "$B/decode_bench" /tmp/fx decode $rb 40 2 >"$OUT/racecheck.tmp" 2>&1
    echo "racecheck (batch $rb) exit $? ($(grep -c 'hazard\|ERROR' "$OUT/racecheck.tmp") hazard lines)"
    cat "$OUT/racecheck.tmp" >>"$OUT/sanitizer.log"
    rm -f "$OUT/racecheck.tmp"
  done
  # head_dim 128 (the fixture of check 9): the GEMV, TMA and cuBLASLt paths, and a racecheck.
  for mb in 1 4 160; do
    FOLIO_NUM_KV_BLOCKS=512 timeout ${FOLIO_SANITIZE_TIMEOUT:-120} compute-sanitizer --tool memcheck \
      --error-exitcode 9 "$B/decode_bench" /tmp/fx128 decode $mb 40 4 >"$OUT/memcheck128.tmp" 2>&1
    echo "memcheck (head_dim 128, batch $mb) exit $? ($(grep -c 'Invalid\|ERROR' "$OUT/memcheck128.tmp") error lines)"
    cat "$OUT/memcheck128.tmp" >>"$OUT/sanitizer.log"
    rm -f "$OUT/memcheck128.tmp"
  done
  FOLIO_NUM_KV_BLOCKS=256 timeout ${FOLIO_SANITIZE_TIMEOUT:-120} compute-sanitizer --tool racecheck \
    --error-exitcode 9 "$B/decode_bench" /tmp/fx128 decode 4 40 2 >"$OUT/racecheck.tmp" 2>&1
  echo "racecheck (head_dim 128, batch 4) exit $? ($(grep -c 'hazard\|ERROR' "$OUT/racecheck.tmp") hazard lines)"
  cat "$OUT/racecheck.tmp" >>"$OUT/sanitizer.log"
  rm -f "$OUT/racecheck.tmp"
  # Batch 160 (the 129-256-row path: RoPE and the norms in attention and silu_mul) on this fixture
  # and the group-3 one (check 10's, hidden 768), and the group-3 one at batch 4 (TMA path).
  # cuBLASLt's own GEMMs report hazards on these (session 27: 7 at hidden 256 and batch 160, 31
  # and 58 at hidden 768; every one in an nvjet kernel) and fail when left uninstrumented (round
  # 26), so each report is attributed to its kernel and only those in Folio's kernels fail the
  # run. 160 rows with 8 tokens of context: 76 and 96 s under racecheck (40 tokens did not finish
  # in 90 s), hence their own time limit. These three add about 200 s to the call.
  for rc_args in "fxg3 4 40 2" "fx 160 8 1" "fxg3 160 8 1"; do
    read -r model rb ctx steps <<<"$rc_args"
    FOLIO_NUM_KV_BLOCKS=512 timeout 240 compute-sanitizer --tool racecheck \
      "$B/decode_bench" "/tmp/$model" decode "$rb" "$ctx" "$steps" >"$OUT/racecheck.tmp" 2>&1
    rc=$?
    by=$(python3 bench/gpu/racecheck_by_kernel.py "$OUT/racecheck.tmp")
    echo "racecheck ($model, batch $rb) exit $rc; by kernel: exit $? ($by)"
    cat "$OUT/racecheck.tmp" >>"$OUT/sanitizer.log"
    rm -f "$OUT/racecheck.tmp"
  done
fi
