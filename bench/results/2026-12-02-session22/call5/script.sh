# Session 22, call 5: branch wps-split (a fourth warp an SM's worth of splits once decode attention
# splits the keys at all; plan only, kernels unchanged) against main's build at b4-b20.
set -u
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b4 decode_bench 4
wps_b4 decode_bench_wps 4
main_b8 decode_bench 8
wps_b8 decode_bench_wps 8
main_b10 decode_bench 10
wps_b10 decode_bench_wps 10
main_b12 decode_bench 12
wps_b12 decode_bench_wps 12
main_b14 decode_bench 14
wps_b14 decode_bench_wps 14
main_b16 decode_bench 16
wps_b16 decode_bench_wps 16
main_b20 decode_bench 20
wps_b20 decode_bench_wps 20" timeout 240 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
