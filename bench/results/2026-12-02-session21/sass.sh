#!/usr/bin/env bash
# The SASS facts round 27 quotes about decode attention's kernel (the b256 form,
# attention_decode_kernel<64, 1, 1, QKV_ROPE_NORM>), for main and the branches
# swizzle, swizzle-aligned and prologue. No GPU: nvcc here, cuobjdump and
# nvdisasm from PyPI (installed under /tmp on first use). For each revision:
#   - registers and spills (ptxas -v);
#   - SASS instructions and ldmatrix (LDSM) count;
#   - the shared-memory base the stages' addresses start from (0x400 is the
#     first byte after the reserved 1 KB; + 0x10 puts the region 16 bytes past
#     a 128-byte line);
#   - the first global loads and the early EXIT, in program order (the
#     prologue's metadata round trips).
# Run from the repo root: bash bench/results/2026-12-02-session21/sass.sh
set -euo pipefail
ROOT=$(pwd)
T=/tmp/folio-sass
mkdir -p "$T"
[ -x /tmp/cuobj/nvidia/cu13/bin/cuobjdump ] ||
  python3 -m pip install -q --target /tmp/cuobj nvidia-cuda-cuobjdump
[ -x /tmp/nvdis/nvidia/cu13/bin/nvdisasm ] ||
  python3 -m pip install -q --target /tmp/nvdis nvidia-cuda-nvdisasm
export PATH=/tmp/nvdis/nvidia/cu13/bin:$PATH
K='_Z23attention_decode_kernelILi64ELi1ELi1ELi2EEv11decode_argsPKj16folio_k_row_norm'
for rev in main swizzle swizzle-aligned prologue; do
  src=$T/$rev
  rm -rf "$src" && mkdir -p "$src"
  git -C "$ROOT" archive "$rev" kernels common | tar -x -C "$src"
  nvcc -I"$src/kernels" -I"$src/common" -gencode=arch=compute_90a,code=sm_90a -O3 -DNDEBUG \
    -Xptxas -v -x cu -c "$src/kernels/attention_decode.cu" -o "$src/ad.o" 2>"$src/ptxas.txt"
  regs=$(grep -A3 "Compiling entry function '$K'" "$src/ptxas.txt" | grep -o "Used [0-9]* registers")
  spill=$(grep -A3 "Compiling entry function '$K'" "$src/ptxas.txt" | grep -o "[0-9]* bytes spill stores")
  /tmp/cuobj/nvidia/cu13/bin/cuobjdump -sass -fun "$K" "$src/ad.o" |
    grep -E '/\*[0-9a-f]+\*/ +[@!A-Z]' | sed 's@/\* 0x[0-9a-f]* \*/@@; s/  */ /g' >"$src/k.sass"
  echo "== $rev: $regs, $spill, $(wc -l <"$src/k.sass") SASS instructions, $(grep -c LDSM "$src/k.sass") LDSM"
  # the first register set to 0x400 and then offset by an immediate (the dynamic region's start)
  base=$(python3 - "$src/k.sass" <<'PY'
import re, sys
reg = None
for line in open(sys.argv[1]):
    m = re.search(r"MOV (R\d+), 0x400 ;", line)
    if m:
        reg = m.group(1)
        continue
    m = reg and re.search(r"VIADD R\d+, %s, (0x[0-9a-f]+)" % reg, line)
    if m:
        print(m.group(1))
        break
PY
)
  echo "   shared region: 0x400 + $base"
  echo "   first loads and exits:"
  grep -E 'LDG|EXIT|LDGSTS' "$src/k.sass" | head -5 | sed 's/^/     /'
done
