#!/usr/bin/env bash
# Packs what a device call carries (bundle/, and .whl/ when present) into one xz tarball,
# build-pack/carry.tar.xz (ignored by git). The tracked tree (bench/results grows each session)
# plus bundle/ and .whl/ as they are passed the device tool's 64 MiB limit; packed, the
# programs' fatbins shrink about five-fold. Carry build-pack and unpack first on the device:
#     deploy/bundle.sh && deploy/pack.sh          # here
#     tar xJf build-pack/carry.tar.xz && ...      # the device call's command, carry ["build-pack"]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f bundle/SOURCE.txt ] || { echo "pack: no bundle/ (run deploy/bundle.sh)" >&2; exit 1; }
dirs=(bundle)
[ -d .whl ] && dirs+=(.whl)
mkdir -p build-pack
tar cf - "${dirs[@]}" | xz -6 -T2 >build-pack/carry.tar.xz
echo "packed ${dirs[*]}: $(du -h build-pack/carry.tar.xz | cut -f1) (carry build-pack; tar xJf build-pack/carry.tar.xz there)"
