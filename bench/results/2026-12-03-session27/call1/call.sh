# Session 27, call 1: branch lt-pdl-warm on the 129-256-row path (cuBLASLt GEMMs, norms in the
# consumers). FOLIO_LT_PDL bits: 1 attention launched with PDL after the QKV GEMM (metadata,
# cos/sin and residual reads before the wait), 2 its first K/V copies before the wait too, 4 SiLU
# with PDL after gate/up (its norm's sum before the wait), 8 final norm + sampler with PDL.
# FOLIO_L2_WARM=N: attention and SiLU ask the first N bytes of each row of the O / down weights
# into the L2 for the GEMM after them (FOLIO_L2_WARM_SET: 1 O and 2 gate/up from attention, 4 down
# and 8 the next layer's QKV from SiLU; default 5). Steps interleaved against main's build (decode_bench_main)
# and the branch with everything off, b256 and b160; memcheck at b160 with everything on.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session27/call1/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cat bundle/SOURCE.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
[ -f /tmp/fx/config.json ] || FOLIO_SHARED=$PWD/bundle python3 bundle/tests/make_tiny_model.py /tmp/fx --layers 2 \
  --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 >/dev/null
for e in "FOLIO_LT_PDL=15 FOLIO_L2_WARM=1024" "FOLIO_LT_PDL=13 FOLIO_L2_WARM=512 FOLIO_L2_WARM_SET=10"; do
  env $e FOLIO_NUM_KV_BLOCKS=512 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 \
    $B/decode_bench /tmp/fx decode 160 40 4 > $OUT/memcheck.log 2>&1
  echo "memcheck b160 $e: exit $? ($(grep -c 'Invalid\|ERROR' $OUT/memcheck.log) error lines)"
done
FOLIO_COMPARE_ROUNDS=5 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench_main 256
off_b256 decode_bench 256
p1_b256 decode_bench 256 FOLIO_LT_PDL=1
p3_b256 decode_bench 256 FOLIO_LT_PDL=3
p4_b256 decode_bench 256 FOLIO_LT_PDL=4
p8_b256 decode_bench 256 FOLIO_LT_PDL=8
p15_b256 decode_bench 256 FOLIO_LT_PDL=15
w512_b256 decode_bench 256 FOLIO_L2_WARM=512
w1024_b256 decode_bench 256 FOLIO_L2_WARM=1024
w2048_b256 decode_bench 256 FOLIO_L2_WARM=2048
w1024s2_b256 decode_bench 256 FOLIO_L2_WARM=1024 FOLIO_L2_WARM_SET=2
w1024s8_b256 decode_bench 256 FOLIO_L2_WARM=1024 FOLIO_L2_WARM_SET=8
w1024s10_b256 decode_bench 256 FOLIO_L2_WARM=1024 FOLIO_L2_WARM_SET=10
all_b256 decode_bench 256 FOLIO_LT_PDL=15 FOLIO_L2_WARM=1024
main_b160 decode_bench_main 160
all_b160 decode_bench 160 FOLIO_LT_PDL=15 FOLIO_L2_WARM=1024" timeout 480 bash bench/gpu/compare_decode.sh 2>&1 | tail -20
