# Session 22, call 3: branch kv-prefetch (silu_mul issues cp.async.bulk.prefetch.L2 of the next
# layer's first FOLIO_KV_PREFETCH_BLOCKS cache blocks of each sequence's K and V, so that decode
# attention finds them in L2; FOLIO_KV_PREFETCH_LAST=1 with the evict_last priority) against
# main's build, steps at b256 and b128 (3 rounds of 100), then memcheck at b160 with prefetches.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench 256
pf0_b256 decode_bench_pf 256
pf2_b256 decode_bench_pf 256 FOLIO_KV_PREFETCH_BLOCKS=2
pf4_b256 decode_bench_pf 256 FOLIO_KV_PREFETCH_BLOCKS=4
pf8_b256 decode_bench_pf 256 FOLIO_KV_PREFETCH_BLOCKS=8
pf4L_b256 decode_bench_pf 256 FOLIO_KV_PREFETCH_BLOCKS=4 FOLIO_KV_PREFETCH_LAST=1
pf8L_b256 decode_bench_pf 256 FOLIO_KV_PREFETCH_BLOCKS=8 FOLIO_KV_PREFETCH_LAST=1
pf16L_b256 decode_bench_pf 256 FOLIO_KV_PREFETCH_BLOCKS=16 FOLIO_KV_PREFETCH_LAST=1
main_b128 decode_bench 128
pf4_b128 decode_bench_pf 128 FOLIO_KV_PREFETCH_BLOCKS=4
pf8L_b128 decode_bench_pf 128 FOLIO_KV_PREFETCH_BLOCKS=8 FOLIO_KV_PREFETCH_LAST=1
pf16L_b128 decode_bench_pf 128 FOLIO_KV_PREFETCH_BLOCKS=16 FOLIO_KV_PREFETCH_LAST=1" timeout 240 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
[ -f /tmp/fx/config.json ] || FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fx --layers 2 \
  --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 >/dev/null
for e in "FOLIO_KV_PREFETCH_BLOCKS=8" "FOLIO_KV_PREFETCH_BLOCKS=8 FOLIO_KV_PREFETCH_LAST=1"; do
  env $e FOLIO_NUM_KV_BLOCKS=512 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 \
    $B/decode_bench_pf /tmp/fx decode 160 40 4 > $OUT/memcheck_pf.log 2>&1
  echo "memcheck b160 $e: exit $? ($(grep -c 'Invalid\|ERROR' $OUT/memcheck_pf.log) error lines)"
done
