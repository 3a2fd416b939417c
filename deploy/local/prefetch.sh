#!/usr/bin/env bash
# Starts the local stack's fetches that need nothing from the virtualenv (Kafka's jars with Maven, Trino's 820 MB
# server from Maven Central, FerretDB's Go build, Debian's prometheus package) in the background, each into its own
# .stack/logs/fetch-<service>.log, so that on a fresh clone they run while the bootstrap installs the virtualenv
# (`make demo` and `make test` run this first). Each
# fetch script takes a lock: `metalake stack up` waits for a running one, then finds it cached. Returns at once; a fetch
# that fails here (Maven or Go missing before the bootstrap installs them) is simply run again by the stack.
set -euo pipefail
REPO_DIR=$(cd "$(dirname "$0")/../.." && pwd)
STACK_DIR="${METALAKE_STACK__DIR:-$REPO_DIR/.stack}"
command -v flock >/dev/null 2>&1 || exit 0
mkdir -p "$STACK_DIR/logs"
for service in kafka trino ferretdb prometheus; do
  [ -f "$STACK_DIR/cache/$service/.ready" ] && continue
  log="$STACK_DIR/logs/fetch-$service.log"
  STACK_DIR="$STACK_DIR" REPO_DIR="$REPO_DIR" nohup bash "$REPO_DIR/deploy/local/fetch/$service.sh" \
    >>"$log" 2>&1 </dev/null &
  echo "[prefetch] fetching $service in the background (log: $log)"
done
