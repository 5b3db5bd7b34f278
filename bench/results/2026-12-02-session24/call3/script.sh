# Session 24, call 3: cuBLASLt custom option / cluster shape of QKV, gate/up and the LM head inside
# b256 steps, all five shapes at (0, 1x1) at b128 and b256 (branch lt-cfg), and decode attention
# with three cp.async stages in one-warp CTAs (decode_bench_st3, built from lt-cfg with
# decode_stages() returning 3).
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
Q=2560,2048; G=11264,2048; L=32000,2048; O=2048,2048; D=2048,5632
ALL02="$Q,0,2;$G,0,2;$L,0,2;$O,0,2;$D,0,2"
for cfg in "$Q,0,3;$G,0,3;$L,0,3" "$Q,1,5;$G,1,5;$L,1,5" "$Q,3,5;$G,3,5;$L,3,5" "$ALL02"; do
  FOLIO_LT_CFG="$cfg" timeout 60 $B/decode_bench /tmp/tl decode 256 512 5 2>&1 | grep -E "FOLIO_LT_CFG: m (128|256) |RESULT" | cut -c1-200
done
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench 256
q02_b256 decode_bench 256 FOLIO_LT_CFG=$Q,0,2
q03_b256 decode_bench 256 FOLIO_LT_CFG=$Q,0,3
q15_b256 decode_bench 256 FOLIO_LT_CFG=$Q,1,5
g02_b256 decode_bench 256 FOLIO_LT_CFG=$G,0,2
g03_b256 decode_bench 256 FOLIO_LT_CFG=$G,0,3
g15_b256 decode_bench 256 FOLIO_LT_CFG=$G,1,5
l02_b256 decode_bench 256 FOLIO_LT_CFG=$L,0,2
l15_b256 decode_bench 256 FOLIO_LT_CFG=$L,1,5
all02_b256 decode_bench 256 FOLIO_LT_CFG=$ALL02
st3_b256 decode_bench_st3 256
main_b128 decode_bench 128
all02_b128 decode_bench 128 FOLIO_LT_CFG=$ALL02
od02_b128 decode_bench 128 FOLIO_LT_CFG=$O,0,2;$D,0,2
main_b64 decode_bench 64
st3_b64 decode_bench_st3 64" timeout 300 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|" | tee $OUT/compare_table.txt
cp /tmp/cmp/compare.log $OUT/
