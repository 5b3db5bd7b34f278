#!/usr/bin/env bash
# Folio's CPU backend against llama.cpp's server on the default model (issue 58), on this machine:
# builds llama-cpp-python[server] from its PyPI source (llama.cpp compiled with cmake for this
# processor; slow on 2 cores) and GuideLLM 0.8.1 into venvs under build-llamacpp/ (ignored by
# git), then runs bench/cpu_vs_llamacpp.py, which serves the same GGUF file with each, the same
# thread count, alternately, and prints the table of record (bench/results/CPU.md keeps it).
# Usage: bench/cpu_vs_llamacpp.sh [BUILD_DIR] [-- options for cpu_vs_llamacpp.py]
#   BUILD_DIR: Folio's build (default build-cpu, as docs/DESIGN.md builds it without CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-cpu}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
VENVS=build-llamacpp
MODEL=models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

deploy/fetch_smollm2.sh >/dev/null
mkdir -p "$VENVS"
if ! "$VENVS/venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
  python3 -m venv "$VENVS/venv"
  echo "building llama-cpp-python[server] from source (llama.cpp with cmake; tens of minutes)"
  # This machine's instruction sets named, not -march=native: native turns on llama.cpp's AMX
  # kernels, whose batched matmul crashes on this machine (SIGSEGV in ggml_backend_amx_mul_mat
  # on the first prompt of more than one token, llama-cpp-python 0.3.36).
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_BF16=ON \
-DGGML_AVX_VNNI=ON" "$VENVS/venv/bin/pip" install -q --no-binary llama-cpp-python \
    'llama-cpp-python[server]'
fi
if ! "$VENVS/glvenv/bin/python" -c 'import guidellm' 2>/dev/null; then
  python3 -m venv "$VENVS/glvenv"
  "$VENVS/glvenv/bin/pip" install -q guidellm==0.8.1
fi
"$VENVS/venv/bin/python" -c 'import llama_cpp; print("llama-cpp-python", llama_cpp.__version__)'
exec python3 bench/cpu_vs_llamacpp.py --model "$MODEL" --folio "$BUILD/bin/folio" \
  --llama-python "$VENVS/venv/bin/python" --guidellm-python "$VENVS/glvenv/bin/python" \
  --tokenizer assets/models/llama2-tokenizer --threads "$(nproc)" "$@"
