# Session 28, call 2: the wide TMA GEMM with a 13-stage ring (one CTA an SM where they fit), the
# residual read before the K walk: alone at m 256 against cuBLASLt, then b256 steps by
# FOLIO_TMA_WIDE against main's decode_bench (23a4bd8), and b64 (the carveout setting dropped).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session28/call2/call.sh
set -u
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$PWD/bundle/bin
cat bundle/SOURCE.txt
echo "== alone (m 256)"
timeout 100 "$B/gemm_tma_bench" --m 256 qkv:2560:2048:1 o:2048:2048:1 down:2048:5632:1 2>&1 |
  grep -E "RESULT name=tma(pdl|pdladd)_|failed" | tee -a "$OUT/alone.txt"
echo "== steps"
FOLIO_COMPARE_ROUNDS=5 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench_main 256
w0_b256 decode_bench 256
w1_b256 decode_bench 256 FOLIO_TMA_WIDE=1
w2_b256 decode_bench 256 FOLIO_TMA_WIDE=2
w3_b256 decode_bench 256 FOLIO_TMA_WIDE=3
main_b64 decode_bench_main 64
w0_b64 decode_bench 64" timeout 200 bash bench/gpu/compare_decode.sh 2>&1 | tail -10
