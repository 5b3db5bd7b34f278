#!/usr/bin/env bash
# Before `docker-compose -f deploy/compose.yaml build`: makes the base image
# (deploy/base-image.sh) and stages what the image build needs from outside
# the repository into deploy/context/ (ignored by git): the Llama-2 tokenizer
# and TinyLlama config the demo model is made from, out of
# $FOLIO_SHARED/models, and the CA certificates pip uses. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${FOLIO_SHARED:-$(pwd)/../shared}
deploy/base-image.sh
for f in llama2-tokenizer/tokenizer.json llama2-tokenizer/tokenizer_config.json \
  llama2-tokenizer/special_tokens_map.json tinyllama-1.1b-shape/config.json; do
  [ -f "$SHARED/models/$f" ] || { echo "prepare: $SHARED/models/$f not found (set FOLIO_SHARED)" >&2; exit 2; }
  mkdir -p "deploy/context/models/$(dirname "$f")"
  cp -u "$SHARED/models/$f" "deploy/context/models/$f"
done
# GuideLLM's image installs from PyPI: pip there trusts the CA certificates
# this machine trusts (a TLS-inspecting proxy's among them, where there is one).
cp -u "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" deploy/context/ca-certificates.crt
echo "staged deploy/context: models, ca-certificates.crt"
