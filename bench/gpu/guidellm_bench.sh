#!/usr/bin/env bash
# The WORKLOADS.md benchmarks with GuideLLM, in one device call: install GuideLLM from the carried
# wheels, write the TinyLlama-shaped checkpoint, start each server in turn, run the chosen
# workloads against it with identical client settings, and leave GuideLLM's own outputs, the
# servers' /metrics and logs, and a markdown summary under $OUT. The summary table is printed last.
#
# On the GPU machine, from the repo root, after deploy/bundle.sh, bench/fetch_guidellm_wheels.sh,
# this script's --stage and deploy/pack.sh here (carry: build-pack; first
# `tar xJf build-pack/carry.tar.xz` there):
#     FOLIO_COMMIT=<sha> bash bench/gpu/guidellm_bench.sh
#     bash bench/gpu/guidellm_bench.sh --server folio --server 'vllm=vllm serve {model} --port {port}'
# Here on the CPU (tiny model, short constraints, GuideLLM from a venv):
#     OUT=/tmp/glout GUIDELLM_PYTHON=/tmp/glvenv2/bin/python FOLIO_BIN=build-x/bin/folio \
#       bash bench/gpu/guidellm_bench.sh --backend cpu --skip-install --quick --model /tmp/tiny
#
# Options:
#   --workloads LIST   comma list of rate2, poisson, max, saturate, sweep, json-rate2, json-saturate,
#                      grounded-rate2 (bench/scenarios/; default rate2,poisson,max)
#   --server SPEC      'folio' (default), 'NAME=folio FLAGS' (this build with more flags: an
#                      ablation) or NAME=COMMAND, repeatable; COMMAND may use {model}, {port} and
#                      {tokenizer}; each server runs the same workloads in turn, and the report
#                      gives every server's change against the first
#                      Named ones: vllm, vllm-fp8, vllm-4api, vllm-fp8-4api (vLLM 0.26 from
#                      $VLLM_SITE, default /tmp/vsite; --quantization fp8, --api-server-count 4)
#                      and folio-fp8 (this build with --quantization fp8)
#   --server-cmd CMD   the same as --server server=CMD
#   --backend B        folio's --backend (default cuda)
#   --model DIR        serve this checkpoint instead of writing the TinyLlama-shaped one
#   --shape NAME       the checkpoint's shape: tinyllama (TinyLlama-1.1B, the default) or llama3-8b
#                      (Llama-3-8B, issue 55), assets/models/NAME*-shape/config.json
#   --port N           (default 8000)
#   --quick            short constraints for a smoke test: 1/5 the requests, 1/8 the seconds
#   --skip-install     GuideLLM is already importable by $GUIDELLM_PYTHON (default python3)
#   --budget-s S       wall-clock budget of the whole script (default 570): a workload whose
#                      estimate no longer fits is skipped, and each run gets a time guard
#   --stage            here, before the device call: copy the workload jsonl into bundle/data/
#                      and check that bundle/ and .whl/ hold what the call needs
# Environment: OUT (default /tmp/folio-bench), FOLIO_BIN (default bundle/bin/folio),
#   GUIDELLM__MAX_WORKER_PROCESSES (GuideLLM's worker processes, default 10; meta.json names it),
#   FOLIO_SERVE_ARGS (extra folio serve flags), FOLIO_COMMIT (recorded in meta.json),
#   FOLIO_BENCH_CONFIG (another model shape for the checkpoint, e.g. a tiny one on a CPU),
#   FOLIO_WORKLOAD (the jsonl; default bundle/data, then assets/data/sharegpt),
#   GUIDELLM_PYTHON, GUIDELLM_WHEELS (default .whl).
set -uo pipefail
T_START=$(date +%s)
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
OUT=${OUT:-/tmp/folio-bench}
WORK=${GUIDELLM_WORK:-/tmp/guidellm-bench}
PY=${GUIDELLM_PYTHON:-python3}
WHEELS=${GUIDELLM_WHEELS:-$ROOT/.whl}
BUNDLE=${FOLIO_BUNDLE:-$ROOT/bundle}
ASSETS=$ROOT/assets
export PYTHONUNBUFFERED=1
# sharegpt-max holds 1000 connections open at once, on both sides.
ulimit -n 65536 2>/dev/null || true
# Nothing outside the GPU machine can be reached: never wait on the Hugging Face hub.
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1

