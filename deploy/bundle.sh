#!/usr/bin/env bash
# Builds Folio (Release, CUDA on) and gathers what the GPU machine needs into
# bundle/ (ignored by git), which travels with a device call:
#   bundle/bin     the programs and tools
#   bundle/lib     the non-system shared libraries they link (jansson, nng, h2o, ...);
#                  never libc/libm/libstdc++ or the CUDA libraries, which the device has
#   bundle/models  the Llama-2 tokenizer and the TinyLlama-shaped config.json
#   bundle/tests   the fixture writer and reference helpers the device scripts use
# Run it there with LD_LIBRARY_PATH=bundle/lib (a RUNPATH would not reach the
# libraries' own dependencies, such as h2o's libwslay).
#
# Usage: deploy/bundle.sh [TARGET...]   (default: all targets)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${FOLIO_BUNDLE_BUILD:-$ROOT/build-bundle}
ASSETS=$ROOT/assets
OUT=$ROOT/bundle

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFOLIO_CUDA=ON >/dev/null
if [ $# -gt 0 ]; then
  cmake --build "$BUILD" -j2 --target "$@"
else
  cmake --build "$BUILD" -j2
fi

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/models" "$OUT/tests"
find "$BUILD/bin" -maxdepth 1 -type f -perm -u+x -exec cp {} "$OUT/bin/" \;
strip --strip-debug "$OUT"/bin/* 2>/dev/null || true
# h2load (nghttp2-client): bench/serve_path_bench.py --wide drives the real model with it, a C
# client that can offer the load GuideLLM's Python processes cannot (docs/ANALYSIS.md, the client).
if command -v h2load >/dev/null; then cp "$(command -v h2load)" "$OUT/bin/"; fi

# Shared libraries from ldd, minus what every Linux and the CUDA toolkit provide.
system_lib='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcublasLt|libnvidia|libgomp)'
for exe in "$OUT"/bin/*; do
  ldd "$exe" 2>/dev/null | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $system_lib ]]; then
    cp -L "$path" "$OUT/lib/$name"
  fi
done
# libgomp (OpenMP) is not on every machine: carry it too.
for exe in "$OUT"/bin/*; do ldd "$exe" 2>/dev/null | awk '/libgomp/ {print $3}'; done | sort -u |
  while read -r path; do cp -L "$path" "$OUT/lib/"; done
# The structured-output engine (llguidance's _lib.abi3.so) and the libpython it needs are among
# them; without their debug sections they weigh a third (a device call carries 64 MiB at most).
chmod u+w "$OUT"/lib/*
strip --strip-debug "$OUT"/lib/* 2>/dev/null || true

cp -r "$ASSETS/models/llama2-tokenizer" "$OUT/models/"
mkdir -p "$OUT/models/tinyllama-1.1b-shape"
cp "$ASSETS/models/tinyllama-1.1b-shape/config.json" "$OUT/models/tinyllama-1.1b-shape/"
cp tests/fixtures/make_tiny_model.py "$OUT/tests/"

# What the binaries were built from: a device run prints it, so a bundle rebuilt by someone
# else in between (the folder is shared by everyone on this checkout) shows up at once.
{
  echo "built $(date -u +%FT%TZ) in $BUILD"
  echo "HEAD $(git rev-parse HEAD 2>/dev/null)"
  echo "uncommitted diff sha1 $(git diff HEAD 2>/dev/null | sha1sum | cut -c1-12)"
} >"$OUT/SOURCE.txt"

du -sh "$OUT"
ls "$OUT/bin" "$OUT/lib"
