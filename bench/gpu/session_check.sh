#!/usr/bin/env bash
# A session's closing device call: check_and_time.sh (correctness, decode/prefill/attention
# timings against the floors, PDL on and off, serve smoke, sanitizers), then GuideLLM's rate2 and
# max workloads against `folio serve --backend cuda` (bench/gpu/guidellm_bench.sh). Run from the
# repo root on the GPU machine after, here: deploy/bundle.sh, bench/fetch_guidellm_wheels.sh and
# `bash bench/gpu/guidellm_bench.sh --stage` and `deploy/pack.sh` (carry: build-pack; first
# `tar xJf build-pack/carry.tar.xz` there):
#     FOLIO_COMMIT=<sha> bash bench/gpu/session_check.sh
# check_and_time's files come back as one archive, check_and_time.tgz, beside GuideLLM's.
set -uo pipefail
export OUT=${OUT:-/tmp/folio-out}
mkdir -p "$OUT"
OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  FOLIO_COMPARE_PDL=1 bash bench/gpu/check_and_time.sh >/tmp/ct.log 2>&1
tail -48 /tmp/ct.log
cp /tmp/ct.log /tmp/ct/
tar czf "$OUT/check_and_time.tgz" -C /tmp ct
bash bench/gpu/guidellm_bench.sh --workloads "${FOLIO_GUIDELLM_WORKLOADS:-rate2,max}" \
  --budget-s "${FOLIO_GUIDELLM_BUDGET:-300}" 2>&1 | tail -30
