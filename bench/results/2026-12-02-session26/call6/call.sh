# Session 26, call 6 (branch qkv-rope-tma): QKV's TMA GEMM sums its own K slices in the last CTA of
# each head and does RoPE and the K/V cache write there (folio_k_gemm_tma_qkv_rope), so the TMA
# path (3-64 rows) runs no RoPE kernel. Steps interleaved against FOLIO_TMA_QKV_ROPE=0 (the RoPE
# kernel) at b8, b32, b64: the tokens hashes must be equal (the same bits by construction); then
# memcheck at batch 4 and 40 on the fixture, then check_cuda.py (checks 1-8) with what time is left.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session26/call6/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="fused_b8 decode_bench 8
rope_b8 decode_bench 8 FOLIO_TMA_QKV_ROPE=0
fused_b32 decode_bench 32
rope_b32 decode_bench 32 FOLIO_TMA_QKV_ROPE=0
fused_b64 decode_bench 64
rope_b64 decode_bench 64 FOLIO_TMA_QKV_ROPE=0" bash bench/gpu/compare_decode.sh 2>&1 | tail -8
FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fx --layers 2 \
  --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 >/dev/null 2>&1
for b in 4 40; do
  FOLIO_NUM_KV_BLOCKS=64 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/decode_bench" /tmp/fx decode $b 40 4 \
    >"$OUT/memcheck$b.log" 2>&1
  echo "memcheck batch $b exit $? $(grep -c 'ERROR SUMMARY: 0' "$OUT/memcheck$b.log") clean summaries"
done
timeout 150 python3 bench/gpu/check_cuda.py "$B/step_driver" /tmp/tl /tmp/fx "$OUT/work" 2>&1 |
  grep -E "^(PASS|FAIL)" | cut -c1-230
rm -rf "$OUT/work"
