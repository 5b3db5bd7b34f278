# The next session's first device call (written in session 24, not run): Nsight Compute on three
# b256 kernels of a steady-state step, chosen by name (decode_bench starts the profiler after its
# warm-up steps, so --profile-from-start off skips the prefill launches that made rounds 29's
# launch indices miss):
# - sample_kernel: 19.9 us whether its logits are f32 or bf16 (round 30), so neither their bytes
#   nor its waves bound it. Which stall is it?
# - the O and down GEMMs (nvjet ... badd): is the L2 -> SM traffic what bounds cuBLASLt's small
#   GEMMs at 256 rows (round 30's estimate: about 2 us a GEMM of ramp and epilogue, the rest at
#   10-13 TB/s of L2 reads)? lts__t_sectors_srcunit_tex_op_read and the L2 throughput say.
# - decode attention: DRAM throughput and stalls at today's 37-41 us.
# Build here: deploy/bundle.sh && deploy/pack.sh; run with carry ["build-pack"]:
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session24/next_call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
# The sampler alone (decode_bench's sample mode, session 24, not yet run on a GPU): hot in L2
# against freshly written behind a 256 MB read stream says whether its 19.9 us are memory or latency.
for rows in 256 128 64 16; do timeout 60 "$B/decode_bench" /tmp/tl sample $rows 20 2>&1 | grep -E "RESULT|CHECK|decode_bench"; done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for spec in "sampler regex:^sample_kernel 1" "gemm_badd regex:nvjet.*badd 2" "attention regex:attention_decode 1"; do
  set -- $spec
  timeout 200 "$NCU" --clock-control none --cache-control none --profile-from-start off \
    --graph-profiling node -k "$2" --launch-count "$3" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --metrics "lts__t_sectors_srcunit_tex_op_read.sum,lts__t_bytes.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    "$B/decode_bench" /tmp/tl decode 256 512 5 >"$OUT/ncu_$1.txt" 2>&1
  echo "== $1 rc $?"
  grep -E "^  [a-z_]|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|xbar2l1tex_read_bytes|lts__t_bytes|lts__t_sectors_srcunit|Stall (Long|Short|Wait|Barrier|Math|Not Sel|LG|MIO)" "$OUT/ncu_$1.txt" | cut -c1-150 | head -40
done
