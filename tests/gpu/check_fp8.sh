#!/usr/bin/env bash
# --quantization fp8 on the GPU (issue 55), in one device call from the repo root with bundle/
# carried (deploy/bundle.sh folio folio-scheduler folio-worker folio-frontend step_driver
# decode_bench): the CUDA worker's FP8 logits against the CPU backend's emulation and against
# bf16 on the fixture and the TinyLlama shape (tests/gpu/check_fp8.py), then decode_bench's
# decode and prefill timings with and without fp8 (and fp8 with every product on cuBLASLt, the
# yardstick of the FP8 GEMV), and decode at b1 to b64 (fp8 each side of where its GEMV path
# ends) and prefill 2048 on the Llama-3-8B shape. Logs and RESULT lines in $OUT; exit 1 if a check failed.
set -uo pipefail
source bench/gpu/common.sh
failed=0
folio_env_report 2>&1 | tee "$OUT/env.txt"
folio_fixture /tmp/fx --layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 || exit 1
folio_tinyllama || exit 1

echo "== fp8 logits"
for m in /tmp/fx /tmp/tl; do
  timeout 500 python3 tests/gpu/check_fp8.py "$B/step_driver" "$m" /tmp/fp8-work 2>&1 |
    tee -a "$OUT/check_fp8.log"
  [ "${PIPESTATUS[0]}" = 0 ] || failed=1
done

echo "== fp8 timings (TinyLlama shape; ms per step, bytes: the weights' floor)"
for q in none fp8; do
  for b in 1 8 64; do
    timeout 120 "$B/decode_bench" --quantization "$q" /tmp/tl decode "$b" 512 64 2>&1 |
      sed "s/^RESULT /RESULT quant=$q /" | tee -a "$OUT/fp8_bench.txt"
  done
  timeout 120 "$B/decode_bench" --quantization "$q" /tmp/tl prefill 2048 5 2>&1 |
    sed "s/^RESULT /RESULT quant=$q /" | tee -a "$OUT/fp8_bench.txt"
done
timeout 120 "$B/decode_bench" --quantization fp8 --paths gemv_max_rows=0 /tmp/tl decode 1 512 64 \
  2>&1 | sed "s/^RESULT /RESULT quant=fp8-cublaslt /" | tee -a "$OUT/fp8_bench.txt"

echo "== fp8 timings (Llama-3-8B shape, issue 55's floors: decode b1 within 1.15x of the weights' bytes)"
if folio_llama3_8b; then
  for q in fp8 none; do
    for b in 1 2 4 8 64; do
      [ "$q" = none ] && [ "$b" -gt 1 ] && [ "$b" -lt 8 ] && continue
      timeout 150 "$B/decode_bench" --quantization "$q" "$L8" decode "$b" 512 32 2>&1 |
        sed "s/^RESULT /RESULT 8b quant=$q /" | tee -a "$OUT/fp8_bench.txt"
    done
    timeout 150 "$B/decode_bench" --quantization "$q" "$L8" prefill 2048 3 2>&1 |
      sed "s/^RESULT /RESULT 8b quant=$q /" | tee -a "$OUT/fp8_bench.txt"
  done
  # Where the FP8 GEMV path ends (FOLIO_K_GEMV_QUANT_MAX_ROWS, 4): 4 rows on cuBLASLt too.
  timeout 150 "$B/decode_bench" --quantization fp8 --paths gemv_max_rows=2 "$L8" decode 4 512 32 \
    2>&1 | sed "s/^RESULT /RESULT 8b quant=fp8-cublaslt /" | tee -a "$OUT/fp8_bench.txt"
else
  echo "the 8B checkpoint could not be written" | tee -a "$OUT/fp8_bench.txt"
  failed=1
fi

echo "== summary"
grep -E "^(PASS|FAIL|note)" "$OUT/check_fp8.log" | cut -c1-300
grep -E "^RESULT" "$OUT/fp8_bench.txt"
echo "fp8 gpu check: $([ $failed = 0 ] && echo PASS || echo FAIL)"
exit $failed
