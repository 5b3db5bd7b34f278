# Session 26, call 2: main with l2-drop-128 merged (487301d): steps interleaved at b128 against
# FOLIO_L2_DISCARD=4 (the logits only, as before) and b256 against =0 (round 31's yardstick) on
# this call's card; then check_and_time in full at the landed code.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session26/call2/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,serial,clocks.max.sm,power.limit --format=csv,noheader
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b128 decode_bench 128
d4_b128 decode_bench 128 FOLIO_L2_DISCARD=4
main_b96 decode_bench 96
d4_b96 decode_bench 96 FOLIO_L2_DISCARD=4
main_b256 decode_bench 256
d0_b256 decode_bench 256 FOLIO_L2_DISCARD=0
main_b64 decode_bench 64" bash bench/gpu/compare_decode.sh 2>&1 | tail -9
OUT=$OUT/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  bash bench/gpu/check_and_time.sh >"$OUT/check_and_time.log" 2>&1
echo "check_and_time rc $?"
grep -E "^(PASS|FAIL)" "$OUT/check_and_time.log" | grep -v "^PASS" | cut -c1-200
grep -E "correctness:|sampling:|smoke|memcheck|racecheck|exit" "$OUT/check_and_time.log" | cut -c1-160 | tail -14
gzip -k "$OUT/check_and_time.log"
grep -A16 "^== floors" "$OUT/check_and_time.log"
