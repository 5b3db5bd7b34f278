# Session 30, call 3: TMA decode attention with 2 stages (decode_bench, the bundle: branch attn-regs)
# and 3 stages (decode_bench_st3: TMA_ST = 3) against main (decode_bench_base: 7957aef's build).
# The kernel alone (kv_read_probe, b256 and b128 step forms), decode steps at b256, b192 and b128
# (5 interleaved rounds of 100).
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
tma3_b192 decode_bench_st3 192
base_b192 decode_bench_base 192
tma2_b128 decode_bench 128
tma3_b128 decode_bench_st3 128
base_b128 decode_bench_base 128" timeout 400 bash bench/gpu/compare_decode.sh 2>&1 | tail -13
