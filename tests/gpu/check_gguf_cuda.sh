#!/usr/bin/env bash
# SmolLM2's GGUF on the H200: Folio's CUDA worker against transformers (tests/gpu/check_gguf_cuda.py).
# The file (94 MiB) is larger than what one device call carries (64 MiB with the tree), so it
# travels in parts, one call each, gathered in /tmp/folio-gguf on the warm machine:
#   here:   tests/gpu/check_gguf_cuda.sh stage      # .gguf_parts/part0* and the gguf wheel in .whl
#   device: tests/gpu/check_gguf_cuda.sh collect    # carry .gguf_parts/part00; again for part01
#   device: tests/gpu/check_gguf_cuda.sh run        # carry bundle, .whl and the last part
# `run` joins the parts, checks the sha256 recorded at staging, installs the gguf wheel and runs
# the check with bundle/bin/step_driver (deploy/bundle.sh builds it). Output also in $OUT.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
STORE=/tmp/folio-gguf
PART_MIB=${PART_MIB:-44}
NAME=SmolLM2-135M-Instruct.Q4_1.gguf

stage() {
  local src=${FOLIO_SMOLLM2:-models/smollm2/$NAME}
  [ -f "$src" ] || { echo "$src is missing: deploy/setup.sh fetches it"; exit 1; }
  rm -rf .gguf_parts && mkdir -p .gguf_parts .whl
  split -b "${PART_MIB}M" -d -a 2 "$src" .gguf_parts/part
  sha256sum <"$src" | cut -d' ' -f1 >.gguf_parts/SHA256
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 -d .whl gguf==0.19.0
  for p in /.gguf_parts/ /.whl/; do
    grep -qxF "$p" "$(git rev-parse --git-path info/exclude)" ||
      echo "$p" >>"$(git rev-parse --git-path info/exclude)"
  done
  ls -la .gguf_parts .whl
}

collect() {
  mkdir -p "$STORE"
  cp .gguf_parts/part* .gguf_parts/SHA256 "$STORE/" 2>/dev/null
  ls -la "$STORE"
}

run() {
  collect
  cat "$STORE"/part* >"$STORE/$NAME"
  local want got
  want=$(cat "$STORE/SHA256")
  got=$(sha256sum <"$STORE/$NAME" | cut -d' ' -f1)
  [ "$want" = "$got" ] || { echo "joined file's sha256 $got, staged $want: a part is missing"; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
  export LD_LIBRARY_PATH=$ROOT/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # libcublasLt: the toolkit's, else the one PyTorch's wheels carry (as bench/gpu/check_and_time.sh).
  if ldd bundle/bin/step_driver | grep -q "not found"; then
    for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null); do
      [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
    done
  fi
  mkdir -p "${OUT:-/tmp/folio-out}"
  timeout 540 python3 tests/gpu/check_gguf_cuda.py bundle/bin/step_driver "$STORE/$NAME" \
    /tmp/folio-gguf-work 2>&1 | tee "${OUT:-/tmp/folio-out}/check_gguf_cuda.log"
}

case "${1:-}" in
stage | collect | run) "$1" ;;
*) echo "usage: $0 stage|collect|run"; exit 2 ;;
esac
