#!/usr/bin/env bash
# The compose deployment end to end on the CPU backend (deploy/compose.yaml):
# makes the base image, builds the images, brings the stack up with 2
# frontends, drives it through the load balancer with the OpenAI client (HTTP/1.1
# and h2c) and a short GuideLLM run, scales the frontends to 3 and back to 2
# under load, kills the worker under load, and takes everything down.
# Prints a table of checks and "N passed, N failed" last.
#
# Needs root, docker.io, docker-compose (or `docker compose`), debootstrap and
# Python's openai package. Starts dockerd when none runs, and stops it after.
# Run by tests/run.sh (its last suite), or alone:
#     bash tests/compose/test_compose.sh
# Environment: FOLIO_COMPOSE_PORT (default 18080), FOLIO_COMPOSE_KEEP=1 (leave
# the stack up on failure, to look at it), FOLIO_COMPOSE_SKIP_GUIDELLM=1.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
T0=$(date +%s)
PROJECT=folio-citest
PORT=${FOLIO_COMPOSE_PORT:-18080}
URL=http://127.0.0.1:$PORT
WORK=$(mktemp -d /tmp/folio-compose-test.XXXXXX)
export FOLIO_PORT=$PORT COMPOSE_PROJECT_NAME=$PROJECT
if docker compose version >/dev/null 2>&1; then DC=(docker compose); else DC=(docker-compose); fi
DC+=(-p "$PROJECT" -f deploy/compose.yaml)

passed=0 failed=0 rows=()
check() { # name ok(0/1) detail
  if [ "$2" = 0 ]; then passed=$((passed + 1)); rows+=("PASS|$1|$3"); else failed=$((failed + 1)); rows+=("FAIL|$1|$3"); fi
  printf '[%4ds] %s %s: %s\n' $(($(date +%s) - T0)) "$([ "$2" = 0 ] && echo PASS || echo FAIL)" "$1" "$3"
}
say() { printf '[%4ds] %s\n' $(($(date +%s) - T0)) "$*"; }

STARTED_DOCKERD=
start_dockerd() {
  docker info >/dev/null 2>&1 && return 0
  command -v dockerd >/dev/null || return 1
  say "starting dockerd"
  setsid dockerd >"$WORK/dockerd.log" 2>&1 &
  STARTED_DOCKERD=$!
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && return 0; sleep 1; done
  return 1
}
LOAD_PID=
finish() {
  [ -n "$LOAD_PID" ] && { touch "$WORK/stop"; wait "$LOAD_PID" 2>/dev/null; }
  if [ "${FOLIO_COMPOSE_KEEP:-0}" != 1 ] || [ "$failed" = 0 ]; then
    "${DC[@]}" --profile bench down -v --remove-orphans -t 5 >/dev/null 2>&1
  fi
  if [ -n "$STARTED_DOCKERD" ]; then
    kill "$STARTED_DOCKERD" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$STARTED_DOCKERD" 2>/dev/null || break; sleep 1; done
  fi
  rm -rf "$WORK"
}
trap finish EXIT

summary() {
  echo
  printf '%-5s %-34s %s\n' result check detail
  for r in "${rows[@]}"; do IFS='|' read -r res name detail <<<"$r"; printf '%-5s %-34s %s\n' "$res" "$name" "$detail"; done
  echo "wall time $(($(date +%s) - T0)) s"
  echo "$passed passed, $failed failed"
}

