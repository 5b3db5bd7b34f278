# Session 19, call 3: bench/sm_partition_probe.c at 22 layers, 512 keys, partition A of 66 SMs
# (and 64, 72), against one stream on all SMs. Run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session19/call3/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for a in 66 64 72; do
  echo "== SMS_A $a"
  timeout 120 $B/sm_partition_probe 22 512 $a 2>&1 | tee $OUT/probe_$a.txt
done
