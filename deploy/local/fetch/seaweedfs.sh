#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (master, volume, filer and S3 gateway in one binary) from the Go module proxy, for a lake
# on S3 in the local stack. Its go.mod has a replace directive, so `go install module@version` refuses it: the module
# is downloaded into the stack's module cache and built there as the main module. First build: a few minutes on two
# cores (the module cache takes about 2 GB while it builds); cached afterwards.
source "$(dirname "$0")/common.sh"
MODULE=github.com/seaweedfs/seaweedfs
PIN=v0.0.0-20261109003541-7506e5f91cd6
go_build_begin seaweedfs "$PIN"
echo "seaweedfs: building $MODULE@$PIN with $(go env GOVERSION) (first build takes several minutes)"
SRC=$(go mod download -json "$MODULE@$PIN" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$SRC" ] && [ -f "$SRC/go.mod" ] || die "seaweedfs: $MODULE@$PIN could not be downloaded"
started=$(date +%s)
# -s -w: no symbol tables (a smaller binary and a shorter link of a very large program).
(cd "$SRC" && go build -trimpath -ldflags "-s -w" -o "$DEST/weed.tmp" ./weed)
mv "$DEST/weed.tmp" "$DEST/weed"
echo "$VERSION" > "$DEST/.ready"
echo "seaweedfs: built $DEST/weed in $(( $(date +%s) - started ))s"