wait_http() { # url seconds -> 0 when it answered 200 within them
  local end=$(($(date +%s) + $2))
  while [ "$(date +%s)" -lt "$end" ]; do
    [ "$(curl -s -o /dev/null -m 3 -w '%{http_code}' "$1")" = 200 ] && return 0
    sleep 0.5
  done
  return 1
}
healthy_count() { # service -> how many of its containers report healthy
  local n=0 c
  for c in $("${DC[@]}" ps -q "$1" 2>/dev/null); do
    [ "$(docker inspect -f '{{.State.Health.Status}}' "$c" 2>/dev/null)" = healthy ] && n=$((n + 1))
  done
  echo $n
}
wait_healthy() { # service count seconds
  local end=$(($(date +%s) + $3))
  while [ "$(date +%s)" -lt "$end" ]; do
    [ "$(healthy_count "$1")" -ge "$2" ] && return 0
    sleep 1
  done
  return 1
}
# The frontend id the entrypoint derives from a container's address.
frontend_id_of() {
  docker exec "$1" bash -c 'ip=$(getent hosts "$(cat /etc/hostname)" | awk "{print \$1; exit}"); IFS=. read -r _ _ c d <<<"$ip"; echo $((c * 256 + d))'
}
# Outcomes of the load between two times: "ok N err M" and the error lines.
outcomes() { # from to -> counts of requests that started in [from, to)
  python3 - "$WORK/load.jsonl" "$1" "$2" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
lo, hi = float(sys.argv[2]), float(sys.argv[3])
sel = [r for r in recs if lo <= r["start"] < hi]
ok = sum(r["outcome"] == "ok" for r in sel)
print(ok, len(sel) - ok)
EOF
}
errors_between() { # from to -> one line per failed request: frontend|detail
  python3 - "$WORK/load.jsonl" "$1" "$2" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
lo, hi = float(sys.argv[2]), float(sys.argv[3])
for r in recs:
    if lo <= r["start"] < hi and r["outcome"] != "ok":
        print(f"{r['frontend']}|{r['status']}|{r['detail'][:120]}")
EOF
}
now() { date +%s.%N; }

# ---- 1. base image and build -------------------------------------------------
start_dockerd || { check "dockerd" 1 "no docker daemon and none could be started"; summary; exit 1; }
if deploy/prepare.sh >"$WORK/prepare.log" 2>&1; then
  check "base image + staging" 0 "$(docker image inspect -f '{{.Size}}' folio-base:bookworm | awk '{printf "%.0f MB", $1/1e6}')"
else
  check "base image + staging" 1 "$(tail -3 "$WORK/prepare.log" | tr '\n' ' ')"; summary; exit 1
fi
t=$(date +%s)
build_all() {
  "${DC[@]}" build || return 1
  [ "${FOLIO_COMPOSE_SKIP_GUIDELLM:-0}" = 1 ] || "${DC[@]}" --profile bench build guidellm
}
if build_all >"$WORK/build.log" 2>&1; then
  check "images build" 0 "folio $(docker image inspect -f '{{.Size}}' folio:latest | awk '{printf "%.0f MB", $1/1e6}'), $(($(date +%s) - t)) s"
else
  check "images build" 1 "$(grep -iE 'error|returned a non-zero' "$WORK/build.log" | tail -3 | tr '\n' ' ')"; summary; exit 1
fi

# ---- 2. up with 2 frontends ---------------------------------------------------------
t=$(date +%s)
"${DC[@]}" up -d --scale frontend=2 >"$WORK/up.log" 2>&1
if wait_healthy frontend 2 180 && wait_healthy lb 1 60 && wait_http "$URL/health" 60; then
  check "up: 2 frontends healthy behind lb" 0 "$(($(date +%s) - t)) s to /health 200"
else
  check "up: 2 frontends healthy behind lb" 1 "$(tail -3 "$WORK/up.log" | tr '\n' ' ')"
  "${DC[@]}" logs --tail 20 >"$WORK/logs.txt" 2>&1; tail -40 "$WORK/logs.txt"; summary; exit 1
