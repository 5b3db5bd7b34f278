# Session 20, call 5: decode attention's splits at 65-128 rows. In calls 2-4 (kv_read_probe, b128,
# 512 keys) Folio's kernel took 26.1-26.7 us in chains against 17.1-17.4 for one-warp CTAs reading
# the same bytes unsplit; the plan splits b128 in 2 (4 warps an SM wanted, 512 (token, KV head)
# pairs). FOLIO_ATTN_WARPS_PER_SM=3 gives 1 split there (and fewer at small batches), 2 likewise.
# Steps interleaved (2 rounds, 100 steps), attention alone, then check_and_time in full with
# FOLIO_ATTN_WARPS_PER_SM=3 exported (correctness and sanitizers of that plan; its timings).
# Prepare: cmake --build build-bundle -j2 && deploy/bundle.sh && deploy/pack.sh; run with carry
# ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session20/call5/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=2 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="w4_b128 decode_bench 128
w3_b128 decode_bench 128 FOLIO_ATTN_WARPS_PER_SM=3
w2_b128 decode_bench 128 FOLIO_ATTN_WARPS_PER_SM=2
w4_b96 decode_bench 96
w3_b96 decode_bench 96 FOLIO_ATTN_WARPS_PER_SM=3
w4_b32 decode_bench 32
w3_b32 decode_bench 32 FOLIO_ATTN_WARPS_PER_SM=3
w4_b8 decode_bench 8
w3_b8 decode_bench 8 FOLIO_ATTN_WARPS_PER_SM=3
w4_b256 decode_bench 256
w3_b256 decode_bench 256 FOLIO_ATTN_WARPS_PER_SM=3" bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
for w in 4 3 2; do
  for b in 128 32; do
    FOLIO_ATTN_WARPS_PER_SM=$w $B/decode_bench /tmp/tl attention $b 512 20 | grep "RESULT name=attention" |
      sed "s/^RESULT /RESULT wps=$w /"
  done
done | tee $OUT/attention_alone.txt
mkdir -p /tmp/ct
FOLIO_ATTN_WARPS_PER_SM=3 OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= \
  FOLIO_SANITIZE_TIMEOUT=60 timeout 360 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
echo "check_and_time (FOLIO_ATTN_WARPS_PER_SM=3) rc $?"
grep -E "^FAIL|correctness:|smoke|memcheck|racecheck" $OUT/ct.log | cut -c1-200
cp /tmp/ct/check.log /tmp/ct/table.txt $OUT/ 2>/dev/null; cat /tmp/ct/table.txt
