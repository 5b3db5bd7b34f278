# Session 19, call 6: query-head groups that are not a power of two on the tensor-core attention
# kernels (mma_shape_ok now takes any group up to 16). Check 10 alone (CPU vs CUDA on every decode
# path, groups of 3 at head_dim 128 and of 16), decode_bench's attention mode (the decode kernel
# against the reference kernel: its CHECK line and both times) at b256 over 512 keys, and
# memcheck / racecheck on the group-3 fixture. Run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session19/call6/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fxg3 --layers 2 \
  --hidden 768 --heads 6 --kv-heads 2 --intermediate 512 --seed 7 >/dev/null || exit 1
FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fxg16 --layers 2 \
  --hidden 1024 --heads 16 --kv-heads 1 --intermediate 512 --seed 7 >/dev/null || exit 1
mkdir -p /tmp/work
timeout 150 python3 bench/gpu/check_cuda.py --groups $B/step_driver /tmp/work /tmp/fxg3 /tmp/fxg16 \
  > $OUT/groups.log 2>&1
echo "check 10 rc $?"
sed -E 's/; CPU-sampler port.*//' $OUT/groups.log | cut -c1-300
for fx in fxg3 fxg16; do
  timeout 60 $B/decode_bench /tmp/$fx attention 256 512 20 2>&1 | tee -a $OUT/attention.log
done
FOLIO_NUM_KV_BLOCKS=512 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $B/decode_bench /tmp/fxg3 decode 4 40 4 > $OUT/memcheck4.log 2>&1
echo "memcheck (group 3, batch 4) exit $? $(grep -c 'Invalid' $OUT/memcheck4.log) invalid"
FOLIO_NUM_KV_BLOCKS=512 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $B/decode_bench /tmp/fxg3 decode 160 40 4 > $OUT/memcheck160.log 2>&1
echo "memcheck (group 3, batch 160) exit $? $(grep -c 'Invalid' $OUT/memcheck160.log) invalid"
FOLIO_NUM_KV_BLOCKS=256 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $B/decode_bench /tmp/fxg3 decode 4 40 2 > $OUT/racecheck4.log 2>&1
echo "racecheck (group 3, batch 4) exit $? $(grep -c 'hazard' $OUT/racecheck4.log) hazard lines"
