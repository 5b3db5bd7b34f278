# Session 25, call 4: dead buffers dropped from the L2 without write-back (FOLIO_L2_DISCARD bits:
# 1 SiLU drops gate/up's output, 2 attention drops SiLU's, 4 the sampler drops the logits),
# interleaved steps; timelines at 0 and 7 (b256).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session25/call4.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="d0_b256 decode_bench 256
d1_b256 decode_bench 256 FOLIO_L2_DISCARD=1
d2_b256 decode_bench 256 FOLIO_L2_DISCARD=2
d4_b256 decode_bench 256 FOLIO_L2_DISCARD=4
d7_b256 decode_bench 256 FOLIO_L2_DISCARD=7
d0_b128 decode_bench 128
d4_b128 decode_bench 128 FOLIO_L2_DISCARD=4
d0_b64 decode_bench 64
d4_b64 decode_bench 64 FOLIO_L2_DISCARD=4" bash bench/gpu/compare_decode.sh 2>&1 | tail -12
for d in 0 7; do
  FOLIO_L2_DISCARD=$d CUDA_INJECTION64_PATH=$B/libkernel_timeline.so KERNEL_TIMELINE_DETAIL=1 \
    timeout 120 "$B/decode_bench" /tmp/tl decode 256 512 50 >"$OUT/timeline_d$d.txt" 2>&1
  echo "== timeline FOLIO_L2_DISCARD=$d"
  grep -E '^(TIMELINE |TIMELINE_KERNEL)' "$OUT/timeline_d$d.txt" | cut -c1-150 | head -10
done
