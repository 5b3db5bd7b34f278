# Session 25, call 5: the L2 drops on by default (FOLIO_L2_DISCARD=0 turns them off): steps
# interleaved against =0 and against call 4's three drops (=7); then check_and_time in full
# (correctness, timings against floors, serve smoke, memcheck and racecheck).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session25/call5.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="d31_b256 decode_bench 256
d0_b256 decode_bench 256 FOLIO_L2_DISCARD=0
d7_b256 decode_bench 256 FOLIO_L2_DISCARD=7
d31_b160 decode_bench 160
d0_b160 decode_bench 160 FOLIO_L2_DISCARD=0
d31_b64 decode_bench 64
d0_b64 decode_bench 64 FOLIO_L2_DISCARD=0" bash bench/gpu/compare_decode.sh 2>&1 | tail -9
OUT=$OUT/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  bash bench/gpu/check_and_time.sh >"$OUT/check_and_time.log" 2>&1
echo "check_and_time rc $?"
grep -E "^(PASS|FAIL)" "$OUT/check_and_time.log" | grep -v "^PASS" | cut -c1-200
grep -E "correctness:|sampling:|smoke|memcheck|racecheck|exit" "$OUT/check_and_time.log" | cut -c1-160 | tail -20
tail -22 "$OUT/check_and_time.log"
