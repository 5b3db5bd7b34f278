# The next session's first device call (written in session 23, not run).
# Two b256 levers prepared on branches, compiled here, never run:
# - attn-l2early (973b47d): decode attention with RoPE (steps of 65+ rows, cuBLASLt path) asks the
#   L2 for its first FOLIO_ATTN_L2_EARLY tiles' K/V blocks (cp.async.bulk.prefetch.L2, default 2)
#   right after reading their block ids, before q, k, v and the norm's row come back; today the
#   HBM idles through that prologue (about 1 us of a 37.8 us kernel, 22 a step).
# - bf16-logits (b990133): the LM head writes bf16 logits, the samplers read bf16 (as HF and vLLM
#   leave the logits before sampling). A b256 step's logits are 32.8 MB that the LM head writes
#   and the sampler reads back at 1.9 TB/s (17-20 us; the dirty lines' write-back shares the HBM
#   with the reads, call 6): half of that.
# - l2early-bf16 (24ecf95): both.
# Prepare here:
#   for b in main attn-l2early bf16-logits; do git checkout -q $b && cmake --build build-bundle -j2 &&
#     strip --strip-debug -o /tmp/decode_bench_$b build-bundle/bin/decode_bench; done
#   git checkout -q l2early-bf16 && cmake --build build-bundle -j2 && deploy/bundle.sh &&
#   for b in main attn-l2early bf16-logits; do cp /tmp/decode_bench_$b bundle/bin/; done && deploy/pack.sh
# then run with carry ["build-pack"]:
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session23/next_call.sh
# It compares (3 interleaved rounds of 100 steps), then runs check_and_time in full on the combined
# build (bundle/bin/decode_bench, step_driver, serve) only if it beats main at b256 by 0.5%.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench_main 256
l2e0_b256 decode_bench_attn-l2early 256 FOLIO_ATTN_L2_EARLY=0
l2e2_b256 decode_bench_attn-l2early 256 FOLIO_ATTN_L2_EARLY=2
l2e4_b256 decode_bench_attn-l2early 256 FOLIO_ATTN_L2_EARLY=4
l2e8_b256 decode_bench_attn-l2early 256 FOLIO_ATTN_L2_EARLY=8
bf16_b256 decode_bench_bf16-logits 256
both_b256 decode_bench 256
main_b128 decode_bench_main 128
both_b128 decode_bench 128
main_b64 decode_bench_main 64
both_b64 decode_bench 64
main_b1 decode_bench_main 1
both_b1 decode_bench 1" timeout 260 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|" | tee $OUT/compare_table.txt
cp /tmp/cmp/compare.log $OUT/
CUDA_INJECTION64_PATH=$B/libkernel_timeline.so KERNEL_TIMELINE_DETAIL=1 \
  timeout 60 "$B/decode_bench" /tmp/tl decode 256 512 50 >"$OUT/timeline_both_b256.txt" 2>&1
grep -E '^(RESULT|TIMELINE_KERNEL)' "$OUT/timeline_both_b256.txt" | cut -c1-160 | head -10
m=$(awk -F'|' '$2 ~ /^ main_b256 /{print $3}' $OUT/compare_table.txt)
w=$(awk -F'|' '$2 ~ /^ both_b256 /{print $3}' $OUT/compare_table.txt)
echo "b256: main $m, both $w"
if python3 -c "import sys; sys.exit(0 if float('$w') < float('$m') * 0.995 else 1)"; then
  mkdir -p /tmp/ct
  OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 timeout 320 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
  echo "check_and_time rc $?"
  cp /tmp/ct/check.log /tmp/ct/table.txt $OUT/ 2>/dev/null
  grep -E "^FAIL|correctness:|memcheck|racecheck|smoke" $OUT/ct.log | cut -c1-200
  cat $OUT/table.txt 2>/dev/null
else
  echo "the combined build is not 0.5% faster at b256: no check"
fi
