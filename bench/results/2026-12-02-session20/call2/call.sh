# Session 20, call 2: kv_read_probe with Folio's decode attention beside the load-only patterns
# (call 1: every load-only pattern read 134 MB in 35.0-35.7 us, decode_bench's attention 42.1),
# each timed alone and as a chain of 8 launches in a graph; then racecheck on the group-3 fixture
# with only Folio's kernels instrumented (an include filter: call 1's exclude of nvjet ended in an
# internal sanitizer error). Prepare: cmake --build build-bundle -j2 && deploy/bundle.sh &&
# deploy/pack.sh; run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session20/call2/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for ctx in 512 2048; do $B/kv_read_probe 256 $ctx; done | tee $OUT/kv_read_probe.txt
$B/kv_read_probe 128 512 | tee -a $OUT/kv_read_probe.txt
# check_and_time's group-3 fixture.
FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fxg3 --layers 2 \
  --hidden 768 --heads 6 --kv-heads 2 --intermediate 512 --seed 7 >/dev/null
FOLIO_NUM_KV_BLOCKS=256 timeout 120 compute-sanitizer --tool racecheck \
  --error-exitcode 9 --kernel-name \
  regex:'attention|gemm_tma|gemv|silu|rmsnorm|rope|sample|embed|penalt|combine|convert|scale_columns' \
  $B/decode_bench /tmp/fxg3 decode 4 40 2 > $OUT/racecheck_g3.log 2>&1
echo "racecheck (group 3, batch 4, Folio's kernels only) exit $? ($(grep -c 'hazard' $OUT/racecheck_g3.log) hazard lines)"
tail -4 $OUT/racecheck_g3.log
