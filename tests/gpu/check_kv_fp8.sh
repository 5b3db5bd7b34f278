#!/usr/bin/env bash
# --kv-cache-dtype fp8 on the GPU (issue 55), in one device call from the repo root with bundle/
# carried (deploy/bundle.sh folio folio-scheduler folio-worker folio-frontend step_driver
# decode_bench): the CUDA worker's logits with the e4m3 cache against the CPU backend's emulation
# and against the bf16 cache on the fixture, graphs and eager, decode, prefill and verify steps
# (tests/gpu/check_kv_fp8.py), the pool's blocks doubling, then decode_bench's decode at long
# context with each cache on the fixture (a smoke run of the kernels at many tiles and splits).
# Logs in $OUT; exit 1 if a check failed.
set -uo pipefail
source bench/gpu/common.sh
failed=0
folio_env_report 2>&1 | tee "$OUT/env.txt"
folio_fixture /tmp/fx --layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 || exit 1

echo "== fp8 KV cache logits"
timeout 400 python3 tests/gpu/check_kv_fp8.py "$B/step_driver" /tmp/fx /tmp/kv8-work 2>&1 |
  tee "$OUT/check_kv_fp8.log"
[ "${PIPESTATUS[0]}" = 0 ] || failed=1

echo "== decode at long context, each cache (fixture; ms per step)"
for d in auto fp8; do
  for b in 1 64; do
    timeout 60 "$B/decode_bench" --kv-cache-dtype "$d" /tmp/fx decode "$b" 1536 32 2>&1 |
      sed "s/^RESULT /RESULT kv=$d /" | tee -a "$OUT/kv_fp8_bench.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || failed=1
  done
done

echo "== summary"
grep -E "^(PASS|FAIL)" "$OUT/check_kv_fp8.log" | cut -c1-300
grep -E "^RESULT" "$OUT/kv_fp8_bench.txt"
echo "kv fp8 gpu check: $([ $failed = 0 ] && echo PASS || echo FAIL)"
exit $failed
