# Session 18 call 5, branch sampler-vec (4ca542e): the sampler's 16-byte loads against main's
# build (decode_bench_main, bdad199's code) in steps, a b256 timeline, then check_and_time in full
# (timings, correctness, smoke, sanitizers).
set -u
B=$PWD/bundle/bin
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
echo "== compare"
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE="main_b256 decode_bench_main 256
vec_b256 decode_bench 256
main_b64 decode_bench_main 64
vec_b64 decode_bench 64
main_b16 decode_bench_main 16
vec_b16 decode_bench 16
main_b64t decode_bench_main 64 FOLIO_BENCH_TEMPERATURE=0.8
vec_b64t decode_bench 64 FOLIO_BENCH_TEMPERATURE=0.8" bash bench/gpu/compare_decode.sh > $OUT/compare_table.txt 2>&1
cat $OUT/compare_table.txt
CUDA_INJECTION64_PATH=$B/libkernel_timeline.so timeout 120 $B/decode_bench /tmp/tl decode 256 512 50 > $OUT/timeline_b256.txt 2>&1
grep -E '^(RESULT|TIMELINE |TIMELINE_KERNEL)' $OUT/timeline_b256.txt | cut -c1-200
echo "== check_and_time"
mkdir -p /tmp/ct; OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 timeout 420 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
grep -E "^(PASS|FAIL)|correctness:|memcheck|racecheck|smoke" $OUT/ct.log | cut -c1-200
cp /tmp/ct/table.txt $OUT/table.txt 2>/dev/null; cat /tmp/ct/table.txt
