# The next session's first device call (written in session 18, not run): check_and_time in full
# at main (0206605's code is not yet timed), then the one-wave sampler (branch sampler-one-wave,
# d75911c) against it. Prepare here:
#     git checkout sampler-one-wave && cmake --build build-bundle -j2 &&
#       strip --strip-debug -o /tmp/decode_bench_onewave build-bundle/bin/decode_bench
#     git checkout main && cmake --build build-bundle -j2 && deploy/bundle.sh &&
#       cp /tmp/decode_bench_onewave bundle/bin/ && deploy/pack.sh
# then run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session18/next_call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/ct
OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 timeout 420 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
grep -E "^(PASS|FAIL)|correctness:|memcheck|racecheck|smoke" $OUT/ct.log | cut -c1-160
cp /tmp/ct/table.txt $OUT/table.txt 2>/dev/null; cat /tmp/ct/table.txt
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE="main_b256 decode_bench 256
onewave_b256 decode_bench_onewave 256
main_b160 decode_bench 160
onewave_b160 decode_bench_onewave 160" bash bench/gpu/compare_decode.sh > $OUT/compare_table.txt 2>&1
cat $OUT/compare_table.txt
# b256 timeline of main (per-kernel times for the next round's choices)
CUDA_INJECTION64_PATH=$B/libkernel_timeline.so timeout 60 $B/decode_bench /tmp/tl decode 256 512 50 > $OUT/timeline_b256.txt 2>&1
tail -40 $OUT/timeline_b256.txt
