#!/usr/bin/env bash
# Downloads GuideLLM and the dependencies that the GPU machine's image lacks,
# as wheels for CPython 3.12 manylinux x86_64, into .whl/ (ignored by git;
# carried to the GPU machine by bench/gpu scripts). The GPU image already has
# torch, transformers, numpy, pandas, pyarrow, huggingface-hub, httpx, rich,
# pyyaml, uvloop, aiofiles, multidict, msgpack, protobuf, tabulate, xxhash,
# fsspec, tqdm, wrapt, setuptools (see the device tool's KINDS.md); the pinned
# list in guidellm-wheels.txt is everything else GuideLLM 0.8.1 requires.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d .whl -r bench/guidellm-wheels.txt
du -sh .whl
