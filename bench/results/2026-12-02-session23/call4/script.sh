# Session 23, call 4: main (f8326a8) against branch silu-vpt (decode_bench_vpt: silu_mul_norm with
# FOLIO_SILU_VPT vectors a thread, 256 threads a token at 3), 3 interleaved rounds of 100 steps;
# then the b256 timeline of vpt at 3 and 2.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench 256
vpt3_b256 decode_bench_vpt 256 FOLIO_SILU_VPT=3
vpt2_b256 decode_bench_vpt 256 FOLIO_SILU_VPT=2
vpt4_b256 decode_bench_vpt 256 FOLIO_SILU_VPT=4
vpt6_b256 decode_bench_vpt 256 FOLIO_SILU_VPT=6
main_b192 decode_bench 192
vpt3_b192 decode_bench_vpt 192 FOLIO_SILU_VPT=3
vpt2_b192 decode_bench_vpt 192 FOLIO_SILU_VPT=2
main_b160 decode_bench 160
vpt3_b160 decode_bench_vpt 160 FOLIO_SILU_VPT=3" timeout 240 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
for v in 3 2; do
  FOLIO_SILU_VPT=$v CUDA_INJECTION64_PATH=$B/libkernel_timeline.so KERNEL_TIMELINE_DETAIL=1 \
    timeout 60 "$B/decode_bench_vpt" /tmp/tl decode 256 512 50 >"$OUT/timeline_vpt${v}_b256.txt" 2>&1
  echo "== vpt $v"; grep -E '^(RESULT|TIMELINE_KERNEL)' "$OUT/timeline_vpt${v}_b256.txt" | grep -E "RESULT|silu" | cut -c1-160
done
