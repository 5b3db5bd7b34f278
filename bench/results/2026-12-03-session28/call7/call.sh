# Session 28, call 7: power and SM clock of each kind of b256 work alone (bench/gpu/power_by_kernel.sh:
# the five GEMM shapes at 256 rows looped 3 s each, decode attention looped in a graph, b256 and
# b64 steps). Call 6's attention row had run mostly the reference kernel and with a host round
# trip after each launch; this one loops the tensor-core kernel alone.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session28/call7/call.sh
set -u
cat bundle/SOURCE.txt
timeout 150 bash bench/gpu/power_by_kernel.sh 2>&1 | tail -14
