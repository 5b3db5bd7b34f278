#!/usr/bin/env bash
# By hand (not run by tests/run.sh): does folio serve come back after its scheduler stops for a
# while? Starts `folio serve` (CPU backend, two frontends) on MODEL_DIR, stops the scheduler with
# SIGSTOP for STALL seconds, lets it run again, and after 12 s prints /health (200: every frontend
# registered again) and how many registrations the scheduler logged. Session 29 measured, by this
# procedure, a frontend that closes and reopens its REQ socket after three unanswered Registers
# (7 of 8 runs never recovered, nng 1.5.2) against the code without that (6 of 6 recovered):
#     tests/tools/scheduler_stall.sh build-asan/bin /tmp/tinym [STALL]
# (a model from tests/fixtures/make_tiny_model.py). The log is left in /tmp/scheduler_stall.log.
set -u
B=${1:?usage: scheduler_stall.sh BIN_DIR MODEL_DIR [STALL_SECONDS]}
MODEL=${2:?usage: scheduler_stall.sh BIN_DIR MODEL_DIR [STALL_SECONDS]}
STALL=${3:-8}
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
LOG=/tmp/scheduler_stall.log
health() { curl -s -o /dev/null -w '%{http_code}' "localhost:$PORT/health"; }
"$B/folio" serve --model "$MODEL" --port "$PORT" --frontends 2 --backend cpu --drain-seconds 5 >"$LOG" 2>&1 &
serve=$!
for _ in $(seq 1 300); do [ "$(health)" = 200 ] && break; sleep 0.1; done
sched=$(pgrep -P "$serve" -f folio-scheduler)
kill -STOP "$sched"
sleep "$STALL"
kill -CONT "$sched"
sleep 12
echo "health after the stall: $(health); registrations logged: $(grep -c 'INFO frontend . (pid .*) registered' "$LOG")"
kill -TERM "$serve"
wait "$serve"
