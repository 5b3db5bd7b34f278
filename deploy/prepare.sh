#!/usr/bin/env bash
# Before `docker-compose -f deploy/compose.yaml build`: makes the base image
# (deploy/base-image.sh) and stages what the image build needs from outside
# the repository into deploy/context/ (ignored by git): the CA certificates pip
# uses (Folio's image for llguidance, GuideLLM's for GuideLLM). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/base-image.sh
mkdir -p deploy/context
# The images install from PyPI: pip there trusts the CA certificates
# this machine trusts (a TLS-inspecting proxy's among them, where there is one).
cp -u "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" deploy/context/ca-certificates.crt
echo "staged deploy/context: ca-certificates.crt"
