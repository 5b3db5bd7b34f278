# Session 30, call 6: (1) the plan's TMA threshold below the measured sizes: steps of 160 and 144
# rows (4.8 and 4.4 CTAs an SM, TMA on) against main before the TMA kernel (decode_bench_base:
# 7957aef's build); (2) the TMA copies with an L2 evict-first cache hint (decode_bench_ef,
# kv_read_probe_ef: createpolicy.fractional.L2::evict_first on every K/V copy) at b256.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session30/call6/call.sh
set -u
head -3 bundle/SOURCE.txt
export LD_LIBRARY_PATH=$PWD/bundle/lib
for bin in kv_read_probe kv_read_probe_ef; do
  KV_PROBE_PATTERNS=folio_rope_norm_key1 timeout 60 bundle/bin/$bin 256 512 | grep RESULT |
    cut -d' ' -f2,3,5,9 | sed "s/^/$bin: /"
done
FOLIO_COMPARE_ROUNDS=5 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="new_b256 decode_bench 256
ef_b256 decode_bench_ef 256
base_b256 decode_bench_base 256
new_b160 decode_bench 160
base_b160 decode_bench_base 160
new_b144 decode_bench 144
base_b144 decode_bench_base 144" timeout 300 bash bench/gpu/compare_decode.sh 2>&1 | tail -10