WORKLOADS=rate2,poisson,max
SERVERS=()
BACKEND=cuda
MODEL=
SHAPE=tinyllama
PORT=8000
QUICK=0
INSTALL=1
BUDGET=570
STAGE=0
while [ $# -gt 0 ]; do
  case $1 in
    --workloads) WORKLOADS=$2; shift 2 ;;
    --server) SERVERS+=("$2"); shift 2 ;;
    --server-cmd) SERVERS+=("server=$2"); shift 2 ;;
    --backend) BACKEND=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --shape) SHAPE=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --skip-install) INSTALL=0; shift ;;
    --budget-s) BUDGET=$2; shift 2 ;;
    --stage) STAGE=1; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "guidellm_bench: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#SERVERS[@]} -eq 0 ] && SERVERS=(folio)
[ "${GUIDELLM_SKIP_INSTALL:-0}" = 1 ] && INSTALL=0

if [ "$STAGE" = 1 ]; then
  src=${FOLIO_WORKLOAD:-$ASSETS/data/sharegpt/workload_sharegpt_1000.jsonl}
  [ -f "$src" ] || { echo "guidellm_bench: $src not found"; exit 2; }
  mkdir -p "$BUNDLE/data" && cp "$src" "$BUNDLE/data/workload_sharegpt_1000.jsonl"
  bad=0
  for p in folio folio-scheduler folio-frontend folio-worker; do
    [ -x "$BUNDLE/bin/$p" ] || { echo "missing: bundle/bin/$p (run deploy/bundle.sh)"; bad=1; }
  done
  for f in models/llama2-tokenizer/tokenizer.json models/tinyllama-1.1b-shape/config.json; do
    [ -f "$BUNDLE/$f" ] || { echo "missing: bundle/$f (run deploy/bundle.sh)"; bad=1; }
  done
  ls "$WHEELS"/guidellm-*.whl >/dev/null 2>&1 ||
    { echo "missing: $WHEELS/guidellm-*.whl (run bench/fetch_guidellm_wheels.sh)"; bad=1; }
  [ $bad = 0 ] && echo "staged: bundle/data/workload_sharegpt_1000.jsonl; carry bundle and .whl ($(du -sh "$BUNDLE" "$WHEELS" | awk '{print $1}' | paste -sd+))"
  exit $bad
fi

rm -rf "$WORK"
mkdir -p "$OUT" "$WORK"

# Everything below runs as main, its output teed into $OUT/bench.log (a pipeline, so the last
# lines are written before the script ends); the body keeps the script's indentation.
main() {
elapsed() { echo $(($(date +%s) - T_START)); }
say() { echo "[$(elapsed)s] $*"; }

first_file() { for f in "$@"; do [ -f "$f" ] && { echo "$f"; return 0; }; done; return 1; }
first_dir() { for d in "$@"; do [ -d "$d" ] && { echo "$d"; return 0; }; done; return 1; }
DATA=$(first_file "${FOLIO_WORKLOAD:-/nonexistent}" "$BUNDLE/data/workload_sharegpt_1000.jsonl" \
  "$ASSETS/data/sharegpt/workload_sharegpt_1000.jsonl") ||
  { echo "guidellm_bench: workload_sharegpt_1000.jsonl not found (set FOLIO_WORKLOAD, or copy it into bundle/data/)"; exit 2; }
TOKDIR=$(first_dir "$BUNDLE/models/llama2-tokenizer" "$ASSETS/models/llama2-tokenizer") ||
  { echo "guidellm_bench: llama2-tokenizer not found in bundle/models or assets/models"; exit 2; }
case $SHAPE in
  tinyllama) SHAPE_DIR=tinyllama-1.1b-shape ;;
  llama3-8b) SHAPE_DIR=llama3-8b-shape ;;
  *) echo "guidellm_bench: unknown --shape $SHAPE (tinyllama or llama3-8b)"; exit 2 ;;
