#!/usr/bin/env bash
# End-to-end smoke of `folio serve` from the bundle: start it, wait for /health, one streaming
# one non-streaming and one penalized, seeded /v1/completions request with curl (printed), then
# SIGTERM and wait.
#     bash bench/gpu/serve_smoke.sh MODEL_DIR [BACKEND [SCHEDULER OPTIONS...]]
# (from the repo root, bundle/ built). Without MODEL_DIR ("") it serves the build's demo model
# (--demo).
# The server log goes to $OUT/serve.log, the responses to /tmp/folio-smoke.
set -uo pipefail
MODEL=${1:-}
BACKEND=${2:-cuda}
shift $(($# < 2 ? $# : 2))
PORT=${FOLIO_SMOKE_PORT:-8765}
source bench/gpu/common.sh
SMOKE=/tmp/folio-smoke
mkdir -p "$SMOKE"
args=(serve --backend "$BACKEND" --port "$PORT" --host 127.0.0.1 --drain-seconds 5)
if [ -n "$MODEL" ]; then args+=(--model "$MODEL"); else args+=(--demo); fi
args+=("$@")
"$ROOT/bundle/bin/folio" "${args[@]}" >"$OUT/serve.log" 2>&1 &
pid=$!
t0=$(date +%s%N)
ok=0
for _ in $(seq 1 240); do
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then ok=1; break; fi
  kill -0 $pid 2>/dev/null || break
  sleep 0.5
done
echo "serve: health $([ $ok = 1 ] && echo up || echo DOWN) after $((($(date +%s%N) - t0) / 1000000)) ms"
rc=1
if [ $ok = 1 ]; then
  name=$(curl -s "http://127.0.0.1:$PORT/v1/models" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
  echo "serve: model id $name"
  echo "--- streaming"
  curl -sN --max-time 60 "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$name\",\"prompt\":\"The capital of France is\",\"max_tokens\":12,\"stream\":true,\"temperature\":0}" |
    cat >"$SMOKE/stream.txt"
  head -c 1200 "$SMOKE/stream.txt"
  echo " ... ($(grep -c '^data:' "$SMOKE/stream.txt") events, last: $(grep '^data:' "$SMOKE/stream.txt" | tail -1))"
  echo
  echo "--- non-streaming"
  curl -s --max-time 60 "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$name\",\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"temperature\":0}" |
    tee "$SMOKE/nonstream.txt"
  echo
  echo "--- penalized (repetition 1.3, frequency 0.5, presence 0.4), seeded, with logprobs"
  curl -s --max-time 60 "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$name\",\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"temperature\":0.8,\"seed\":7,\"logprobs\":2,\"repetition_penalty\":1.3,\"frequency_penalty\":0.5,\"presence_penalty\":0.4}" |
    tee "$SMOKE/penalized.txt"
  echo
  grep -q '\[DONE\]' "$SMOKE/stream.txt" && grep -q '"choices"' "$SMOKE/nonstream.txt" &&
    grep -q '"choices"' "$SMOKE/penalized.txt" && rc=0
fi
kill -TERM $pid 2>/dev/null
for _ in $(seq 1 40); do kill -0 $pid 2>/dev/null || break; sleep 0.5; done
if kill -0 $pid 2>/dev/null; then echo "serve: still running 20 s after SIGTERM"; kill -KILL $pid; rc=1; fi
wait $pid
echo "serve: exit status $? after SIGTERM; smoke $([ $rc = 0 ] && echo PASS || echo FAIL)"
[ $rc = 0 ] || tail -30 "$OUT/serve.log"
exit $rc
