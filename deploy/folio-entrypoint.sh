#!/bin/bash
# The image's entrypoint: one Folio program per container, chosen by the
# first argument, with the flags `folio serve` would pass it (launcher/serve.c)
# and the shared places of a compose deployment:
#   /run/folio   (a volume)       the scheduler's nng ipc:// sockets and worker.args
#   /dev/shm     (a tmpfs volume) the shared-memory rings
#
#   scheduler [folio-scheduler flags]  the scheduler; its worker runs in its own container
#   worker [folio-worker flags]        the worker, with the arguments the scheduler wrote
#   frontend [folio-frontend flags]    an HTTP frontend on :8000, any number of them
#   serve [folio serve flags]          everything in this one container
#   anything else                      run as given (e.g. bash)
#
# Environment: FOLIO_MODEL (a Hugging Face model folder; default the demo
# model), FOLIO_BACKEND (cpu | cuda), FOLIO_RUN_DIR, FOLIO_INSTANCE,
# FOLIO_HEARTBEAT_TIMEOUT; the API key from the file named by
# FOLIO_API_KEY_FILE (a compose secret), exported as FOLIO_API_KEY.
set -euo pipefail
model=${FOLIO_MODEL:-/models/demo}
run_dir=${FOLIO_RUN_DIR:-/run/folio}
instance=${FOLIO_INSTANCE:-folio}
backend=${FOLIO_BACKEND:-cpu}

# An empty or absent key file means no key.
key_file=${FOLIO_API_KEY_FILE:-/run/secrets/folio_api_key}
if [ -z "${FOLIO_API_KEY:-}" ] && [ -s "$key_file" ]; then
  FOLIO_API_KEY=$(tr -d '\r\n' <"$key_file")
  export FOLIO_API_KEY
fi

# A frontend's id names its event ring and must be unique among the frontends
# of one scheduler. Replicas made by `--scale` share one command, so the id is
# the low 16 bits of the container's address, which the compose network gives
# to one live container at a time.
frontend_id() {
  local ip
  ip=$(getent hosts "$(cat /etc/hostname)" | awk '{print $1; exit}')
  case $ip in
  *.*.*.*) IFS=. read -r _ _ c d <<<"$ip" && echo $((c * 256 + d)) ;;
  *) echo "folio-entrypoint: no IPv4 address for $(cat /etc/hostname) (got '$ip')" >&2; return 1 ;;
  esac
}

role=${1:-serve}
[ $# -gt 0 ] && shift
case $role in
scheduler)
  exec folio-scheduler --model "$model" --backend "$backend" --run-dir "$run_dir" \
    --instance "$instance" --external-worker \
    --heartbeat-timeout "${FOLIO_HEARTBEAT_TIMEOUT:-2}" "$@"
  ;;
worker)
  exec folio-worker --args-file "$run_dir/worker.args" "$@"
  ;;
frontend)
  id=$(frontend_id)
  exec folio-frontend --model "$model" --host 0.0.0.0 --port 8000 --frontend-id "$id" \
    --run-dir "$run_dir" --instance "$instance" "$@"
  ;;
serve)
  exec folio serve --model "$model" --backend "$backend" --port 8000 "$@"
  ;;
*)
  exec "$role" "$@"
  ;;
esac
