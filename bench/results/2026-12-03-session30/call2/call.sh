# Session 30, call 2: decode attention by TMA tensor copies (branch attn-regs, after the register-direct kernel of call 1) against main
# (decode_bench_base, kv_read_probe_base: 7957aef's build). The kernel alone (kv_read_probe, b256
# step form; warp1_swizzle_read and warp1_bulk_st2 for the bare reads), correctness (check_cuda.py),
# memcheck at batch 160 (the new kernel), decode steps at b256 and b128 (5 interleaved rounds of 100).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session30/call2/call.sh
set -u
cat bundle/SOURCE.txt | head -3
export LD_LIBRARY_PATH=$PWD/bundle/lib
for bin in kv_read_probe kv_read_probe_base; do
  KV_PROBE_PATTERNS=warp1_swizzle_read,warp1_bulk_st2,folio_rope_norm_key1 timeout 60 bundle/bin/$bin 256 512 | grep RESULT |
    cut -d' ' -f2,5,9 | sed "s/^/$bin: /"
done
echo "== checks"
OUT=$OUT/ct FOLIO_SKIP_SERVE=1 FOLIO_SKIP_TIMINGS=1 FOLIO_SANITIZE_RUN=0 \
  timeout 300 bash bench/gpu/check_and_time.sh >$OUT/ct.log 2>&1
grep -E "^(PASS|FAIL|correctness)" $OUT/ct.log | cut -c1-150 | tail -50
FOLIO_NUM_KV_BLOCKS=512 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  bundle/bin/decode_bench /tmp/fx decode 160 40 4 >$OUT/memcheck160.log 2>&1
echo "memcheck (batch 160) exit $? ($(grep -c 'Invalid\|ERROR' $OUT/memcheck160.log) error lines)"
echo "== decode steps"
FOLIO_COMPARE_ROUNDS=5 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="new_b256 decode_bench 256
base_b256 decode_bench_base 256
new_b128 decode_bench 128
base_b128 decode_bench_base 128" timeout 200 bash bench/gpu/compare_decode.sh 2>&1 | tail -8
