# Session 24, call 4 (bundle: lt-b128, ef08c80; beside it decode_bench_main from main aa209aa and
# decode_bench_ltcfg from lt-cfg 35dbd11):
# 1. lt-b128 (cuBLASLt plans of 65-128 rows in clusters of one CTA, custom option 0) against main
#    at b128, b256, b64, interleaved.
# 2. The heuristic's other algorithms (ranks 1-3 of 8) for each projection inside b256 steps
#    (FOLIO_LT_RANK="n,k,rank"); round 18 timed them alone: at m 256 the first was fastest.
# 3. check_and_time in full on lt-b128.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cmp /tmp/cmp2
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
OUT=/tmp/cmp FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="main_b128 decode_bench_main 128
new_b128 decode_bench 128
main_b256 decode_bench_main 256
new_b256 decode_bench 256
main_b64 decode_bench_main 64
new_b64 decode_bench 64
main_b96 decode_bench_main 96
new_b96 decode_bench 96" timeout 120 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|" | tee $OUT/compare_new.txt
cp /tmp/cmp/compare.log $OUT/compare_new.log
S="2560,2048 2048,2048 11264,2048 2048,5632 32000,2048"
for r in 1 2 3; do
  cfg=$(for s in $S; do printf "%s,%d;" $s $r; done)
  FOLIO_LT_RANK="$cfg" timeout 30 $B/decode_bench_ltcfg /tmp/tl decode 256 512 3 2>&1 | grep -E "FOLIO_LT_RANK: m 256 " | cut -c1-200
done
V="main_b256 decode_bench_ltcfg 256"
for s in $S; do for r in 1 2 3; do V="$V
r${r}_${s/,/x}_b256 decode_bench_ltcfg 256 FOLIO_LT_RANK=$s,$r"; done; done
OUT=/tmp/cmp2 FOLIO_COMPARE_ROUNDS=2 FOLIO_COMPARE_STEPS=100 FOLIO_COMPARE="$V" timeout 150 bash bench/gpu/compare_decode.sh 2>&1 | grep "^|" | tee $OUT/compare_rank.txt
cp /tmp/cmp2/compare.log $OUT/compare_rank.log
mkdir -p /tmp/ct
OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 timeout 300 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
echo "check_and_time rc $?"
cp /tmp/ct/check.log /tmp/ct/table.txt $OUT/ 2>/dev/null
grep -E "^FAIL|correctness:|memcheck|racecheck|smoke" $OUT/ct.log | cut -c1-200
cat $OUT/table.txt 2>/dev/null
