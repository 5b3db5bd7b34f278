#!/usr/bin/env bash
# Round 6 of the CUDA decode work (2026-11-29), one device call: correctness and the standard
# timings with the split-K GEMV (each warp's share of a long row in one stretch of loads), then the
# decode attention's split target (FOLIO_ATTN_CTAS_PER_SM) and the GEMV split side by side, and an
# ncu breakdown at batch 1. Run from the repo root on the GPU machine after deploy/bundle.sh.
set -uo pipefail
export OUT=${OUT:-/tmp/folio-out}
FOLIO_PREFILL_SIZES=4096 FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 FOLIO_SKIP_SERVE=1 \
  bash bench/gpu/check_and_time.sh
echo "== attention alone by split target"
for c in 1 4 8; do
  for b in 1 8 64 256; do
    FOLIO_ATTN_CTAS_PER_SM=$c timeout 60 bundle/bin/decode_bench /tmp/tl attention $b 512 50 |
      grep "name=attention" | sed "s/name=attention_/name=attn_c${c}_/"
  done
done | tee "$OUT/attn_split.log"
FOLIO_NCU_LABELS="new_b1" FOLIO_PROFILE_CONFIGS="new_b1 1
splitk1_b1 1 FOLIO_GEMV_SPLITK=1
splitk2_b1 1 FOLIO_GEMV_SPLITK=2
splitk8_b1 1 FOLIO_GEMV_SPLITK=8
c1_b1 1 FOLIO_ATTN_CTAS_PER_SM=1
c4_b1 1 FOLIO_ATTN_CTAS_PER_SM=4
new_b2 2
splitk1_b2 2 FOLIO_GEMV_SPLITK=1
new_b8 8
c4_b8 8 FOLIO_ATTN_CTAS_PER_SM=4
c8_b8 8 FOLIO_ATTN_CTAS_PER_SM=8
new_b64 64
c4_b64 64 FOLIO_ATTN_CTAS_PER_SM=4
c8_b64 64 FOLIO_ATTN_CTAS_PER_SM=8
new_b256 256
c4_b256 256 FOLIO_ATTN_CTAS_PER_SM=4
c8_b256 256 FOLIO_ATTN_CTAS_PER_SM=8" bash bench/gpu/profile_decode.sh 2>&1 | grep -v "^RESULT" | tail -40
echo "== correctness summary"
grep -E "^(PASS|FAIL)" "$OUT/check.log" | cut -c1-220
echo "== decode step wall times (ms)"
grep RESULT "$OUT/variants.log" | sed 's/ bytes=.*hash=/ hash=/'
echo "== attention alone (ms)"
sed 's/ bytes=.*splits=/ splits=/' "$OUT/attn_split.log"
# The device tool returns at most 8 files: everything in one archive, plus the summaries.
cd "$OUT" && tar czf /tmp/round6.tgz --exclude=work . ; mv /tmp/round6.tgz . &&
  find . -maxdepth 1 -type f ! -name round6.tgz ! -name check.log ! -name variants.log \
    ! -name ncu_summary.txt ! -name table.txt ! -name attn_split.log -delete
