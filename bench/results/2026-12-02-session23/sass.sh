#!/usr/bin/env bash
# The SASS facts round 29 quotes, with no GPU (nvcc here; cuobjdump from PyPI, installed under
# /tmp on first use, with nvdisasm):
#   - SASS instructions of silu_mul_norm_kernel before the rewrite (a0a5872) and after it
#     (4044bb1), and how many of them are FCHK (the IEEE division's check) and MUFU;
#   - registers of the b256 decode attention kernel on main and on branch attn-l2early, and the
#     bulk L2 prefetches (UBLKPF) in the latter.
# Run from the repo root: bash bench/results/2026-12-02-session23/sass.sh
set -euo pipefail
ROOT=$(pwd)
T=/tmp/folio-sass23
mkdir -p "$T"
[ -x /tmp/cuobj/nvidia/cu13/bin/cuobjdump ] ||
  python3 -m pip install -q --target /tmp/cuobj nvidia-cuda-cuobjdump
[ -x /tmp/nvdis/nvidia/cu13/bin/nvdisasm ] ||
  python3 -m pip install -q --target /tmp/nvdis nvidia-cuda-nvdisasm
export PATH=/tmp/nvdis/nvidia/cu13/bin:$PATH
OBJDUMP=/tmp/cuobj/nvidia/cu13/bin/cuobjdump
compile() { # rev file -> object
  local src=$T/$1
  rm -rf "$src" && mkdir -p "$src"
  git -C "$ROOT" archive "$1" kernels common | tar -x -C "$src"
  nvcc -I"$src/kernels" -I"$src/common" -gencode=arch=compute_90a,code=sm_90a -O3 -DNDEBUG \
    -x cu -c "$src/kernels/$2" -o "$src/${2%.cu}.o"
  echo "$src/${2%.cu}.o"
}
# The body of one function in cuobjdump -sass output: its instruction lines.
body() { awk -v k="$2" '$0 ~ "Function : "k {f=1; next} /Function :/ {f=0} f' "$1" |
  grep -E '^\s+/\*[0-9a-f]{4}\*/'; }
for rev in a0a5872 4044bb1; do
  o=$(compile $rev silu_mul.cu)
  $OBJDUMP -sass "$o" >"$o.sass"
  b=$(body "$o.sass" '_Z20silu_mul_norm_kernel')
  echo "silu_mul_norm_kernel at $rev: $(wc -l <<<"$b") instructions," \
    "$(grep -c ' FCHK ' <<<"$b" || true) FCHK, $(grep -c ' MUFU' <<<"$b" || true) MUFU"
done
K='_Z23attention_decode_kernelILi64ELi1ELi1ELi2EEv11decode_argsPKj16folio_k_row_norm'
for rev in main attn-l2early; do
  o=$(compile $rev attention_decode.cu)
  $OBJDUMP -sass "$o" >"$o.sass"
  regs=$($OBJDUMP -res-usage "$o" | grep -A1 "$K" | grep -o 'REG:[0-9]*')
  echo "attention_decode_kernel<64, 1, 1, 2> at $rev: $regs," \
    "$(body "$o.sass" "$K" | grep -c UBLKPF || true) UBLKPF"
done
