#!/usr/bin/env bash
# Deep fuzzing: every libFuzzer target of tests/fuzz/ (JSON requests, tokenizer, chat template,
# safetensors, GGUF, config.json, IPC ring records, protobuf-c decode of every IPC message, the SSE
# text stream with stop strings) for --runs executions each (10^7 by default) under ASan+UBSan,
# in the clang fuzz build that tests/run.sh's `fuzz` suite configures (build-fuzz).
#
# Each target starts from its committed corpus (tests/fuzz/corpus/<target>, plus the chat
# template fixtures), works in a scratch corpus, and at the end the inputs that add coverage are
# merged back into tests/fuzz/corpus/<target> (-merge=1 keeps only those), so the repository's
# corpus grows with what the runs found; --no-merge leaves it as it is. A crash stops its target
# (libFuzzer's default); its input is kept in build-fuzz/fuzz-deep-artifacts/.
#
#     bash bench/fuzz_deep.sh [--runs 10000000] [--max-seconds-per-target 3600]
#                             [--targets fuzz_tokenizer,fuzz_config] [--no-merge] [--no-build]
# Prints a table last: target, executions, seconds, executions/s, crashes, corpus before/after.
# The whole run is bounded by runs and seconds per target; nothing touches the network.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
RUNS=10000000
PER_TARGET_S=3600
TARGETS=
MERGE=1
BUILD=1
while [ $# -gt 0 ]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --max-seconds-per-target) PER_TARGET_S=$2; shift 2 ;;
    --targets) TARGETS=$2; shift 2 ;;
    --no-merge) MERGE=0; shift ;;
    --no-build) BUILD=0; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz_deep: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
DIR=$ROOT/build-fuzz
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The targets and their -max_len, as tests/fuzz/CMakeLists.txt's smoke runs use them.
declare -A MAXLEN=([fuzz_tokenizer]=2048 [fuzz_openai_request]=2048 [fuzz_safetensors]=1024
  [fuzz_chat_template]=40000 [fuzz_ipc_records]=1024 [fuzz_config]=2048
  [fuzz_text_stream]=1024 [fuzz_ipc_proto]=1024 [fuzz_gguf]=4096)
ALL=$(sed -n '/^set(FOLIO_FUZZ_TARGETS/,/^)/p' tests/fuzz/CMakeLists.txt | grep -o 'fuzz_[a-z_]*')
[ -n "$TARGETS" ] || TARGETS=$(echo $ALL | tr ' ' ',')

if [ "$BUILD" = 1 ]; then
  cmake -S . -B "$DIR" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_FUZZ=ON \
    -DFOLIO_CUDA=OFF >/dev/null || exit 3
  cmake --build "$DIR" -j"$(nproc)" --target ${TARGETS//,/ } >/dev/null || exit 3
fi

ART=$DIR/fuzz-deep-artifacts
mkdir -p "$ART"
ROWS=()
for t in ${TARGETS//,/ }; do
  bin=$DIR/bin/$t
  [ -x "$bin" ] || bin=$DIR/tests/fuzz/$t
  [ -x "$bin" ] || { echo "fuzz_deep: $t is not built"; exit 3; }
  seeds=$ROOT/tests/fuzz/corpus/$t
  extra=()
  [ "$t" = fuzz_chat_template ] && extra=("$ROOT/tests/fixtures/chat_templates")
  work=$DIR/fuzz-deep-corpus/$t
  rm -rf "$work" && mkdir -p "$work" "$seeds"
  before=$(ls "$seeds" | wc -l)
  crashes_before=$(ls "$ART" | grep -c "^$t-" || true)
  log=$DIR/fuzz-deep-$t.log
  echo "== $t: up to $RUNS runs or ${PER_TARGET_S}s (log $log)"
  t0=$(date +%s.%N)
  "$bin" -runs="$RUNS" -max_total_time="$PER_TARGET_S" -max_len="${MAXLEN[$t]:-4096}" -seed=1 \
    -timeout=20 -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix="$ART/$t-" \
    "$work" "$seeds" "${extra[@]}" >"$log" 2>&1
  rc=$?
  secs=$(echo "$(date +%s.%N) - $t0" | bc)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  crashes=$(($(ls "$ART" | grep -c "^$t-" || true) - crashes_before))
  [ $rc -ne 0 ] && [ "$crashes" -eq 0 ] && crashes="exit $rc"
  if [ "$MERGE" = 1 ]; then
    "$bin" -merge=1 -max_len="${MAXLEN[$t]:-4096}" -timeout=20 -rss_limit_mb=2560 "$seeds" "$work" \
      >"$log.merge" 2>&1 || echo "fuzz_deep: merge of $t failed (see $log.merge)"
  fi
  after=$(ls "$seeds" | wc -l)
  rate=$(echo "${execs:-0} / $secs" | bc)
  echo "   $t: ${execs:-?} runs in ${secs%.*} s, $rate/s, crashes: $crashes"
  ROWS+=("| $t | ${execs:-?} | ${secs%.*} | $rate | $crashes | $before -> $after |")
done

echo
echo "fuzz_deep: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD), $(nproc) cores, runs limit $RUNS, ${PER_TARGET_S}s per target"
echo
echo "| target | executions | seconds | exec/s | crashes | corpus files |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
