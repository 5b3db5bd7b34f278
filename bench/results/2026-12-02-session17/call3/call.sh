# Session 17 call 3: folio_k_gemm_glu_norm alone (gemm_glu_bench) and in steps, the sampler's
# cached-row passes, correctness. decode_bench_head: HEAD's build; decode_bench: this tree.
set -u
B=$PWD/bundle/bin
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
echo "== gemm_glu_bench"
timeout 120 $B/gemm_glu_bench 256 192 160 129 8 2>&1 | tee $OUT/glu_bench.txt
echo "== compare"
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE="head_b256 decode_bench_head 256
samp_b256 decode_bench 256 FOLIO_GLU_NORM=0
glu_b256 decode_bench 256
head_b192 decode_bench_head 192
glu_b192 decode_bench 192
head_b160 decode_bench_head 160
glu_b160 decode_bench 160
head_b64 decode_bench_head 64
samp_b64 decode_bench 64" bash bench/gpu/compare_decode.sh > $OUT/compare_table.txt 2>&1
cat $OUT/compare_table.txt
CUDA_INJECTION64_PATH=$B/libkernel_timeline.so timeout 120 $B/decode_bench /tmp/tl decode 256 512 50 > $OUT/timeline_b256.txt 2>&1
grep -E '^(RESULT|TIMELINE |TIMELINE_KERNEL)' $OUT/timeline_b256.txt | cut -c1-160
echo "== check_and_time (no timings)"
mkdir -p /tmp/ct; OUT=/tmp/ct FOLIO_SKIP_TIMINGS=1 FOLIO_SANITIZE_TIMEOUT=60 timeout 400 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
grep -E "^(PASS|FAIL)|correctness:|memcheck|racecheck|smoke" $OUT/ct.log | cut -c1-300
