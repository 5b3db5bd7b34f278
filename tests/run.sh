#!/usr/bin/env bash
# Runs every Folio test that needs no GPU, twice: against the normal build and
# against an AddressSanitizer + UndefinedBehaviorSanitizer build; then the fuzz
# smoke runs (ctest -L fuzz) of a clang libFuzzer build.
# C unit tests run under ctest; the end-to-end and reference comparisons under
# pytest (they drive the built programs as subprocesses, so they exercise the
# sanitized binaries too). Last, the docker-compose deployment end to end
# (tests/compose/test_compose.sh: root and docker, which deploy/setup.sh
# installs). Prints "N passed, N failed" last.
#
# Usage: tests/run.sh [normal|asan|fuzz|compose]...   (default: all four)
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
jobs=$(nproc)
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(normal asan fuzz compose)
run_compose=0

passed=0
failed=0
add_junit() { # file: adds its tests to the totals
    [ -f "$1" ] || return 0
    read -r p f < <(python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = root.iter("testcase")
p = f = 0
for c in cases:
    if c.find("failure") is not None or c.find("error") is not None:
        f += 1
    elif c.find("skipped") is None:
        p += 1
print(p, f)
PY
)
    passed=$((passed + p))
    failed=$((failed + f))
}

for suite in "${suites[@]}"; do
    case $suite in
    compose) run_compose=1; continue ;;
    normal) dir=build flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) only=() ;;
    asan) dir=build-asan flags=(-DCMAKE_BUILD_TYPE=Debug -DFOLIO_SANITIZE=ON) only=() ;;
    fuzz) dir=build-fuzz only=(-L fuzz)
        flags=(-DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_FUZZ=ON -DFOLIO_CUDA=OFF) ;;
    *) echo "unknown suite $suite" >&2; exit 2 ;;
    esac
    echo "=== $suite build ($dir)"
    if ! { cmake -S . -B "$dir" "${flags[@]}" >/dev/null && cmake --build "$dir" -j"$jobs"; }; then
        echo "build $dir failed"
        failed=$((failed + 1))
        continue
    fi
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    echo "=== $suite: ctest"
    rm -f "$dir/ctest.xml" "$dir/pytest.xml"
    ctest --test-dir "$dir" --output-on-failure -j"$jobs" "${only[@]}" --output-junit "$repo/$dir/ctest.xml"
    add_junit "$dir/ctest.xml"
    [ "$suite" != fuzz ] || continue # the fuzz build runs its smoke only; pytest ran above
    echo "=== $suite: pytest"
    FOLIO_BUILD=$repo/$dir python3 -m pytest tests -q -p no:cacheprovider --junitxml="$dir/pytest.xml"
    rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 1 ] || [ $rc -eq 5 ] || failed=$((failed + 1)) # 5: none collected
    add_junit "$dir/pytest.xml"
done

# The compose deployment (docker; about 11 minutes on 2 cores, most of it the image build).
if [ "$run_compose" = 1 ]; then
    echo "=== compose: tests/compose/test_compose.sh"
    mkdir -p build
    bash tests/compose/test_compose.sh 2>&1 | tee build/compose-test.log
    read -r p _ f _ < <(tail -1 build/compose-test.log)
    [[ "$p" =~ ^[0-9]+$ && "$f" =~ ^[0-9]+$ ]] || { p=0; f=1; }
    passed=$((passed + p))
    failed=$((failed + f))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
