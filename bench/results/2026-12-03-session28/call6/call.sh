# Session 28, call 6 (call 4 found b256 steps at the 700 W cap, SM clock about 1820 MHz): power and
# clocks of each kind of work alone: decode attention b256 (60000 launches), prefill 4096 (GEMMs at
# full rate, 150 runs), and b256 steps again. The bundle is call 5's (same GPU code).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session28/call6/call.sh
set -u
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$PWD/bundle/bin
[ -f /tmp/tl/config.json ] || python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
  --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null 2>&1 || exit 1
for run in "attention 256 512 60000" "prefill 4096 150" "decode 256 512 1000"; do
  tag=$(echo $run | tr ' ' _)
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader -lms 100 >"$OUT/smi_$tag.csv" 2>&1 &
  smi=$!
  timeout 60 "$B/decode_bench" /tmp/tl $run 2>&1 | grep RESULT | head -2
  kill $smi; wait $smi 2>/dev/null
  python3 - "$OUT/smi_$tag.csv" "$tag" <<'PY'
import sys, statistics
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 5]
def num(s):
    try: return float(s.split()[0])
    except Exception: return None
busy = [r for r in rows if (num(r[3]) or 0) > 250]
if not busy:
    print(sys.argv[2], "no busy samples", len(rows)); sys.exit()
sm = [num(r[1]) for r in busy]; pw = [num(r[3]) for r in busy]
reasons = {}
for r in busy: reasons[r[5]] = reasons.get(r[5], 0) + 1
print(f"{sys.argv[2]}: busy samples {len(busy)}: sm MHz median {statistics.median(sm):.0f} min {min(sm):.0f}; "
      f"power W median {statistics.median(pw):.0f} max {max(pw):.0f}; reasons {reasons}")
PY
done
