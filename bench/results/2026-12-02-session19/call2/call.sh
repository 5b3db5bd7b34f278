# Session 19, call 2: how a cuBLASLt GEMM's time at 64-256 rows splits into a fixed part and a
# part that grows with the bytes each CTA copies in. The heuristic's first choice only (--max 1),
# O's shape with K from 1024 to 8192, N from 1024 to 8192, and TinyLlama's four projections,
# each at m 64, 128, 192, 256. Timed as lt_algos_bench times (20 launches in a graph, weights from
# device memory). Run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session19/call2/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv
timeout 300 $B/lt_algos_bench --m 64,128,192,256 --max 1 \
  k1024:2048:1024 k2048:2048:2048 k4096:2048:4096 k8192:2048:8192 \
  n1024:1024:2048 n4096:4096:2048 n8192:8192:2048 \
  qkv:2560:2048 down:2048:5632 gateup:11264:2048 > $OUT/lt.txt 2>&1
echo "rc $?"
grep -E "^RESULT" $OUT/lt.txt | sed -E 's/ (tflops|ratio|id|stages|splitk|red|swizzle|custom|ws|ok)=[^ ]*//g' | cut -c1-170
