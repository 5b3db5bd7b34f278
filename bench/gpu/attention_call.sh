set -uo pipefail
B=bundle/bin; export LD_LIBRARY_PATH=$PWD/bundle/lib
cat bundle/SOURCE.txt
C=""
for b in 1 8 64 256; do C+="new_b$b decode_bench $b"$'\n'"old_b$b decode_bench_base $b"$'\n'; done
C+="new_b64_w1s8 decode_bench 64 FOLIO_ATTN_CTA_WARPS=1 FOLIO_ATTN_WARPS_PER_SM=8"$'\n'
FOLIO_COMPARE="$C" FOLIO_COMPARE_ROUNDS=2 bash bench/gpu/compare_decode.sh 2>&1 | tail -12
for b in 1 8 64 256; do for bin in decode_bench decode_bench_base; do timeout 60 $B/$bin /tmp/tl attention $b 512 50 | grep RESULT | sed "s/^/$bin /" | cut -c1-200; done; done
for bin in decode_bench decode_bench_base; do timeout 60 $B/$bin /tmp/tl prefill 4096 10 | grep RESULT | sed "s/^/$bin /" | cut -c1-200; done
FOLIO_SKIP_SERVE=1 FOLIO_SANITIZE_RUN=0 FOLIO_SKIP_TIMINGS=1 OUT=/tmp/ct timeout 300 bash bench/gpu/check_and_time.sh > /tmp/ct.log 2>&1
grep -E "^(PASS|FAIL|correctness)" /tmp/ct/check.log | cut -c1-160
cp /tmp/ct.log $OUT/
