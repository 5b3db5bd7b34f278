#!/usr/bin/env bash
# By hand (not run by tests/run.sh): runs one pytest selection up to N times against a build, stops
# at the first failure and keeps its log, for failures that come once in tens of runs. Session 30
# ran the scheduler-kill test this way: 1 failure in 12 runs, then 0 in 90, on the ASan build.
#     tests/tools/repeat_test.sh build-asan 150 tests/test_serve_e2e.py -k kill_scheduler_mid_stream
# Prints "N passed of M" last; the failing run's output is in /tmp/repeat_test.log.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: repeat_test.sh BUILD_DIR TIMES PYTEST_ARGS...}
TIMES=${2:?usage: repeat_test.sh BUILD_DIR TIMES PYTEST_ARGS...}
shift 2
export FOLIO_BUILD=$(realpath "$BUILD")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
LOG=/tmp/repeat_test.log
for i in $(seq 1 "$TIMES"); do
  if ! timeout 600 python3 -m pytest -x -q -p no:cacheprovider "$@" >"$LOG" 2>&1; then
    tail -40 "$LOG"
    echo "$((i - 1)) passed of $i (run $i failed: $LOG)"
    exit 1
  fi
done
rm -f "$LOG"
echo "$TIMES passed of $TIMES"
