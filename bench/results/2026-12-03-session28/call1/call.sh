# Session 28, call 1: the TMA GEMM at 129-256 rows (64 rows a CTA, blockIdx.z the row block; O and
# down adding into the residual), alone against cuBLASLt, then in b256/b160 steps by FOLIO_TMA_WIDE
# (1 O, 2 down, 4 QKV), against main's decode_bench (23a4bd8); b64 for the carveout now set on
# the TMA GEMM; a memcheck of the new path at batch 160.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session28/call1/call.sh
set -u
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$PWD/bundle/bin
cat bundle/SOURCE.txt
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,power.limit --format=csv,noheader
echo "== alone (m 256, 160)"
for m in 256 160; do
  timeout 100 "$B/gemm_tma_bench" --m $m qkv:2560:2048:1 o:2048:2048:1 down:2048:5632:1 2>&1 |
    grep -E "RESULT name=tma(pdl|pdladd)_|failed" | tee -a "$OUT/alone.txt"
done
echo "== steps"
FOLIO_COMPARE_ROUNDS=5 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench_main 256
w0_b256 decode_bench 256
w1_b256 decode_bench 256 FOLIO_TMA_WIDE=1
w2_b256 decode_bench 256 FOLIO_TMA_WIDE=2
w3_b256 decode_bench 256 FOLIO_TMA_WIDE=3
w4_b256 decode_bench 256 FOLIO_TMA_WIDE=4
w7_b256 decode_bench 256 FOLIO_TMA_WIDE=7
main_b160 decode_bench_main 160
w0_b160 decode_bench 160
w3_b160 decode_bench 160 FOLIO_TMA_WIDE=3
w7_b160 decode_bench 160 FOLIO_TMA_WIDE=7
main_b64 decode_bench_main 64
w0_b64 decode_bench 64" timeout 330 bash bench/gpu/compare_decode.sh 2>&1 | tail -16
echo "== memcheck b160, FOLIO_TMA_WIDE=7"
FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fx --layers 2 \
  --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 >/dev/null
FOLIO_TMA_WIDE=7 FOLIO_NUM_KV_BLOCKS=512 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 \
  "$B/decode_bench" /tmp/fx decode 160 40 4 >"$OUT/memcheck160.txt" 2>&1
echo "memcheck exit $? ($(grep -c 'Invalid\|ERROR' "$OUT/memcheck160.txt") error lines)"
tail -3 "$OUT/memcheck160.txt"
