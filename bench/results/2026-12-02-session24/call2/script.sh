# Session 24, call 2: cuBLASLt custom option / cluster shape of the O and down GEMMs inside b256
# and b128 steps (branch lt-cfg, FOLIO_LT_CFG="n,k,custom,cluster;..."). Round 21 timed them
# alone (lt_search_bench): O 6.20 us with (2, 1x2) against 6.65 for the heuristic's (1, 2x1);
# down 11.86 with (0, 2x1) against 12.22.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp
O25="2048,2048,2,5"; O02="2048,2048,0,2"; O03="2048,2048,0,3"; D03="2048,5632,0,3"; D02="2048,5632,0,2"
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null
for cfg in "$O25;$D03" "$O02;$D02" "$O03"; do
  FOLIO_LT_CFG="$cfg" timeout 60 $B/decode_bench /tmp/tl decode 256 512 5 2>&1 | grep -E "FOLIO_LT_CFG|RESULT" | cut -c1-200
done
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b256 decode_bench 256
o25_b256 decode_bench 256 FOLIO_LT_CFG=$O25
o02_b256 decode_bench 256 FOLIO_LT_CFG=$O02
o03_b256 decode_bench 256 FOLIO_LT_CFG=$O03
d03_b256 decode_bench 256 FOLIO_LT_CFG=$D03
d02_b256 decode_bench 256 FOLIO_LT_CFG=$D02
o25d03_b256 decode_bench 256 FOLIO_LT_CFG=$O25;$D03
o02d03_b256 decode_bench 256 FOLIO_LT_CFG=$O02;$D03
main_b128 decode_bench 128
o25d03_b128 decode_bench 128 FOLIO_LT_CFG=$O25;$D03
o02d02_b128 decode_bench 128 FOLIO_LT_CFG=$O02;$D02" timeout 200 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|" | tee $OUT/compare_table.txt
cp /tmp/cmp/compare.log $OUT/
FOLIO_LT_CFG="$O25;$D03" CUDA_INJECTION64_PATH=$B/libkernel_timeline.so KERNEL_TIMELINE_DETAIL=1 \
  timeout 60 "$B/decode_bench" /tmp/tl decode 256 512 50 >"$OUT/timeline_o25d03_b256.txt" 2>&1
grep -E '^TIMELINE_KERNEL' "$OUT/timeline_o25d03_b256.txt" | cut -c1-160 | head -6
