# Session 18 call 2, branch cluster-gemm (11c47b7): folio_k_gemm_cluster alone (gemm_cluster_bench)
# and in decode steps (FOLIO_CLUSTER_GEMM: 0 cuBLASLt, 1 O, 2 down, 3 both), a b256 timeline, and
# the correctness checks (check 2c runs O and down on it at batch 8; memcheck at batch 160).
set -u
B=$PWD/bundle/bin
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
echo "== gemm_cluster_bench"
timeout 120 $B/gemm_cluster_bench 256 192 129 2>&1 | tee $OUT/cluster_bench.txt | tail -30
echo "== compare"
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE="lt_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=0
o_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=1
down_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=2
both_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=3
lt_b160 decode_bench 160 FOLIO_CLUSTER_GEMM=0
both_b160 decode_bench 160 FOLIO_CLUSTER_GEMM=3" bash bench/gpu/compare_decode.sh > $OUT/compare_table.txt 2>&1
cat $OUT/compare_table.txt
CUDA_INJECTION64_PATH=$B/libkernel_timeline.so timeout 120 $B/decode_bench /tmp/tl decode 256 512 50 > $OUT/timeline_b256.txt 2>&1
grep -E '^(RESULT|TIMELINE |TIMELINE_KERNEL)' $OUT/timeline_b256.txt | cut -c1-200
echo "== check_and_time (no timings)"
mkdir -p /tmp/ct; OUT=/tmp/ct FOLIO_SKIP_TIMINGS=1 FOLIO_SANITIZE_TIMEOUT=60 timeout 330 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1
grep -E "^(PASS|FAIL)|correctness:|memcheck|racecheck|smoke" $OUT/ct.log | cut -c1-300