fi
MODEL=$(curl -s "$URL/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')

# ---- 3. the OpenAI client over HTTP/1.1, and h2c --------------------------------------
r=$(python3 - "$URL" "$MODEL" 2>&1 <<'EOF'
import sys
from openai import OpenAI
c = OpenAI(base_url=sys.argv[1] + "/v1", api_key="none", max_retries=0, timeout=60)
m = sys.argv[2]
r = c.chat.completions.create(model=m, messages=[{"role": "user", "content": "Hello"}], max_tokens=12)
assert r.choices[0].finish_reason in ("length", "stop"), r
n = 0
for ch in c.chat.completions.create(model=m, messages=[{"role": "user", "content": "Hi"}],
                                     max_tokens=16, stream=True):
    n += bool(ch.choices and ch.choices[0].delta.content)
assert n > 0, "no streamed content"
r2 = c.completions.create(model=m, prompt="Once", max_tokens=8)
print(f"chat {r.usage.completion_tokens} tokens, stream {n} chunks, completion {r2.usage.completion_tokens} tokens")
EOF
)
check "OpenAI client via lb (HTTP/1.1)" $? "$r"
h2=$(curl -s --http2-prior-knowledge -o /dev/null -w '%{http_version} %{http_code}' "$URL/v1/models")
h2s=$(curl -s -N --http2-prior-knowledge "$URL/v1/completions" -H 'content-type: application/json' \
  -d "{\"model\":\"$MODEL\",\"prompt\":\"Hi\",\"max_tokens\":8,\"stream\":true}" | grep -c '^data: ')
[ "$h2" = "2 200" ] && [ "$h2s" -ge 3 ]
check "h2c to the lb, streamed" $? "HTTP/$h2 /v1/models; $h2s SSE events"

# ---- 4. GuideLLM (bench profile), a few requests --------------------------------------
if [ "${FOLIO_COMPOSE_SKIP_GUIDELLM:-0}" != 1 ]; then
  t=$(date +%s)
  GUIDELLM_MAX_REQUESTS=6 GUIDELLM_RATE=2 GUIDELLM_DATA=prompt_tokens=32,output_tokens=16 \
    timeout 300 "${DC[@]}" --profile bench run --rm guidellm >"$WORK/guidellm.log" 2>&1
  rc=$?
  res=$(docker run --rm -v "${PROJECT}_guidellm-results:/r:ro" folio-base:bookworm cat /r/benchmarks.json 2>/dev/null |
    python3 -c '
import json, sys
b = json.load(sys.stdin)["benchmarks"][0]
reqs = b.get("requests", {})
ok, err = len(reqs.get("successful", [])), len(reqs.get("errored", []))
print(ok, err)' 2>/dev/null)
  read -r gok gerr <<<"${res:-0 -1}"
  [ $rc = 0 ] && [ "$gok" -ge 6 ] && [ "$gerr" = 0 ]
  ok=$?
  why=""; [ $rc = 0 ] || why="; $(grep -E 'Error|error:' "$WORK/guidellm.log" | tail -1 | cut -c1-100)"
  check "GuideLLM via lb (6 requests)" $ok "rc $rc, $gok successful, $gerr errored, $(($(date +%s) - t)) s$why"
fi

# ---- 5. scaling under load ---------------------------------------------------------------
python3 tests/compose/load.py "$URL" "$MODEL" "$WORK/load.jsonl" "$WORK/stop" --threads 4 --max-tokens 48 &
LOAD_PID=$!
sleep 3
before=$("${DC[@]}" ps -q frontend | sort)
t_up=$(now)
"${DC[@]}" up -d --no-recreate --no-deps --scale frontend=3 frontend >"$WORK/scale3.log" 2>&1
new=$(comm -13 <(echo "$before") <("${DC[@]}" ps -q frontend | sort) | head -1)
ok=1
if [ -n "$new" ] && wait_healthy frontend 3 120; then
  new_id=$(frontend_id_of "$new")
  sleep 8 # the lb's checks bring it in; let it serve
  served=$(python3 -c "import json,sys; print(sum(1 for l in open('$WORK/load.jsonl') if json.loads(l)['frontend'] == $new_id))")
  registered=$("${DC[@]}" logs scheduler 2>/dev/null | grep -c "frontend $new_id .*registered")
  read -r sok serr <<<"$(outcomes "$t_up" "$(now)")"
  [ "$registered" -ge 1 ] && [ "$served" -ge 1 ] && [ "$serr" = 0 ] && ok=0
  check "scale 2->3 under load" $ok "frontend $new_id registered ($registered), served $served; $sok ok, $serr failed meanwhile"
else
  check "scale 2->3 under load" 1 "no third healthy frontend: $(tail -2 "$WORK/scale3.log" | tr '\n' ' ')"
fi

all=$("${DC[@]}" ps -q frontend | sort)
declare -A id_of
for c in $all; do id_of[$c]=$(frontend_id_of "$c"); done
t_down=$(now)
"${DC[@]}" up -d --no-recreate --no-deps --scale frontend=2 frontend >"$WORK/scale2.log" 2>&1
removed_ids=$(for c in $(comm -23 <(echo "$all") <("${DC[@]}" ps -q frontend | sort)); do echo "${id_of[$c]}"; done | tr '\n' ' ')
sleep 6
t_down_end=$(now)
read -r dok derr <<<"$(outcomes "$t_down" "$t_down_end")"
# A failed request counts as lost unless it was on the removed frontend.
lost=$(errors_between "$t_down" "$t_down_end" | awk -F'|' -v ids=" $removed_ids " 'index(ids, " " $1 " ") == 0' | wc -l)
n_now=$("${DC[@]}" ps -q frontend | wc -l)
[ "$n_now" = 2 ] && [ "$lost" = 0 ] && [ "$dok" -ge 1 ]
check "scale 3->2 under load" $? "$n_now frontends; $dok ok, $derr failed ($lost not on a removed frontend; removed: ${removed_ids:-none})"
errors_between "$t_down" "$t_down_end" | sort | uniq -c | sort -rn | head -3 | sed 's/^/    /'

# ---- 6. the worker killed under load ------------------------------------------------------
# Its process is killed as a crash or the OOM killer would: the container exits
# and its restart policy starts it again. (`docker kill` would not do: Docker
# takes it for a manual stop, which no restart policy undoes.)
wk=$("${DC[@]}" ps -q worker)
restarts0=$(docker inspect -f '{{.RestartCount}}' "$wk")
ready_lines() { "${DC[@]}" logs scheduler 2>/dev/null | grep -c "external worker ready"; }
ready0=$(ready_lines)
sleep 2
wpid=$(docker top "$wk" -eo pid,comm | awk '$2 == "folio-worker" {print $1}')
kill -KILL "$wpid"
t_kill=$(now)
t_rec=
for _ in $(seq 240); do
  sleep 0.5
  # Recovered: a new worker is ready (the scheduler said so) and /health is 200.
  if [ "$(docker inspect -f '{{.RestartCount}}' "$wk")" -gt "$restarts0" ] &&
    [ "$(ready_lines)" -gt "$ready0" ] &&
    [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$URL/health")" = 200 ]; then
    t_rec=$(now); break
  fi
done
sleep 8
touch "$WORK/stop"; wait "$LOAD_PID"; LOAD_PID=
t_end=$(now)
if [ -n "$t_rec" ]; then
  rec_s=$(python3 -c "print(f'{$t_rec - $t_kill:.1f}')")
  read -r kok kerr <<<"$(outcomes "$t_kill" "$t_rec")"
  read -r aok aerr <<<"$(outcomes "$t_rec" "$t_end")"
  timeouts=$(errors_between 0 "$t_end" | grep -ci 'timed out\|timeout')
  inflight=$(python3 -c "
import json
recs = [json.loads(l) for l in open('$WORK/load.jsonl')]
print(sum(1 for r in recs if r['start'] < $t_kill < r['end'] and r['outcome'] != 'ok'))")
  [ "$timeouts" = 0 ] && [ "$inflight" -ge 1 ] && [ "$aerr" = 0 ] && [ "$aok" -ge 1 ]
  check "worker killed under load" $? "/health 200 again after $rec_s s; in flight at the kill: $inflight ended with an error; during recovery $kok ok/$kerr failed; after: $aok ok/$aerr failed; $timeouts timeouts"
  errors_between "$t_kill" "$t_rec" | sort | uniq -c | sort -rn | head -3 | sed 's/^/    /'
else
  check "worker killed under load" 1 "/health did not recover within 120 s"
  "${DC[@]}" logs --tail 15 scheduler worker 2>&1 | tail -30
fi
total=$(wc -l <"$WORK/load.jsonl")
unterminated=$(python3 -c "
import json
recs = [json.loads(l) for l in open('$WORK/load.jsonl')]
print(sum(1 for r in recs if r.get('end') is None or r['outcome'] not in ('ok', 'error')))")
[ "$unterminated" = 0 ] && [ "$total" -ge 10 ]
check "every request ended (ok or error)" $? "$total requests under load, $unterminated without an outcome"

# ---- 7. down leaves nothing -------------------------------------------------------------------
"${DC[@]}" --profile bench down -v --remove-orphans -t 10 >"$WORK/down.log" 2>&1
left_c=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" | wc -l)
left_n=$(docker network ls -q --filter "label=com.docker.compose.project=$PROJECT" | wc -l)
left_v=$(docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT" | wc -l)
# The rings lived in the folio-shm tmpfs volume: none may be left mounted, nor
# leak into the host's /dev/shm (instance "folio"; other instances there are
# other servers' on this machine).
left_m=$(grep -c "${PROJECT}_" /proc/mounts || true)
left_s=$(ls /dev/shm 2>/dev/null | grep -cE '^folio-(plan|result|events-fe[0-9]+)$' || true)
[ "$left_c$left_n$left_v$left_m$left_s" = 00000 ]
check "down leaves nothing" $? "containers $left_c, networks $left_n, volumes $left_v, mounts $left_m, shm rings $left_s"

summary
[ "$failed" = 0 ]
