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
# What a call carries: the tracked and untracked-not-ignored files, plus the pack (64 MiB at most).
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null |
  awk '{s += $1} END {print s + 0}')
total=$((tree + $(stat -c %s build-pack/carry.tar.xz)))
echo "a call carries $((total / 1048576)) MiB (the tree $((tree / 1048576)) MiB, the pack included) of 64"
[ "$total" -le $((64 * 1048576)) ] || echo "pack: over the device tool's 64 MiB: trim bench/results (README there) or pack less" >&2
