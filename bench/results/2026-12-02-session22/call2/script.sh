# Session 22, call 2: main after the swizzle-aligned merge (d1a89c4) against branch stages3 (three
# cp.async stages in one-warp decode CTAs too), kv_read_probe's folio patterns and steps; the
# split-count rows (3 attention warps an SM, the default, against 4) at b16/b14/b8/b28; then
# check_and_time in full at main. Also 2 splits at b256 (FOLIO_ATTN_WARPS_PER_SM=8: 2048 CTAs
# of 256 keys, merged by the last CTA) for both builds. And branch swal-prologue (7533c1f: the
# prologue branch merged onto main) at b256 and b64.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for r in 1 2; do
  $B/kv_read_probe 256 512 | grep -E "warp1_swizzle |folio " | sed "s/^RESULT /RESULT build=main run=$r /"
  $B/kv_read_probe_stages3 256 512 | grep -E "folio " | sed "s/^RESULT /RESULT build=stages3 run=$r /"
  $B/kv_read_probe_swpro 256 512 | grep -E "folio " | sed "s/^RESULT /RESULT build=swpro run=$r /"
done | tee $OUT/kv_read_probe.txt
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench 256
st3_b256 decode_bench_stages3 256
swpro_b256 decode_bench_swpro 256
w8_b256 decode_bench 256 FOLIO_ATTN_WARPS_PER_SM=8
st3w8_b256 decode_bench_stages3 256 FOLIO_ATTN_WARPS_PER_SM=8
main_b128 decode_bench 128
st3_b128 decode_bench_stages3 128
main_b64 decode_bench 64
st3_b64 decode_bench_stages3 64
swpro_b64 decode_bench_swpro 64
main_b1 decode_bench 1
st3_b1 decode_bench_stages3 1
w3_b16 decode_bench 16
w4_b16 decode_bench 16 FOLIO_ATTN_WARPS_PER_SM=4
w3_b14 decode_bench 14
w4_b14 decode_bench 14 FOLIO_ATTN_WARPS_PER_SM=4
w3_b8 decode_bench 8
w4_b8 decode_bench 8 FOLIO_ATTN_WARPS_PER_SM=4
w3_b28 decode_bench 28
w4_b28 decode_bench 28 FOLIO_ATTN_WARPS_PER_SM=4" timeout 230 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
mkdir -p /tmp/ct
OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 timeout 320 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
echo "check_and_time rc $?"
cp /tmp/ct/check.log /tmp/ct/table.txt $OUT/ 2>/dev/null
grep -E "^FAIL|correctness:|memcheck|racecheck|smoke" $OUT/ct.log | cut -c1-200
cat $OUT/table.txt 2>/dev/null
