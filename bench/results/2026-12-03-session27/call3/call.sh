# Session 27, call 3: the racecheck runs check_and_time gained at 160 rows (the 129-256-row path:
# RoPE and the norms in attention and silu_mul), on the hidden-256 fixture and the group-3 fixture
# (head_dim 128, hidden 768), 8 tokens of context, each timed; reports attributed by kernel.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session27/call3/call.sh
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cat bundle/SOURCE.txt
FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fx --layers 2 \
  --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3 >/dev/null
FOLIO_SHARED=$PWD/bundle python3 tests/fixtures/make_tiny_model.py /tmp/fxg3 --layers 2 \
  --hidden 768 --heads 6 --kv-heads 2 --intermediate 512 --seed 7 >/dev/null
for m in fx fxg3; do
  s=$(date +%s)
  FOLIO_NUM_KV_BLOCKS=512 timeout 200 compute-sanitizer --tool racecheck \
    "$B/decode_bench" /tmp/$m decode 160 8 1 >"$OUT/racecheck_$m.log" 2>&1
  rc=$?
  by=$(python3 bench/gpu/racecheck_by_kernel.py "$OUT/racecheck_$m.log")
  echo "racecheck ($m, batch 160, ctx 8) exit $rc in $(( $(date +%s) - s )) s; by kernel: exit $? ($by)"
  grep RESULT "$OUT/racecheck_$m.log" | cut -c1-160
done
gzip "$OUT"/racecheck_*.log