esac
CONFIG=$(first_file "${FOLIO_BENCH_CONFIG:-/nonexistent}" \
  "$BUNDLE/models/$SHAPE_DIR/config.json" "$ASSETS/models/$SHAPE_DIR/config.json") ||
  { echo "guidellm_bench: $SHAPE_DIR/config.json not found"; exit 2; }
FOLIO_BIN=${FOLIO_BIN:-$BUNDLE/bin/folio}
# The bundle's libraries for Folio's processes only: its libssl/libz/libgomp must not replace the
# image's own under Python (GuideLLM, torch).
FOLIO_LD=${LD_LIBRARY_PATH:-}
[ -d "$BUNDLE/lib" ] && FOLIO_LD=$BUNDLE/lib${FOLIO_LD:+:$FOLIO_LD}
# libcublasLt: the toolkit's, else the one PyTorch's wheels carry (as bench/gpu/check_and_time.sh).
if [ -x "$BUNDLE/bin/folio-worker" ] &&
  LD_LIBRARY_PATH=$FOLIO_LD ldd "$BUNDLE/bin/folio-worker" | grep -q "not found"; then
  for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null); do
    [ -e "$d/libcublasLt.so.13" ] && FOLIO_LD=$FOLIO_LD:$d
  done
  LD_LIBRARY_PATH=$FOLIO_LD ldd "$BUNDLE/bin/folio-worker" | grep "not found"
fi
say "data $DATA, tokenizer $TOKDIR, config $CONFIG"

# 1. The checkpoint (in the background: it overlaps the wheel install).
CKPT_PID=
if [ -z "$MODEL" ]; then
  MODEL=/tmp/folio-$SHAPE-ckpt
  if [ -f "$MODEL/tokenizer.json" ]; then # written whole by an earlier call here (same seed)
    say "reusing the checkpoint in $MODEL"
  else
    say "writing the checkpoint into $MODEL"
    python3 bench/make_checkpoint.py "$MODEL" --config "$CONFIG" --tokenizer-dir "$TOKDIR" \
      >"$WORK/checkpoint.json" 2>"$WORK/checkpoint.err" &
    CKPT_PID=$!
  fi
fi

# 2. GuideLLM from the wheels, into its own folder: only GuideLLM's processes see it, so torch
#    and the checkpoint writer keep the image's own packages.
GL_PATH=${PYTHONPATH:-}
if [ "$INSTALL" = 1 ]; then
  say "installing GuideLLM from $WHEELS"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$WHEELS"/*.whl || { echo "guidellm_bench: wheel install failed"; exit 3; }
  GL_PATH=/tmp/site${GL_PATH:+:$GL_PATH}
fi
gl() { PYTHONPATH=$GL_PATH "$PY" "$@"; }
# Import what `guidellm run` uses and load the tokenizer it will count with: a wheel that does
# not fit the image fails here, in seconds, rather than in the middle of the call.
GL_VERSIONS=$(gl - "$TOKDIR" <<'EOF'
import sys
from importlib.metadata import version as v
import datasets  # noqa: F401
import guidellm.benchmark.entrypoints  # noqa: F401
from transformers import AutoTokenizer
n = len(AutoTokenizer.from_pretrained(sys.argv[1])("Hello world")["input_ids"])
print(v("guidellm"), v("transformers"), v("pydantic"), file=sys.stdout if n > 1 else sys.stderr)
EOF
) || { echo "guidellm_bench: GuideLLM does not import or load the tokenizer (see above)"; exit 3; }
say "guidellm, transformers, pydantic: $GL_VERSIONS"
# Quick runs on a small machine: fewer GuideLLM worker processes start faster.
[ "$QUICK" = 1 ] && export GUIDELLM__MAX_WORKER_PROCESSES=${GUIDELLM__MAX_WORKER_PROCESSES:-2}

if [ -n "$CKPT_PID" ]; then
  wait "$CKPT_PID" || { cat "$WORK/checkpoint.err"; echo "guidellm_bench: checkpoint failed"; exit 4; }
  say "checkpoint: $(cat "$WORK/checkpoint.json")"
fi

