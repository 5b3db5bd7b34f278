# Session 25, call 1 (session 24's next_call.sh, trimmed): the sampler alone hot and fresh at
# 256/128/64/16 rows; attention alone at b256; Nsight Compute on the b256 sampler and attention.
# Build here: deploy/bundle.sh && deploy/pack.sh; run with carry ["build-pack"]:
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session25/call1.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
for rows in 256 128 64 16; do timeout 60 "$B/decode_bench" /tmp/tl sample $rows 20 2>&1 | grep -E "RESULT|CHECK|decode_bench"; done | tee "$OUT/sample.txt"
timeout 60 "$B/decode_bench" /tmp/tl attention 256 512 20 2>&1 | grep RESULT | tee "$OUT/attention.txt"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for spec in "sampler regex:^sample_kernel 1" "attention regex:attention_decode 1"; do
  set -- $spec
  timeout 200 "$NCU" --clock-control none --cache-control none --profile-from-start off \
    --graph-profiling node -k "$2" --launch-count "$3" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --metrics "lts__t_sectors_srcunit_tex_op_read.sum,lts__t_bytes.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    "$B/decode_bench" /tmp/tl decode 256 512 5 >"$OUT/ncu_$1.txt" 2>&1
  echo "== $1 rc $?"
  grep -E "^  [a-z_]|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|xbar2l1tex_read_bytes|lts__t_bytes|lts__t_sectors_srcunit|Stall (Long|Short|Wait|Barrier|Math|Not Sel|LG|MIO)|stalled_(long|short|wait|barrier|lg|mio|math|no_inst|branch|dispatch|drain|membar|sleep|selected|not_sel).*ratio" "$OUT/ncu_$1.txt" | cut -c1-150 | head -45
done
