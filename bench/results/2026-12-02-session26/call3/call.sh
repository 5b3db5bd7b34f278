# Session 26, call 3 (branch l2-drop-tma): which of the L2 drops, if any, pays on the TMA path
# (3-64 rows), where call 1 found all of them together slower. FOLIO_L2_DROP_TMA=1 lets the
# step's drops (FOLIO_L2_DISCARD bits) apply there; the logits (bit 4) are dropped in every variant.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session26/call3/call.sh
set -u
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,serial --format=csv,noheader
V=""
for b in 32 64; do
  V="$V
base_b$b decode_bench $b
all_b$b decode_bench $b FOLIO_L2_DROP_TMA=1
add_b$b decode_bench $b FOLIO_L2_DROP_TMA=1 FOLIO_L2_DISCARD=68
dead_b$b decode_bench $b FOLIO_L2_DROP_TMA=1 FOLIO_L2_DISCARD=22
normed_b$b decode_bench $b FOLIO_L2_DROP_TMA=1 FOLIO_L2_DISCARD=36"
done
FOLIO_COMPARE_ROUNDS=3 FOLIO_COMPARE_STEPS=200 FOLIO_COMPARE="$V" bash bench/gpu/compare_decode.sh 2>&1 | tail -12
