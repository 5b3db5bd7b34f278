# Session 30, call 4: check_and_time at the landed code (TMA decode attention where plan.tma says),
# without the sanitizer runs (memcheck and racecheck of the TMA kernel at batch 160: calls 2 and 3),
# then b256 steps against main before the change (decode_bench_base: 7957aef's build).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session30/call4/call.sh
set -u
head -3 bundle/SOURCE.txt
OUT=$OUT/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_RUN=0 \
  timeout 420 bash bench/gpu/check_and_time.sh >$OUT/ct.log 2>&1
sed -n '/== summary/,$p' $OUT/ct.log | cut -c1-200
export LD_LIBRARY_PATH=$PWD/bundle/lib
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="new_b256 decode_bench 256
base_b256 decode_bench_base 256
new_b128 decode_bench 128
base_b128 decode_bench_base 128" timeout 90 bash bench/gpu/compare_decode.sh 2>&1 | tail -6
