# Session 28, call 3 (branch tma-wide-probe): where the wide TMA GEMM's time goes at m 256, alone.
# FOLIO_TMA_PROBE: 0 as is, 1 loads only (no wgmma), 2 wgmma only (no copies after the first
# ring), 3 one stage's wgmmas left in flight (wait_group 1).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session28/call3/call.sh
set -u
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$PWD/bundle/bin
cat bundle/SOURCE.txt
for p in 0 1 2 3; do
  echo "== probe $p"
  FOLIO_TMA_PROBE=$p timeout 60 "$B/gemm_tma_bench" --m 256 o:2048:2048:1 down:2048:5632:1 2>&1 |
    grep -E "RESULT name=tmapdl_" | sed "s/^/probe=$p /" | tee -a "$OUT/probe.txt"
done