# meta.json: what the committed results must name (date, commit, GPU, model shape, versions).
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
[ -z "$gpu" ] && gpu="cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') x $(nproc)"
commit=${FOLIO_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || cat "$BUNDLE/COMMIT" 2>/dev/null || echo unknown)}
META_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) META_COMMIT=$commit META_GPU=$gpu META_GL="$GL_VERSIONS" \
  META_CONFIG=$(first_file "$MODEL/config.json" "$CONFIG") META_MODEL=$MODEL META_QUICK=$QUICK META_WORKLOADS=$WORKLOADS \
  META_SERVERS="$(printf '%s\n' "${SERVERS[@]}")" python3 - >"$WORK/meta.json" <<'EOF'
import json, os
cfg = json.load(open(os.environ["META_CONFIG"]))
keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "intermediate_size", "vocab_size", "torch_dtype")
gl, tf, pyd = (os.environ["META_GL"].split() + ["?", "?", "?"])[:3]
print(json.dumps({
    "date": os.environ["META_DATE"], "commit": os.environ["META_COMMIT"],
    "gpu": os.environ["META_GPU"], "model": os.environ["META_MODEL"],
    "model_shape": {k: cfg.get(k) for k in keys}, "guidellm": gl, "transformers": tf,
    "pydantic": pyd, "quick": os.environ["META_QUICK"] == "1",
    "workloads": os.environ["META_WORKLOADS"].split(","),
    # Each worker process streams its share of the requests on one core at most.
    "guidellm_worker_processes": int(os.environ.get("GUIDELLM__MAX_WORKER_PROCESSES") or 10),
    "servers": [s for s in os.environ["META_SERVERS"].split("\n") if s],
}, indent=2))
EOF

