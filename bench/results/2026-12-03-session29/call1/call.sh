# Session 29, call 1: power and SM clock of each kind of b256 work looped alone
# (bench/gpu/power_by_kernel.sh, session 28's call 7, never run), then the b256 step's kernels as
# they overlap (kernel_timeline), to see which kernels draw the 700 W and where a step's time goes.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session29/call1/call.sh
set -u
cat bundle/SOURCE.txt
timeout 150 bash bench/gpu/power_by_kernel.sh 2>&1 | tail -14
FOLIO_TIMELINE_BATCHES=256 FOLIO_LT_ARGS=skip timeout 200 bash bench/gpu/timeline_call.sh 2>&1 | tail -40
