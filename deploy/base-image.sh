#!/usr/bin/env bash
# Makes the Debian 12 base image that deploy/Dockerfile builds FROM, without a
# registry: debootstrap (minbase) from the Debian mirror this machine's apt
# already uses, then `docker import`. Idempotent: does nothing when the image
# exists. Needs root, debootstrap and a running dockerd.
#
# Usage: deploy/base-image.sh [IMAGE]   (default folio-base:bookworm)
set -euo pipefail
IMAGE=${1:-${FOLIO_BASE_IMAGE:-folio-base:bookworm}}

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE: present"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "base-image: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 2; }

# The first http(s) mirror in apt's sources, one-line or deb822 format.
mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
  awk '/^deb / {print $2; exit} /^URIs:/ && $2 !~ /security/ {print $2; exit}' || true)
mirror=${FOLIO_DEBIAN_MIRROR:-${mirror:-http://deb.debian.org/debian}}

root=$(mktemp -d /tmp/folio-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "base image $IMAGE: debootstrap bookworm from $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 ||
  { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
# Inside the image apt uses the same mirror.
echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
echo "deb $mirror bookworm-updates main" >>"$root/etc/apt/sources.list"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
  -c 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'CMD ["/bin/bash"]' - "$IMAGE" >/dev/null
echo "base image $IMAGE: imported ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
