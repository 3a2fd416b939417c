# Shared helpers for the fetch scripts. Sourced, never executed.
# Every script gets STACK_DIR (the ignored cache/data folder) and REPO_DIR from the caller.
set -euo pipefail
: "${STACK_DIR:?STACK_DIR must be set}"
: "${REPO_DIR:?REPO_DIR must be set}"
CACHE_DIR="$STACK_DIR/cache"
M2_REPO="$CACHE_DIR/m2"
MVN_SETTINGS="$REPO_DIR/deploy/local/maven/settings.xml"
mkdir -p "$CACHE_DIR" "$M2_REPO"

die() { echo "error: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "'$1' is not installed; $2"; }

# ready MARKER VERSION: true when MARKER records VERSION (the fetch was completed before).
ready() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

mvn_run() {
  need mvn "install Maven (apt-get install maven)"
  # -B: no colour/progress noise in logs; a private local repository keeps everything under STACK_DIR.
  mvn -B -q -Dstyle.color=never -s "$MVN_SETTINGS" -Dmaven.repo.local="$M2_REPO" "$@"
}
