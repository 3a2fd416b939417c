#!/usr/bin/env bash
# Builds Jaeger v2 (`jaeger`: an OpenTelemetry Collector distribution with Jaeger's storage and query service) from
# the Go module proxy, the local stack's trace backend (ops/stack/services/jaeger.py: OTLP in, in-memory storage, the
# query API), with only the components the stack uses (deploy/local/jaeger/components.go; it needs a --config).
# Started in the background at low priority by deploy/local/prebuild.sh; the stack's fetch waits on its lock. First
# build: see docs/benchmarks.md; cached afterwards.
source "$(dirname "$0")/common.sh"
PIN=v1.76.0
COMPONENTS="$REPO_DIR/deploy/local/jaeger/components.go"
# A changed component list is a new build.
go_build_begin jaeger "$PIN-$(sha256sum "$COMPONENTS" | cut -c1-12)"
MODULE=github.com/jaegertracing/jaeger
echo "jaeger: building $MODULE/cmd/jaeger@$PIN with $(go env GOVERSION)"
started=$(date +%s)
# Its go.mod has a replace directive (sarama), so `go install module@version` refuses it: built inside the
# downloaded module as the main module, with its own go.sum (as deploy/local/fetch/seaweedfs.sh does).
SRC=$(go mod download -json "$MODULE@$PIN" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$SRC" ] && [ -f "$SRC/go.mod" ] || die "jaeger: $MODULE@$PIN could not be downloaded"
# The module's copy in the cache stays as downloaded (it is checksummed): the build edits a copy of its own.
WORK="$DEST/src"
rm -rf "$WORK" && cp -r "$SRC" "$WORK" && chmod -R u+w "$WORK"
cp "$COMPONENTS" "$WORK/cmd/jaeger/internal/components.go"
mkdir -p "$DEST/bin"
# -s -w: no symbol tables (a smaller binary, a shorter link).
(cd "$WORK" && every 30 jaeger go build -trimpath -ldflags "-s -w" -o "$DEST/bin/jaeger.tmp" ./cmd/jaeger)
rm -rf "$WORK"
mv "$DEST/bin/jaeger.tmp" "$DEST/bin/jaeger"
echo "$VERSION" > "$DEST/.ready"
echo "jaeger: built $DEST/bin/jaeger in $(( $(date +%s) - started ))s"
