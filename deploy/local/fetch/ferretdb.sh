#!/usr/bin/env bash
# Builds FerretDB v1 (PostgreSQL backend) from the Go module proxy through the wrapper module in deploy/local/ferretdb.
source "$(dirname "$0")/common.sh"
SRC="$REPO_DIR/deploy/local/ferretdb"
VERSION=$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -c1-16)
DEST="$CACHE_DIR/ferretdb"
ready "$DEST/.ready" "$VERSION" && { echo "ferretdb: cached"; exit 0; }
need go "install Go 1.24 or newer"
mkdir -p "$DEST"
fetch_lock "$DEST"
ready "$DEST/.ready" "$VERSION" && { echo "ferretdb: cached"; exit 0; }
go_caches
echo "ferretdb: building with $(go version | cut -d' ' -f3) (first build takes about a minute)"
every 5 "ferretdb: building" go -C "$SRC" build -trimpath -o "$DEST/ferretdb-run" .
echo "$VERSION" > "$DEST/.ready"
echo "ferretdb: built $DEST/ferretdb-run"
