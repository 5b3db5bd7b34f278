# Session 26, call 1: the L2 drops on the decode paths of 3-128 rows (FOLIO_L2_DISCARD bits 32
# NORMED and 64 ADD, and bits 2 ACT / 16 ATTN_OUT taken by add_rmsnorm there; default 127).
# Steps interleaved against =4 (what those paths dropped before: the logits only) at b128 (cuBLASLt
# path), b64, b32, b8 (TMA path); b256 against =0 as the yardstick of round 31; then
# check_and_time in full (correctness with the new drops on, timings against floors, serve
# smoke, memcheck and racecheck).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session26/call1/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="d127_b128 decode_bench 128
d4_b128 decode_bench 128 FOLIO_L2_DISCARD=4
d127_b64 decode_bench 64
d4_b64 decode_bench 64 FOLIO_L2_DISCARD=4
d127_b32 decode_bench 32
d4_b32 decode_bench 32 FOLIO_L2_DISCARD=4
d127_b8 decode_bench 8
d4_b8 decode_bench 8 FOLIO_L2_DISCARD=4
d127_b256 decode_bench 256
d0_b256 decode_bench 256 FOLIO_L2_DISCARD=0" bash bench/gpu/compare_decode.sh 2>&1 | tail -12
OUT=$OUT/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  bash bench/gpu/check_and_time.sh >"$OUT/check_and_time.log" 2>&1
echo "check_and_time rc $?"
grep -E "^(PASS|FAIL)" "$OUT/check_and_time.log" | grep -v "^PASS" | cut -c1-200
grep -E "correctness:|sampling:|smoke|memcheck|racecheck|exit" "$OUT/check_and_time.log" | cut -c1-160 | tail -20
gzip -k "$OUT/check_and_time.log"
tail -22 "$OUT/check_and_time.log"
