# Session 22, call 1: session 21's next_call.sh without its split-count rows (a later call), plus branch silu-row (ee3c4bb: SiLU*mul after the
# norm-folded gate/up GEMM, one CTA a token with its row's loads out before the reduction).
# The next session's first device call (written in session 21, not run).
# Why the swizzled attention stages (branch `swizzle`, patches/swizzle.diff) made decode attention
# 3.4 us a b256 layer slower (call 5: folio 40.30 us against 36.87 in chains) when the same copies
# alone were 1.8 us faster than into padded rows (call 4: warp1_swizzle 31.52 against warp1_pitch
# 33.29). kv_read_probe's warp1_pitch_read / warp1_swizzle_read add decode_tile's ldmatrix reads
# (16 a tile, no arithmetic) to those copy patterns: if _swizzle_read loses to _pitch_read, the
# reads are the cause; if not, the kernel's code around them is.
# Then steps where 4 warps an SM (the old default) and 3 plan different split counts: b16 (3
# against 2), b14 (3 against 2), b8 (5 against 4), b28 (2 against 1). Call 1 of round 27 had b16
# 1.0364 ms with 4 against 1.0513 with 3; session 20 had b32 (2 against 1) faster with 3.
# Found after the calls (SASS): the kernel's dynamic shared memory began at 0x410, 16 bytes past
# a line (after the static is_last), so in `swizzle` every stage row straddled two lines of shared
# memory, as the probe's padded rows do. Branch `swizzle-aligned` (e8c316b) declares it 128-byte
# aligned (the base becomes 0x480). Its kernel and steps run here against main's.
# Also branch `prologue` (compiled, not run): decode attention reads block-table row t (token t is
# sequence t's in a decode-only batch) and split 0's first block ids beside pos, so the first
# copies wait on one metadata round trip, not three (pos, token_seq, table; SASS checked). The
# bisect put the prologue at about 0.8 us a b256 layer (m25 34.53 against warp1_attnload 33.74).
# Prepare here (main, then the branches' binaries as variants):
#     for b in swizzle swizzle-aligned prologue; do git checkout $b && cmake --build build-bundle -j2 \
#       --target kv_read_probe decode_bench && for t in kv_read_probe decode_bench; do
#       strip --strip-debug -o /tmp/${t}_$b build-bundle/bin/$t; done; done &&
#       git checkout main && cmake --build build-bundle -j2 && deploy/bundle.sh &&
#       cp /tmp/kv_read_probe_swizzle* /tmp/kv_read_probe_prologue /tmp/decode_bench_swizzle-aligned \
#         /tmp/decode_bench_prologue bundle/bin/ && deploy/pack.sh
# then run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session21/next_call.sh
# After it: GuideLLM poisson 8/32/128 at main in its own call (bench/results/README.md, "Running it
# on the H200").
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for r in 1 2; do
  $B/kv_read_probe 256 512 | grep -E "warp1_tab |warp1_pitch|warp1_swizzle|folio" | sed "s/^RESULT /RESULT build=main run=$r /"
  $B/kv_read_probe_swizzle 256 512 | grep -E "folio" | sed "s/^RESULT /RESULT build=swizzle run=$r /"
  $B/kv_read_probe_swizzle-aligned 256 512 | grep -E "folio" | sed "s/^RESULT /RESULT build=swizzle-aligned run=$r /"
  $B/kv_read_probe_prologue 256 512 | grep -E "folio" | sed "s/^RESULT /RESULT build=prologue run=$r /"
done | tee $OUT/kv_read_probe.txt
mkdir -p /tmp/cmp
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench 256
swal_b256 decode_bench_swizzle-aligned 256
pro_b256 decode_bench_prologue 256
main_b128 decode_bench 128
silu_b256 decode_bench_silu-row 256
silu_b128 decode_bench_silu-row 128
pro_b128 decode_bench_prologue 128
main_b64 decode_bench 64
swal_b64 decode_bench_swizzle-aligned 64
pro_b64 decode_bench_prologue 64
main_b1 decode_bench 1
swal_b1 decode_bench_swizzle-aligned 1
pro_b1 decode_bench_prologue 1" timeout 500 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|"
cp /tmp/cmp/compare.log $OUT/
