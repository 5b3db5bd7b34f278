# Session 29, call 2: power and clock while each way of reading a b256 layer's K/V runs looped
# (bench/gpu/power_by_pattern.sh: kv_read_probe's patterns, TMA bulk copies and fewer SMs added).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session29/call2/call.sh
set -u
cat bundle/SOURCE.txt
timeout 300 bash bench/gpu/power_by_pattern.sh 2>&1 | tail -45
