# A first call for the next session (not run): where QKV's fused RoPE (branch qkv-rope-tma, call 6)
# loses 2.8 us a layer at b32, from kernel timelines of the fused build and of the RoPE kernel
# (FOLIO_TMA_QKV_ROPE=0, the same binary), at b32 and b8; then b256 on this card (cross-card data).
# Here: git checkout qkv-rope-tma && deploy/bundle.sh && deploy/pack.sh (check its "a call carries"
# line), then on the device (carry ["build-pack"]):
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session26/next_call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,serial --format=csv,noheader
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
for b in 32 8; do
  for v in 1 0; do
    FOLIO_TMA_QKV_ROPE=$v CUDA_INJECTION64_PATH=$B/libkernel_timeline.so KERNEL_TIMELINE_DETAIL=1 \
      timeout 120 "$B/decode_bench" /tmp/tl decode $b 512 50 >"$OUT/timeline_b${b}_fused$v.txt" 2>&1
    echo "== b$b fused=$v"
    grep -E '^(RESULT|TIMELINE |TIMELINE_KERNEL)' "$OUT/timeline_b${b}_fused$v.txt" | cut -c1-200
  done
done
gzip "$OUT"/timeline_*.txt
for i in 1 2; do timeout 60 "$B/decode_bench" /tmp/tl decode 256 512 64 | grep RESULT; done
