#!/usr/bin/env bash
# What the speculative-decoding benchmark needs on the GPU machine and no device call can carry
# at once: SmolLM2's GGUF (trained weights: random ones accept no drafts), and with --vllm vLLM
# 0.26's wheels for its n-gram proposer beside Folio's. Packed here into parts sized to what a
# call has left beside the tree, sent one call each to one warm machine, joined there.
#   here:    bench/gpu/carry_parts.sh stage [--vllm]   # .xfer/partNN (ignored by git)
#   device:  bench/gpu/carry_parts.sh collect          # once per part, carry [".xfer/partNN"],
#                                                      # each call within 30 s of the last
#   device:  bench/gpu/carry_parts.sh join             # after the last part, in any later call
# join leaves /tmp/folio-gguf/SmolLM2-135M-Instruct.Q4_1.gguf (what Folio serves), /tmp/smol-hf
# (gguf_to_hf.py's folder: vLLM's model and GuideLLM's tokenizer) and with --vllm /tmp/vsite
# (guidellm_bench.sh's vLLM presets read it). docs/benchmarks.md has the servers to run.
set -euo pipefail
cd "$(dirname "$0")/../.."
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
XF=/tmp/xf

stage() {
  local src=${FOLIO_SMOLLM2:-models/smollm2/$NAME} w=/tmp/carry-parts
  [ -f "$src" ] || { echo "$src is missing: deploy/setup.sh fetches it"; exit 1; }
  rm -rf "$w" .xfer && mkdir -p "$w" .xfer
  xz -T2 -6 -c "$src" >"$w/gguf.xz"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 -d "$w" gguf==0.19.0 accelerate==1.16.0
  if [ "${1:-}" = --vllm ]; then
    PART_MB=1000 bash ../shared/tools/vllm/pack.sh .xfer/vllm >/dev/null
    mv .xfer/vllm/p00 "$w/vllm.tar.xz" && rm -rf .xfer/vllm
  fi
  (cd "$w" && sha256sum -- * >SHA256SUMS)
  grep -qxF /.xfer/ "$(git rev-parse --git-path info/exclude)" ||
    echo /.xfer/ >>"$(git rev-parse --git-path info/exclude)"
  # A call carries 64 MiB with the tree; leave 1 MiB of room.
  local tree part
  tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s |
    awk '{s += $1} END {print s + 0}')
  part=$((63 * 1048576 - tree))
  tar cf - -C "$w" . | split -b "$part" -d -a 2 - .xfer/part
  ls -la .xfer
  echo "$(ls .xfer | wc -l) calls of one part each (parts of $((part / 1048576)) MiB beside a tree of $((tree / 1048576)) MiB)"
}

collect() {
  mkdir -p "$XF" && cp .xfer/part* "$XF/" && ls -la "$XF"
}

join() {
  mkdir -p "$XF/in" /tmp/folio-gguf
  cat "$XF"/part* | tar xf - -C "$XF/in"
  (cd "$XF/in" && sha256sum -c --quiet SHA256SUMS) || { echo "join: a part is missing"; exit 1; }
  xz -dc "$XF/in/gguf.xz" >"/tmp/folio-gguf/$NAME"
  if [ -f "$XF/in/vllm.tar.xz" ] && [ ! -d /tmp/vsite/vllm ]; then
    xz -dc "$XF/in/vllm.tar.xz" | tar xf - -C /tmp
    PYTHONPATH=/tmp/vsite python3 -c 'import vllm; print("vllm", vllm.__version__)'
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/gsite "$XF"/in/*.whl
  [ -f /tmp/smol-hf/config.json ] ||
    PYTHONPATH=/tmp/gsite python3 bench/gpu/gguf_to_hf.py "/tmp/folio-gguf/$NAME" /tmp/smol-hf
  ls /tmp/smol-hf
}

case "${1:-}" in
  stage) stage "${2:-}" ;;
  collect) collect ;;
  join) join ;;
  *) sed -n 2,12p "$0"; exit 2 ;;
esac
