# Session 18 call 9, branch sampler-topn (0206605): the sampler's unused top-N slots filled by one
# thread, against main's build (decode_bench_main) in steps; a b256 timeline; the correctness checks
# (no timings, no smoke); then racecheck and memcheck at batch 4 if time is left.
set -u
B=$PWD/bundle/bin
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
echo "== compare"
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE="main_b256 decode_bench_main 256
topn_b256 decode_bench 256
main_b64 decode_bench_main 64
topn_b64 decode_bench 64
main_b16 decode_bench_main 16
topn_b16 decode_bench 16" bash bench/gpu/compare_decode.sh > $OUT/compare_table.txt 2>&1
cat $OUT/compare_table.txt
CUDA_INJECTION64_PATH=$B/libkernel_timeline.so timeout 60 $B/decode_bench /tmp/tl decode 256 512 50 > $OUT/timeline_b256.txt 2>&1
grep -E '^(RESULT|TIMELINE )|sample' $OUT/timeline_b256.txt | cut -c1-200
echo "== correctness"
mkdir -p /tmp/ct; OUT=/tmp/ct FOLIO_SKIP_TIMINGS=1 FOLIO_SKIP_SERVE=1 FOLIO_SANITIZE_TIMEOUT=40 timeout 150 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
grep -E "^(PASS|FAIL)|correctness:|memcheck|racecheck" $OUT/ct.log | cut -c1-160
