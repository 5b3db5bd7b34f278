# Session 25, call 3: L2 prefetch of the next layer's first cache blocks after SiLU
# (FOLIO_KV_PREFETCH=blocks, kernels/kv_prefetch.cu) at b256, interleaved; timelines at 0 and 4;
# check 6 alone (the sampler paths, after call 2's missing work dir).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session25/call3.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fx --layers 2 \
  --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 >/dev/null
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="p0_b256 decode_bench 256
p2_b256 decode_bench 256 FOLIO_KV_PREFETCH=2
p4_b256 decode_bench 256 FOLIO_KV_PREFETCH=4
p8_b256 decode_bench 256 FOLIO_KV_PREFETCH=8
p16_b256 decode_bench 256 FOLIO_KV_PREFETCH=16" bash bench/gpu/compare_decode.sh 2>&1 | tail -8
for p in 0 4; do
  FOLIO_KV_PREFETCH=$p CUDA_INJECTION64_PATH=$B/libkernel_timeline.so KERNEL_TIMELINE_DETAIL=1 \
    timeout 120 "$B/decode_bench" /tmp/tl decode 256 512 50 >"$OUT/timeline_p$p.txt" 2>&1
  echo "== timeline P=$p"
  grep -E '^(TIMELINE |TIMELINE_KERNEL)' "$OUT/timeline_p$p.txt" | cut -c1-160 | head -14
done
timeout 200 python3 bench/gpu/check_cuda.py --sampling "$B/step_driver" /tmp/fx "$OUT/work" 2>&1 | tee "$OUT/check_sampling.log" | grep -E "^(PASS|FAIL)|sampling:|Error" | cut -c1-200
rm -rf "$OUT/work"
