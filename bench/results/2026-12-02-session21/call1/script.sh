# The next session's first device call (written in session 20, not run).
# 1. check_and_time in full at main: its first run with 3 attention warps an SM compiled in as the
#    default (session 20 call 5 ran the same plan through FOLIO_ATTN_WARPS_PER_SM=3).
# 2. Where decode attention loses to its own loads at b256 (call 3: 37.5 us in chains against
#    32.1 for the one-warp load pattern; without its arithmetic, stores and with the next loads
#    early still 34.9). kv_read_probe's warp1_attnload / warp1_zfill take the pattern through the
#    kernel's own loader; kv_read_probe_bisect (branch attn-bisect) adds modes 8 (no q loads),
#    16 (return after the tiles) and 25 (1 + 8 + 16) to the kernel itself.
# 3. Steps of 16 and 32 rows with FOLIO_ATTN_WARPS_PER_SM=2 against the new default (call 5's
#    attention alone at b32: 0.0125 ms with 2, 0.0130 with 3), and b16 and b4 against the old
#    default 4 (their split counts changed, 3 -> 2 and 9 -> 7; session 20 did not time them).
# Prepare here:
#     git checkout attn-bisect && cmake --build build-bundle -j2 --target kv_read_probe &&
#       strip --strip-debug -o /tmp/kv_read_probe_bisect build-bundle/bin/kv_read_probe &&
#       git checkout main && cmake --build build-bundle -j2 && deploy/bundle.sh &&
#       cp /tmp/kv_read_probe_bisect bundle/bin/ && deploy/pack.sh
# then run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session20/next_call.sh
# After it: GuideLLM poisson 8/32/128 at main in its own call (bench/results/README.md, "Running it
# on the H200"): r128's steps carry about 90-100 rows, the bucket whose attention no longer splits.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/ct
OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 \
  timeout 400 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
echo "check_and_time rc $?"
grep -E "^FAIL|correctness:|smoke|memcheck|racecheck" $OUT/ct.log | cut -c1-200
cp /tmp/ct/check.log /tmp/ct/table.txt $OUT/ 2>/dev/null; cat /tmp/ct/table.txt
for v in kv_read_probe kv_read_probe_bisect; do
  $B/$v 256 512 | grep -E "warp1_tab |warp1_attnload|warp1_zfill|folio" | sed "s/^RESULT /RESULT build=$v /"
done | tee $OUT/kv_read_probe.txt
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=2 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="w3_b32 decode_bench 32
w2_b32 decode_bench 32 FOLIO_ATTN_WARPS_PER_SM=2
w3_b16 decode_bench 16
w2_b16 decode_bench 16 FOLIO_ATTN_WARPS_PER_SM=2
w4_b16 decode_bench 16 FOLIO_ATTN_WARPS_PER_SM=4
w3_b4 decode_bench 4
w4_b4 decode_bench 4 FOLIO_ATTN_WARPS_PER_SM=4" bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
