#!/usr/bin/env bash
# GGUF weights kept packed on the GPU (issue 55), in one device call from the repo root with
# bundle/ carried (deploy/bundle.sh folio folio-scheduler folio-worker folio-frontend
# step_driver decode_bench): the packed logits against the bf16 copy and the CPU's f32
# reference on a fixture of every packed type (tests/gpu/check_gguf_packed.py), then
# decode_bench's decode and prefill timings, packed and bf16 copy, on a TinyLlama-shaped GGUF
# of random Q4_0 (and Q4_K) blocks and decode on a Llama-3-8B-shaped Q4_0 one (issue 55's
# floor: b1 within 1.3x of the blocks' bytes). The files are written here by
# tests/fixtures/make_gguf_packed.py (NumPy only); the fixture twice, its layers mixed (the
# packed GEMV) and all Q4_0 (decode on the fused GEMV path). Logs and RESULT lines in $OUT; exit 1 if a
# check failed.
set -uo pipefail
source bench/gpu/common.sh
failed=0
folio_env_report 2>&1 | tee "$OUT/env.txt"
mk() { [ -f "$1" ] || python3 tests/fixtures/make_gguf_packed.py "$@" || exit 1; }
mk /tmp/gguf-fx.gguf
mk /tmp/gguf-fx-q4_0.gguf --type Q4_0
mk /tmp/gguf-tl-q4_0.gguf --shape tinyllama --type Q4_0
mk /tmp/gguf-tl-q4_k.gguf --shape tinyllama --type Q4_K

echo "== packed logits"
for f in /tmp/gguf-fx.gguf /tmp/gguf-fx-q4_0.gguf; do
  timeout 300 python3 tests/gpu/check_gguf_packed.py "$B/step_driver" "$f" /tmp/gguf-work 2>&1 |
    tee -a "$OUT/check_gguf_packed.log"
  [ "${PIPESTATUS[0]}" = 0 ] || failed=1
done

echo "== timings (TinyLlama shape; ms per step, bytes: the weights' floor)"
bench() { # LABEL FILE [--paths gguf_bf16] MODE ARGS...
  local label=$1 file=$2 opts=()
  shift 2
  [ "$1" = --paths ] && opts=("$1" "$2") && shift 2
  timeout 120 "$B/decode_bench" "${opts[@]}" "$file" "$@" 2>&1 |
    sed "s/^RESULT /RESULT w=$label /" | tee -a "$OUT/gguf_bench.txt"
}
for b in 1 8; do
  bench q4_0-packed /tmp/gguf-tl-q4_0.gguf decode "$b" 512 64
  bench q4_0-bf16 /tmp/gguf-tl-q4_0.gguf --paths gguf_bf16 decode "$b" 512 64
  bench q4_k-packed /tmp/gguf-tl-q4_k.gguf decode "$b" 512 64
done
bench q4_0-packed /tmp/gguf-tl-q4_0.gguf decode 4 512 64
bench q4_0-packed /tmp/gguf-tl-q4_0.gguf prefill 2048 5
bench q4_0-bf16 /tmp/gguf-tl-q4_0.gguf --paths gguf_bf16 prefill 2048 5
mk /tmp/gguf-8b-q4_0.gguf --shape llama3-8b --type Q4_0
for b in 1 4; do bench 8b-q4_0-packed /tmp/gguf-8b-q4_0.gguf decode "$b" 512 32; done
bench 8b-q4_0-bf16 /tmp/gguf-8b-q4_0.gguf --paths gguf_bf16 decode 1 512 32

echo "== summary"
grep -E "^(PASS|FAIL|log)" "$OUT/check_gguf_packed.log" | cut -c1-300
grep -E "^RESULT" "$OUT/gguf_bench.txt"
echo "gguf packed gpu check: $([ $failed = 0 ] && echo PASS || echo FAIL)"
exit $failed
