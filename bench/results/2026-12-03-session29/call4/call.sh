# Session 29, call 4: check_and_time in full at the landed change (decode attention's new key from
# registers on the RoPE path), decode figures over 1000 steps.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session29/call4/call.sh
set -u
cat bundle/SOURCE.txt
OUT=$OUT/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  timeout 590 bash bench/gpu/check_and_time.sh 2>&1 | tail -40
