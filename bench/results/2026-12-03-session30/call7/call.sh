# Session 30, call 7: the timings at the landed code (9a409fc: TMA decode attention with the
# evict-first hint), check_and_time's timing part only (floors, the TinyLlama-shaped checkpoint,
# decode b1/b8/b64/b256 over 1000 steps, prefill 512 and 4096, attention alone), for the table;
# correctness as in calls 2 and 4 (the hint changes no value: call 6's tokens hashes).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session30/call7/call.sh
set -u
ROOT=$(pwd)
B=$ROOT/bundle/bin
export LD_LIBRARY_PATH=$ROOT/bundle/lib
head -3 bundle/SOURCE.txt
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,power.limit --format=csv,noheader
python3 bench/gpu/floors.py >"$OUT/floors.json"
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null || exit 1
{
  for b in 1 8 64 256; do timeout 60 "$B/decode_bench" /tmp/tl decode $b 512 1000; done
  for n in 512 4096; do timeout 60 "$B/decode_bench" /tmp/tl prefill $n 10; done
  for b in 1 8 64 256; do timeout 60 "$B/decode_bench" /tmp/tl attention $b 512 50; done
} 2>&1 | grep RESULT >"$OUT/timings.log"
python3 bench/gpu/table.py "$OUT/floors.json" "$OUT/timings.log" | tee "$OUT/table.txt"
