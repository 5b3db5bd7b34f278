# Session 28, call 5: session 27's next_call.sh, check_and_time in full at main (23a4bd8's GPU code,
# the wide-GEMM experiment reverted), so that its final racecheck form runs once as a whole; the
# figures of this call's card. About 570 s: alone in a call.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session28/call5/call.sh
set -u
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cat bundle/SOURCE.txt
bash bench/results/2026-12-03-session27/next_call.sh
