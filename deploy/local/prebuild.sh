#!/usr/bin/env bash
# Starts the local stack's one slow build from source, SeaweedFS (6 to 10 minutes of both cores from a fresh
# checkout: a 2.8 GB module cache and a very large Go program), in the background at the lowest CPU priority, so that
# on a fresh clone it overlaps lint and the unit tests instead of holding the first integration test that needs it.
# seaweedfs.sh takes a lock: the stack's own fetch of the service waits for this build, then finds it cached.
# Returns at once; does nothing when the build is cached or Go is missing (the stack's fetch then says why).
set -euo pipefail
REPO_DIR=$(cd "$(dirname "$0")/../.." && pwd)
STACK_DIR="${METALAKE_STACK__DIR:-$REPO_DIR/.stack}"
command -v go >/dev/null 2>&1 || exit 0
[ -f "$STACK_DIR/cache/seaweedfs/.ready" ] && exit 0
mkdir -p "$STACK_DIR/logs"
log="$STACK_DIR/logs/fetch-seaweedfs.log"
STACK_DIR="$STACK_DIR" REPO_DIR="$REPO_DIR" nohup nice -n 19 bash "$REPO_DIR/deploy/local/fetch/seaweedfs.sh" \
  >>"$log" 2>&1 </dev/null &
echo "[prebuild] building SeaweedFS in the background, at low priority (log: $log)"
