# Session 22, call 6: branch w-prefetch (silu_mul issues cp.async.bulk.prefetch.L2 over the down
# weights, FOLIO_W_PREFETCH=1, and the next layer's QKV weights too, =2, while it waits on
# latency) against main's build (4cea155's GPU code), steps at b256 and b128; then memcheck at b160
# with both prefetches.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench 256
wp1_b256 decode_bench_wp 256 FOLIO_W_PREFETCH=1
wp2_b256 decode_bench_wp 256 FOLIO_W_PREFETCH=2
main_b128 decode_bench 128
wp1_b128 decode_bench_wp 128 FOLIO_W_PREFETCH=1
wp2_b128 decode_bench_wp 128 FOLIO_W_PREFETCH=2" timeout 150 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
[ -f /tmp/fx/config.json ] || FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fx --layers 2 \
  --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 >/dev/null
FOLIO_W_PREFETCH=2 FOLIO_NUM_KV_BLOCKS=512 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $B/decode_bench_wp /tmp/fx decode 160 40 4 > $OUT/memcheck_wp.log 2>&1
echo "memcheck b160 FOLIO_W_PREFETCH=2: exit $? ($(grep -c 'Invalid\|ERROR' $OUT/memcheck_wp.log) error lines)"
