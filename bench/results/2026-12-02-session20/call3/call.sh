# Session 20, call 3: where Folio's decode attention loses to its own loads. Call 2 (chains of 8
# in a graph, b256 at 512 keys): every load-only pattern 31.4-32.4 us, Folio's kernel 37.1-37.9.
# kv_read_probe_bisect is branch attn-bisect (its kv_read_probe, stripped): the same kernel with
# probe modes: m1 no decode_tile (loads, waits, stores), m2 no output stores, m4 the next tile's
# loads issued before decode_tile (a race on the stage: timing only), m5 = m1 + m4, m7 = all three.
# Then racecheck on the group-3 fixture with an include filter (call 2's spelling was wrong).
# Prepare: cmake --build build-bundle -j2 && deploy/bundle.sh, then
#     cp /tmp/kv_read_probe_bisect bundle/bin/ && deploy/pack.sh
# run with carry ["build-pack"]:
#     tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session20/call3/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for b in 256 128; do
  $B/kv_read_probe_bisect $b 512 | grep -E "PLAN|warp1_tab |folio"
  $B/kv_read_probe $b 512 | grep -E "folio_rope"
done | tee $OUT/kv_read_probe.txt
FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fxg3 --layers 2 \
  --hidden 768 --heads 6 --kv-heads 2 --intermediate 512 --seed 7 >/dev/null
FOLIO_NUM_KV_BLOCKS=256 timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
  --kernel-name 'regex=attention|gemm_tma|gemv|silu|rmsnorm|rope|sample|embed|penalt|combine' \
  $B/decode_bench /tmp/fxg3 decode 4 40 2 > $OUT/racecheck_g3.log 2>&1
echo "racecheck (group 3, batch 4, Folio's kernels only) exit $? ($(grep -c 'hazard' $OUT/racecheck_g3.log) hazard lines)"
tail -4 $OUT/racecheck_g3.log | cut -c1-300
