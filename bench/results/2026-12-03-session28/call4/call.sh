# Session 28, call 4: the card's clocks and power while decode steps run (is b256 held back by the
# power limit?): nvidia-smi sampled every 100 ms through 1500 b256 steps and 3000 b64 steps.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session28/call4/call.sh
set -u
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$PWD/bundle/bin
cat bundle/SOURCE.txt
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,clocks.max.mem,power.limit,power.max_limit --format=csv,noheader
python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null || exit 1
for run in "256 1500" "64 3000" "256 1500"; do
  set -- $run
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader -lms 100 >"$OUT/smi_b$1.csv" 2>&1 &
  smi=$!
  timeout 60 "$B/decode_bench" /tmp/tl decode "$1" 512 "$2" 2>&1 | grep RESULT
  kill $smi; wait $smi 2>/dev/null
  python3 - "$OUT/smi_b$1.csv" <<'PY'
import sys, statistics
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 5]
def num(s):
    try: return float(s.split()[0])
    except Exception: return None
busy = [r for r in rows if (num(r[3]) or 0) > 250]  # samples while the steps ran (power above idle)
if not busy:
    print("no busy samples", len(rows)); sys.exit()
sm = [num(r[1]) for r in busy]; pw = [num(r[3]) for r in busy]; tp = [num(r[4]) for r in busy]
reasons = {}
for r in busy: reasons[r[5]] = reasons.get(r[5], 0) + 1
print(f"busy samples {len(busy)}: sm MHz median {statistics.median(sm):.0f} min {min(sm):.0f} max {max(sm):.0f}; "
      f"power W median {statistics.median(pw):.0f} max {max(pw):.0f}; temp C max {max(tp):.0f}; reasons {reasons}")
PY
done
