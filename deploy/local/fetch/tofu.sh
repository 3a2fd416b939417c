#!/usr/bin/env bash
# Builds OpenTofu's `tofu` from the Go module proxy, for the Terraform's offline formatting check
# (tests/integration/deploy: `tofu fmt -check`). Its go.mod has replace directives (OpenTofu's fork of hcl), so
# `go install module@version` refuses it: the module is downloaded into the stack's module cache and built there as
# the main module (docs/deploy.md). Started in the background by deploy/local/prebuild.sh after helm; the check runs
# it too, and waits on its lock.
source "$(dirname "$0")/common.sh"
MODULE=github.com/opentofu/opentofu
PIN=v1.12.6
go_build_begin tofu "$PIN"
echo "tofu: building $MODULE@$PIN with $(go env GOVERSION)"
SRC=$(go mod download -json "$MODULE@$PIN" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$SRC" ] && [ -f "$SRC/go.mod" ] || die "tofu: $MODULE@$PIN could not be downloaded"
started=$(date +%s)
(cd "$SRC" && go build -trimpath -ldflags "-s -w" -o "$DEST/tofu.tmp" ./cmd/tofu)
mv "$DEST/tofu.tmp" "$DEST/tofu"
echo "$VERSION" > "$DEST/.ready"
echo "tofu: built $DEST/tofu in $(( $(date +%s) - started ))s"
