# Session 18 call 1, on branch glu-norm (abd0deb): folio_k_gemm_glu_norm's flags 0-3 alone and in
# steps; and main + the L2 logits window (branch l2-logits, built as decode_bench_l2; with
# FOLIO_L2_LOGITS=0 it is main's code path).
set -u
B=$PWD/bundle/bin
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
echo "== gemm_glu_bench"
timeout 150 $B/gemm_glu_bench 256 192 129 8 2>&1 | tee $OUT/glu_bench.txt | tail -40
echo "== L2 window probe"
FOLIO_L2_LOGITS=1 timeout 60 $B/decode_bench_l2 /tmp/tl decode 256 512 20 2>&1 | grep -E "L2|RESULT" | cut -c1-200
echo "== compare"
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE="main_b256 decode_bench_l2 256 FOLIO_L2_LOGITS=0
l2_b256 decode_bench_l2 256
two_kernels_b256 decode_bench 256 FOLIO_GLU_NORM=0
glu_f0_b256 decode_bench 256 FOLIO_GLU_FLAGS=0
glu_f2_b256 decode_bench 256 FOLIO_GLU_FLAGS=2
glu_f3_b256 decode_bench 256 FOLIO_GLU_FLAGS=3
main_b64 decode_bench_l2 64 FOLIO_L2_LOGITS=0
l2_b64 decode_bench_l2 64" bash bench/gpu/compare_decode.sh > $OUT/compare_table.txt 2>&1
cat $OUT/compare_table.txt
for v in 0 1; do
  FOLIO_L2_LOGITS=$v CUDA_INJECTION64_PATH=$B/libkernel_timeline.so timeout 120 $B/decode_bench_l2 /tmp/tl decode 256 512 50 > $OUT/timeline_l2_$v.txt 2>&1
  echo "-- timeline FOLIO_L2_LOGITS=$v"; grep -E '^(RESULT|TIMELINE )' $OUT/timeline_l2_$v.txt | cut -c1-200
  grep -E "^TIMELINE_KERNEL" $OUT/timeline_l2_$v.txt | cut -c1-220 | head -20
done