# 3. Runs: one GuideLLM invocation per workload, or per rate where a workload lists several
#    rates (poisson), so that each rate gets its own /metrics snapshots and its own outputs.
#    Estimated seconds include GuideLLM's start-up (about 15 s on 16 cores).
# A workload is bench/scenarios/NAME.json, or sharegpt-NAME.json for the ShareGPT ones.
scenario_of() {
  if [ -f "$ROOT/bench/scenarios/$1.json" ]; then echo "$ROOT/bench/scenarios/$1.json"
  else echo "$ROOT/bench/scenarios/sharegpt-$1.json"; fi
}
runs_of() { # workload -> "run_name:rate_or_-" lines
  python3 - "$(scenario_of "$1")" <<'EOF2'
import json, sys
sc = json.load(open(sys.argv[1]))
name, p = sc["metadata"]["name"], sc["spec"]["profile"]
rates = p.get("rate") if p["kind"] in ("constant", "poisson", "async") else None
if rates and len(rates) > 1:
    for r in rates:
        print(f"{name}-r{r:g}:{r:g}")
else:
    print(f"{name}:-")
EOF2
}
estimate_of() { # scenario -> seconds
  python3 - "$1" "$QUICK" <<'EOF2'
import json, sys
sc, quick = json.load(open(sys.argv[1])), sys.argv[2] == "1"
spec = sc["spec"]
startup = 25 if quick else 15
reqs = [c["count"] for c in spec.get("constraints", []) if c["kind"] == "max_requests"]
# A max_duration beside max_requests is the time guard, not the workload's length.
secs = [] if reqs else [c["seconds"] for c in spec.get("constraints", [])
                        if c["kind"] == "max_duration"]
p = spec["profile"]
points = p.get("sweep_size", 10) if p["kind"] == "sweep" else 1
if secs:
    run = min(secs) * points + 10 * points
elif p["kind"] in ("constant", "poisson"):
    run = reqs[0] / p["rate"][0] + 15
else:
    # throughput: bounded by the guard; 5000 saturate requests took 18 s on one H100
    run = max(45, reqs[0] * 10 // 1000)
print(int(startup + run))
EOF2
}
for wl in ${WORKLOADS//,/ }; do
  [ -f "$(scenario_of "$wl")" ] || { echo "guidellm_bench: no scenario for workload '$wl'"; exit 2; }
done

# The scenario as run: one rate; target, data, tokenizer and outputs filled in; --quick
# shortening; and a max_duration guard so a slow server cannot run the call past its limit
# (GuideLLM then stops and still writes its outputs; the guard shows in the json's config).
make_run_scenario() { # scenario run_name rate target outdir guard_seconds -> prints the path
  SC=$1 RUN=$2 RATE=$3 TARGET=$4 RUNOUT=$5 GUARD=$6 DATA=$DATA TOK=$MODEL QUICK=$QUICK ROOT=$ROOT \
    python3 - <<'EOF2'
import json, os
e = os.environ
sc = json.load(open(e["SC"]))
spec, run, out = sc["spec"], e["RUN"], e["RUNOUT"]
sc["metadata"].setdefault("labels", {})["run"] = run
spec["backend"]["target"] = e["TARGET"]
data = e["DATA"]
# A scenario with data of its own (not the ShareGPT workload) reads it from the tree.
own = spec["data"][0].get("path", "") if spec.get("data") else ""
if own and os.path.basename(own) != "workload_sharegpt_1000.jsonl":
    data = os.path.join(e["ROOT"], own)
want = max([c["count"] for c in spec.get("constraints", []) if c["kind"] == "max_requests"] + [0])
rows = [l for l in open(data) if l.strip()]
if e["QUICK"] != "1" and want > len(rows):
    # GuideLLM stops when a json_file runs out, so a run of more requests than the workload has
    # rows gets the rows cycled (the prefix cache hits from the second pass on).
    data = f"{out}/{run}.data.jsonl"
    with open(data, "w") as f:
        f.writelines(rows[i % len(rows)] for i in range(want))
spec["data"] = [{"kind": "json_file", "path": data}]
spec["tokenizer"] = {"kind": "huggingface_auto", "model": e["TOK"]}
spec["outputs"] = [{"kind": k, "path": f"{out}/{run}.{k}"} for k in ("json", "csv", "html")]
p = spec["profile"]
if e["RATE"] != "-":
    p["rate"] = [float(e["RATE"])]
cons = spec.get("constraints", [])
if e["QUICK"] == "1":
    for c in cons:
        if c["kind"] == "max_requests":
            c["count"] = max(20, c["count"] // 5)
        if c["kind"] == "max_duration":
            c["seconds"] = max(5, c["seconds"] // 8)
    if p["kind"] == "sweep":
        p["sweep_size"] = min(p.get("sweep_size", 10), 4)
if p["kind"] == "throughput":
    n = [c["count"] for c in cons if c["kind"] == "max_requests"]
    p["max_concurrency"] = min([p.get("max_concurrency") or 10**9] + n)
if not any(c["kind"] == "max_duration" for c in cons):
    cons.append({"kind": "max_duration", "seconds": float(e["GUARD"])})
spec["constraints"] = cons
path = f"{out}/{run}.scenario.json"
json.dump(sc, open(path, "w"), indent=2)
print(path)
EOF2
}

# /metrics with the time it was read (bench/report.py ends a run's window there).
metrics_snapshot() {
  { echo "# snapshot_unix_time $(date +%s.%N)"; curl -s -m 10 "http://127.0.0.1:$PORT/metrics"; } \
    >"$1" 2>/dev/null || true
}

# Requests GuideLLM cut off at a run's end may still be in the server: wait (45 s at most) until
# it reports none running or waiting, so they do not slow the next run down.
wait_idle() {
  local busy
  for _ in $(seq 1 90); do
    busy=$(curl -s -m 5 "http://127.0.0.1:$PORT/metrics" | awk '
      /^(folio_num_requests_(running|waiting)|vllm:num_requests_(running|waiting))[ {]/ {n += $NF}
      END {print n + 0}')
    [ "${busy%.*}" = 0 ] && return 0
    sleep 0.5
  done
  say "server still busy after 45 s ($busy requests)"
}

# A short request through the whole path, so the first measured request pays no lazy start-up.
warm_up() {
  local model
  model=$(curl -s -m 5 "http://127.0.0.1:$PORT/v1/models" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])' 2>/dev/null)
  curl -s -m 120 "http://127.0.0.1:$PORT/v1/chat/completions" -H 'content-type: application/json' \
    -d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":16,\"stream\":false}" \
    -o /dev/null -w '%{http_code}'
}

# 4. Each server in turn, in its own session so that stopping it stops all its processes.
SERVER_PGID=
stop_server() {
  [ -z "$SERVER_PGID" ] && return
  kill -TERM -- "-$SERVER_PGID" 2>/dev/null
  for _ in $(seq 1 60); do kill -0 -- "-$SERVER_PGID" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$SERVER_PGID" 2>/dev/null
  SERVER_PGID=
}
trap stop_server EXIT

# The standard comparisons by name: vLLM 0.26 from /tmp/vsite (.vllm/on_device.sh unpacks it
# there) in bf16, FP8 and with 4 API servers, and this build in FP8.
VLLM="env PYTHONPATH=${VLLM_SITE:-/tmp/vsite} VLLM_USE_FLASHINFER_SAMPLER=0 python3 -m vllm.entrypoints.cli.main serve {model} --port {port}"
preset() {
  case $1 in
    vllm) echo "vllm=$VLLM" ;;
    vllm-fp8) echo "vllm-fp8=$VLLM --quantization fp8" ;;
    vllm-4api) echo "vllm-4api=$VLLM --api-server-count 4" ;;
    vllm-fp8-4api) echo "vllm-fp8-4api=$VLLM --quantization fp8 --api-server-count 4" ;;
    folio-fp8) echo "folio-fp8=folio --quantization fp8" ;;
    *) echo "$1" ;;
  esac
}

