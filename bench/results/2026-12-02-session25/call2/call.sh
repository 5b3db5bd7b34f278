# Session 25, call 2: sample_rows (branch sample-rows). The sampler alone on both paths (greedy
# and tempered); check 6 of check_cuda.py alone (CPU vs CUDA sampling, 3 and 12 rows); decode
# steps interleaved, the new path against FOLIO_SAMPLE_SPLIT=0 (sample.cu's kernel alone: main's
# path above 8 rows).
#   deploy/bundle.sh && deploy/pack.sh; carry ["build-pack"]:
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session25/call2.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fx --layers 2 \
  --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 >/dev/null
{
for rows in 256 128 64 16 9; do timeout 60 "$B/decode_bench" /tmp/tl sample $rows 20 2>&1 | grep -E "RESULT|CHECK|decode_bench"; done
for rows in 256 64; do FOLIO_BENCH_TEMPERATURE=1 timeout 60 "$B/decode_bench" /tmp/tl sample $rows 20 2>&1 | grep -E "RESULT|CHECK|decode_bench"; done
} | tee "$OUT/sample.txt"
timeout 200 python3 bench/gpu/check_cuda.py --sampling "$B/step_driver" /tmp/fx "$OUT/work" 2>&1 | tee "$OUT/check_sampling.log" | grep -E "^(PASS|FAIL)|sampling:" | cut -c1-220
rm -rf "$OUT/work"
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="rows_b256 decode_bench 256
one_b256 decode_bench 256 FOLIO_SAMPLE_SPLIT=0
rows_b128 decode_bench 128
one_b128 decode_bench 128 FOLIO_SAMPLE_SPLIT=0
rows_b64 decode_bench 64
one_b64 decode_bench 64 FOLIO_SAMPLE_SPLIT=0
rowsT_b256 decode_bench 256 FOLIO_BENCH_TEMPERATURE=1
oneT_b256 decode_bench 256 FOLIO_BENCH_TEMPERATURE=1 FOLIO_SAMPLE_SPLIT=0" bash bench/gpu/compare_decode.sh 2>&1 | tail -12
