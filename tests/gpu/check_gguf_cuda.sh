#!/usr/bin/env bash
# SmolLM2's GGUF on the H200: Folio's CUDA worker against transformers (tests/gpu/check_gguf_cuda.py).
# The file (94 MiB) is larger than what one device call carries (64 MiB with the tree), so it
# travels in parts, one call each, joined in /tmp/folio-gguf on the warm machine
# (bench/gpu/carry_parts.sh, which the speculative-decoding benchmark uses too):
#   here:   bench/gpu/carry_parts.sh stage              # .xfer/part0*
#   device: bench/gpu/carry_parts.sh collect            # carry .xfer/part00; again for each part
#   device: tests/gpu/check_gguf_cuda.sh run            # carry build-pack (the bundle)
# `run` joins the parts (their sha256 checked) and runs the check with bundle/bin/step_driver
# (deploy/bundle.sh builds it). Output also in $OUT.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
STORE=/tmp/folio-gguf
NAME=SmolLM2-135M-Instruct.Q4_1.gguf

run() {
  [ -f "$STORE/$NAME" ] || bash bench/gpu/carry_parts.sh join || exit 1
  export PYTHONPATH=/tmp/gsite${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
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
run) run ;;
*) echo "usage: $0 run (after bench/gpu/carry_parts.sh stage here and collect there)"; exit 2 ;;
esac