RESULT_DIRS=()
for spec in "${SERVERS[@]}"; do
  spec=$(preset "$spec")
  if [ "$spec" = folio ] || [[ $spec == *=folio ]] || [[ $spec == *=folio\ * ]]; then
    # 'folio', or 'NAME=folio FLAGS': this build with more flags (an ablation, e.g.
    # 'folio-eager=folio --enforce-eager'), reported against the first server
    name=folio extra=
    [ "$spec" != folio ] && name=${spec%%=*} extra=${spec#*=folio}
    cmd="env LD_LIBRARY_PATH=$FOLIO_LD $FOLIO_BIN serve --backend $BACKEND --model {model} --port {port} ${FOLIO_SERVE_ARGS:-}$extra"
  else
    name=${spec%%=*}
    cmd=${spec#*=}
  fi
  cmd=${cmd//\{model\}/$MODEL}
  cmd=${cmd//\{port\}/$PORT}
  cmd=${cmd//\{tokenizer\}/$TOKDIR}
  cmd=${cmd//\{ld\}/$FOLIO_LD}
  dir=$WORK/$name
  mkdir -p "$dir"
  echo "$cmd" >"$dir/server_cmd.txt"
  say "== server $name: $cmd"
  # Debug level: Folio logs each request's prompt tokens and max_tokens (the check below).
  FOLIO_LOG_LEVEL=${FOLIO_LOG_LEVEL:-debug} setsid bash -c "echo \$\$ >'$dir/server.pid'; exec $cmd" \
    >"$dir/server.log" 2>&1 &
  sleep 0.2
  SERVER_PGID=$(cat "$dir/server.pid" 2>/dev/null || echo $!)
  up=0
  t_up=$(date +%s)
  for _ in $(seq 1 600); do
    if curl -sf -m 2 "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 &&
      curl -sf -m 2 "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1; then up=1; break; fi
    kill -0 "$SERVER_PGID" 2>/dev/null || break
    sleep 0.5
  done
  if [ $up = 0 ]; then
    say "server $name did not become healthy; log tail:"
    tail -30 "$dir/server.log"
    stop_server
    continue
  fi
  say "server $name healthy after $(($(date +%s) - t_up))s; warm-up request: $(warm_up)"
  RESULT_DIRS+=("$dir")
  for wl in ${WORKLOADS//,/ }; do
    for run_rate in $(runs_of "$wl"); do
      run=${run_rate%%:*}
      rate=${run_rate#*:}
      left=$((BUDGET - $(elapsed)))
      run_sc=$(make_run_scenario "$(scenario_of "$wl")" "$run" "$rate" "http://127.0.0.1:$PORT" \
        "$dir" $((left > 60 ? left - 40 : 20)))
      need=$(estimate_of "$run_sc")
      if [ "$left" -lt "$need" ]; then
        say "skipping $run on $name: ${left}s left, it needs about ${need}s"
        echo "$run skipped: ${left}s left of the budget, about ${need}s needed" >>"$dir/skipped.txt"
        rm -f "$run_sc"
        continue
      fi
      metrics_snapshot "$dir/metrics_before_$run.txt"
      say "run $run on $name (about ${need}s)"
      python3 bench/proc_cpu.py "$dir/cpu_$run.json" &
      cpu_pid=$!
      timeout -s INT $((left - 10)) env PYTHONPATH="$GL_PATH" "$PY" -m guidellm run \
        --scenario "$run_sc" --disable-progress >"$dir/$run.log" 2>&1
      rc=$?
      kill -INT "$cpu_pid" && wait "$cpu_pid"
      python3 bench/proc_cpu.py --table "$dir/cpu_$run.json" 2>/dev/null
      metrics_snapshot "$dir/metrics_after_$run.txt"
      say "$run on $name: exit $rc"
      [ $rc != 0 ] && tail -20 "$dir/$run.log"
      wait_idle
    done
  done
  stop_server
  # The log's tail comes back as it is; the whole log only inside the tar (compressed).
  tail -300 "$dir/server.log" >"$dir/server_log_tail.txt"
  gzip -f "$dir/server.log"
done
stop_server
trap - EXIT

# 5. Checks: every request carried ignore_eos and max_tokens = its output_tokens_count and got
#    that many tokens; the server's own log (Folio at debug level) saw the same max_tokens.
python3 bench/report.py --check "${RESULT_DIRS[@]}" | tee "$WORK/checks.txt"

# 6. Report, then the files that come back (at most 8, 16 MiB each, no deeper than $OUT/a/b/file):
#    summary.md, report.html, meta.json, bench.log, guidellm_results.tar.gz (everything, with
#    GuideLLM's json slimmed: prompt and output texts kept for 20 requests per status, every
#    request's timings and token counts kept), guidellm_json_full.tar.gz[.partN] (the jsons as
#    GuideLLM wrote them, split at 15 MiB).
cp "$WORK/meta.json" "$OUT/meta.json"
python3 bench/report.py --md "$OUT/summary.md" --html "$OUT/report.html" --meta "$WORK/meta.json" \
  "${RESULT_DIRS[@]}" >/dev/null || echo "guidellm_bench: report failed"
cp "$OUT/summary.md" "$OUT/report.html" "$WORK/" 2>/dev/null
FULL=/tmp/guidellm-json-full
rm -rf "$FULL" && mkdir -p "$FULL"
for f in "$WORK"/*/sharegpt-*.json "$WORK"/*/grounded-*.json; do
  case $f in *.scenario.json) continue ;; esac
  [ -f "$f" ] || continue
  d=$FULL/$(basename "$(dirname "$f")")
  mkdir -p "$d" && cp "$f" "$d/"
  python3 - "$f" <<'EOF2'
import json, sys
path = sys.argv[1]
doc = json.load(open(path))
keep = 20
for b in doc.get("benchmarks", []):
    for group in (b.get("requests") or {}).values():
        for i, r in enumerate(group or []):
            if i >= keep and isinstance(r, dict):
                r["request_args"] = None
                r["output"] = None
doc["slimmed"] = f"guidellm_bench.sh: request_args and output texts dropped after {keep} per group"
json.dump(doc, open(path, "w"))
EOF2
done
tar -czf "$OUT/guidellm_results.tar.gz" -C "$WORK" .
tar -czf /tmp/guidellm_json_full.tar.gz -C "$FULL" .
if [ "$(stat -c %s /tmp/guidellm_json_full.tar.gz)" -le $((15 * 1024 * 1024)) ]; then
  mv /tmp/guidellm_json_full.tar.gz "$OUT/"
else
  split -b 15M -d -a 1 /tmp/guidellm_json_full.tar.gz "$OUT/guidellm_json_full.tar.gz.part"
  ls "$OUT"/guidellm_json_full.tar.gz.part* | tail -n +4 | xargs -r rm -f
  echo "guidellm_bench: full jsons split into parts (cat them back together; only 3 parts come back)"
fi
ls -la "$OUT"
say "done"
echo
cat "$OUT/summary.md" 2>/dev/null
}

main 2>&1 | tee "$OUT/bench.log"
exit "${PIPESTATUS[0]}"
