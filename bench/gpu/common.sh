# Sourced by the scripts that run on the GPU machine (bench/gpu/*.sh, tests/gpu/run.sh), from the
# repo root, with bundle/ unpacked there (deploy/bundle.sh): sets ROOT, B (the bundle's binaries),
# OUT (default /tmp/folio-out, created) and LD_LIBRARY_PATH (the bundle's libraries, and
# libcublasLt from the toolkit or PyTorch's wheels where the image has no other).
ROOT=$(pwd)
B=$ROOT/bundle/bin
OUT=${OUT:-/tmp/folio-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
if [ -x "$B/step_driver" ] && ldd "$B/step_driver" | grep -q "not found"; then
  for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null); do
    [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
  done
fi

# The card's identity and limits, and the build: each figure names its card and commit.
folio_env_report() {
  ldd "$B/step_driver" | grep -E "not found|cublas|cudart"
  nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu --format=csv
  env | grep -E "^FOLIO_" || true
  cat "$ROOT/bundle/SOURCE.txt" 2>/dev/null || echo "bundle/SOURCE.txt missing (bundle from an older deploy/bundle.sh)"
}

# The TinyLlama-shaped checkpoint the timings and checks share, at /tmp/tl (once per machine).
folio_tinyllama() {
  [ -f /tmp/tl/config.json ] && return 0
  python3 bench/make_checkpoint.py /tmp/tl --config bundle/models/tinyllama-1.1b-shape/config.json \
    --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null
}

# The Llama-3-8B-shaped checkpoint (random bf16 weights, the Llama-2 tokenizer; 16 GB) where
# guidellm_bench.sh --shape llama3-8b writes and reuses it; its tokenizer is copied last.
L8=/tmp/folio-llama3-8b-ckpt
folio_llama3_8b() {
  [ -f $L8/tokenizer.json ] && return 0
  python3 bench/make_checkpoint.py $L8 --config assets/models/llama3-8b-shape/config.json \
    --tokenizer-dir bundle/models/llama2-tokenizer --device cuda >/dev/null
}

# A fixture model (tests/fixtures/make_tiny_model.py): folio_fixture DIR ARGS...
folio_fixture() {
  local dir=$1
  shift
  [ -f "$dir/config.json" ] && return 0
  python3 tests/fixtures/make_tiny_model.py "$dir" "$@" >/dev/null
}
