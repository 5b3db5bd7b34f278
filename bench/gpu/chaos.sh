#!/usr/bin/env bash
# Chaos under load on the H200: GuideLLM's sharegpt-poisson at 32 req/s for 60 s against
# `folio serve --backend cuda --frontends 3` (the TinyLlama-shaped checkpoint), while
# bench/chaos.py kills the worker 3 times, the scheduler once and one frontend once (SIGKILL, at
# random moments) and a probe sends a one-token request every 0.1 s. Prints a short table last:
# each kill with the time to the next successful request and to the worker ready again (weights
# reloaded), requests completed / errored / hung (0 hung required; GuideLLM's backend timeout is
# 60 s), KV blocks back to 0 when idle, cold start (launch to /health 200, checked < 2 s) and the
# worker's reload (checked < 3 s). About 4 minutes; everything it writes is under $OUT.
#
# On the GPU machine, from the repo root, with bundle/ and .whl/ carried as for
# bench/gpu/guidellm_bench.sh (deploy/bundle.sh, bench/fetch_guidellm_wheels.sh and
# `bash bench/gpu/guidellm_bench.sh --stage` here first):
#     bash bench/gpu/chaos.sh [--seed N] [--rate 32] [--duration 60]
# Here, without a GPU or GuideLLM (the CPU backend, the demo model, chaos.py's own load):
#     bash bench/gpu/chaos.sh --cpu
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
OUT=${OUT:-/tmp/folio-chaos}
BUNDLE=${FOLIO_BUNDLE:-$ROOT/bundle}
ASSETS=$ROOT/assets
WHEELS=${GUIDELLM_WHEELS:-$ROOT/.whl}
PY=${GUIDELLM_PYTHON:-python3}
PORT=${PORT:-8000}
RATE=32
DURATION=60
SEED=$(date +%s)
CPU=0
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) CPU=1; shift ;;
    --seed) SEED=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "chaos: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
ulimit -n 65536 2>/dev/null || true

if [ "$CPU" = 1 ]; then
  python3 bench/chaos.py --cpu --build "${FOLIO_BUILD:-build-cpu}" --rate 8 \
    --duration "$DURATION" --seed "$SEED" --log "$OUT/server.log" 2>&1 | tee "$OUT/chaos.txt"
  exit "${PIPESTATUS[0]}"
fi

first_file() { for f in "$@"; do [ -f "$f" ] && { echo "$f"; return 0; }; done; return 1; }
DATA=$(first_file "$BUNDLE/data/workload_sharegpt_1000.jsonl" \
  "$ASSETS/data/sharegpt/workload_sharegpt_1000.jsonl") || { echo "chaos: no workload jsonl"; exit 2; }
TOKDIR=$BUNDLE/models/llama2-tokenizer
[ -d "$TOKDIR" ] || TOKDIR=$ASSETS/models/llama2-tokenizer
CONFIG=$(first_file "$BUNDLE/models/tinyllama-1.1b-shape/config.json" \
  "$ASSETS/models/tinyllama-1.1b-shape/config.json") || { echo "chaos: no model config"; exit 2; }
FOLIO_LD=$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if LD_LIBRARY_PATH=$FOLIO_LD ldd "$BUNDLE/bin/folio-worker" | grep -q "not found"; then
  for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null); do
    [ -e "$d/libcublasLt.so.13" ] && FOLIO_LD=$FOLIO_LD:$d
  done
fi

MODEL=/tmp/folio-tinyllama-ckpt
if [ ! -f "$MODEL/config.json" ]; then
  echo "chaos: writing the checkpoint into $MODEL"
  python3 bench/make_checkpoint.py "$MODEL" --config "$CONFIG" --tokenizer-dir "$TOKDIR" \
    >"$OUT/checkpoint.json" 2>"$OUT/checkpoint.err" || { cat "$OUT/checkpoint.err"; exit 4; }
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$WHEELS"/*.whl || { echo "chaos: GuideLLM wheel install failed"; exit 3; }
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}

# The scenario: sharegpt-poisson at one rate, for DURATION s, a 60 s backend timeout (past it a
# request counts as hung), the json output where chaos.py reads it.
SC=$OUT/chaos.scenario.json
SRC=bench/scenarios/sharegpt-poisson.json RATE=$RATE DURATION=$DURATION DATA=$DATA MODEL=$MODEL \
  PORT=$PORT OUTD=$OUT python3 - >"$SC" <<'EOF'
import json, os
e = os.environ
sc = json.load(open(e["SRC"]))
spec = sc["spec"]
sc["metadata"]["name"] = "sharegpt-poisson-chaos"
spec["backend"]["target"] = f"http://127.0.0.1:{e['PORT']}"
spec["backend"]["timeout"] = 60
spec["profile"]["rate"] = [float(e["RATE"])]
spec["constraints"] = [{"kind": "max_duration", "seconds": float(e["DURATION"])}]
spec["data"] = [{"kind": "json_file", "path": e["DATA"]}]
spec["tokenizer"] = {"kind": "huggingface_auto", "model": e["MODEL"]}
spec["outputs"] = [{"kind": "json", "path": f"{e['OUTD']}/guidellm.json"}]
print(json.dumps(sc, indent=2))
EOF

python3 bench/chaos.py --port "$PORT" --seed "$SEED" --rate "$RATE" --duration "$DURATION" \
  --server-cmd "env LD_LIBRARY_PATH=$FOLIO_LD $BUNDLE/bin/folio serve --backend cuda --model $MODEL --host 127.0.0.1 --port $PORT --frontends 3 --drain-seconds 10" \
  --guidellm-scenario "$SC" --guidellm-python "$PY" --guidellm-json "$OUT/guidellm.json" \
  --cold-start-limit 2 --reload-limit 3 --log "$OUT/server.log" 2>&1 | tee "$OUT/chaos.txt"
exit "${PIPESTATUS[0]}"
