# Session 18 call 3, branch cluster-gemm: folio_k_gemm_cluster's four launch shapes alone
# (gemm_cluster_bench, with how many clusters fit), then O (FOLIO_CLUSTER_GEMM=1) and down (=2) on
# each in b256 steps against cuBLASLt (=0).
set -u
B=$PWD/bundle/bin
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1
echo "== gemm_cluster_bench"
timeout 150 $B/gemm_cluster_bench 256 2>&1 | tee $OUT/cluster_bench.txt | cut -c1-190
echo "== compare"
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE="lt_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=0
o0_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=1 FOLIO_K_CLUSTER_SHAPE=0
o1_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=1 FOLIO_K_CLUSTER_SHAPE=1
o2_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=1 FOLIO_K_CLUSTER_SHAPE=2
d1_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=2 FOLIO_K_CLUSTER_SHAPE=1
d2_b256 decode_bench 256 FOLIO_CLUSTER_GEMM=2 FOLIO_K_CLUSTER_SHAPE=2" bash bench/gpu/compare_decode.sh > $OUT/compare_table.txt 2>&1
cat $OUT/compare_table.txt
