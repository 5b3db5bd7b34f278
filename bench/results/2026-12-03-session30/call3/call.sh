# Session 30, call 3: TMA decode attention with 2 stages (decode_bench, the bundle: branch attn-regs)
# and 3 stages (decode_bench_st3: TMA_ST = 3) against main (decode_bench_base: 7957aef's build).
# The kernel alone (kv_read_probe, b256 and b128 step forms), decode steps at b256, b192 and b128
# (5 interleaved rounds of 100), then racecheck over whole steps at batch 160 (the TMA kernel; each
# report attributed to its kernel, as check_and_time.sh does).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session30/call3/call.sh
set -u
cat bundle/SOURCE.txt | head -3
export LD_LIBRARY_PATH=$PWD/bundle/lib
for b in 256 128; do
  for bin in kv_read_probe kv_read_probe_st3 kv_read_probe_base; do
    KV_PROBE_PATTERNS=folio_rope_norm_key1 timeout 60 bundle/bin/$bin $b 512 | grep RESULT |
      cut -d' ' -f2,3,5,9 | sed "s/^/$bin: /"
  done
done
echo "== decode steps"
FOLIO_COMPARE_ROUNDS=5 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="tma2_b256 decode_bench 256
tma3_b256 decode_bench_st3 256
base_b256 decode_bench_base 256
tma2_b192 decode_bench 192
base_b192 decode_bench_base 192
tma2_b128 decode_bench 128
tma3_b128 decode_bench_st3 128
base_b128 decode_bench_base 128" timeout 400 bash bench/gpu/compare_decode.sh 2>&1 | tail -13
echo "== racecheck (fixture, batch 160: the TMA kernel)"
FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fx --layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 >/dev/null 2>&1 ||
  echo "fixture: failed"
FOLIO_NUM_KV_BLOCKS=512 timeout 240 compute-sanitizer --tool racecheck \
  bundle/bin/decode_bench /tmp/fx decode 160 8 1 >$OUT/racecheck160.log 2>&1
rc=$?
echo "racecheck (fx, batch 160) exit $rc; by kernel: $(python3 bench/gpu/racecheck_by_kernel.py $OUT/racecheck160.log)"
