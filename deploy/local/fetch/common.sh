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

# Maven Central over plain HTTPS, for files fetched without Maven (the Trino server tarball, with progress).
MAVEN_CENTRAL="${METALAKE_MAVEN_CENTRAL:-https://repo1.maven.org/maven2}"

mvn_run() {
  need mvn "install Maven (apt-get install maven)"
  need flock "install util-linux"
  # -B: no colour/progress noise in logs; a private local repository keeps everything under STACK_DIR. One Maven at a
  # time on that repository (Maven 3.8 does not lock it; the stack fetches its services in parallel).
  flock "$M2_REPO/.metalake-maven.lock" \
    mvn -B -q -Dstyle.color=never -s "$MVN_SETTINGS" -Dmaven.repo.local="$M2_REPO" "$@"
}

# One fetch of a service at a time (the background prefetch of `make demo`, deploy/local/prefetch.sh, and the stack's
# own fetch): hold the lock of DEST for the rest of the script. The caller checks its .ready marker again after it.
fetch_lock() {
  need flock "install util-linux"
  mkdir -p "$(dirname "$1")"
  exec 9>"$1.lock"
  flock -n 9 || { echo "$(basename "$1"): another fetch is running; waiting for it"; flock 9; }
}

# every N NAME CMD...: run CMD, printing "NAME: still running (Ns)" every N seconds (what the stack shows as progress).
every() {
  local interval=$1 name=$2 started pid rc=0
  shift 2
  started=$(date +%s)
  "$@" &
  pid=$!
  while ! wait_for "$pid" "$interval"; do
    echo "$name: still running ($(( $(date +%s) - started ))s)"
  done
  wait "$pid" || rc=$?
  return $rc
}

# wait_for PID SECONDS: true once PID has exited, false if it still runs after SECONDS.
wait_for() {
  local i
  for (( i = 0; i < $2 * 10; i++ )); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  ! kill -0 "$1" 2>/dev/null
}

# download URL FILE NAME: fetch URL into FILE over HTTPS (Maven Central is a plain HTTPS repository), a progress line
# every 5 s ("NAME: 412 of 821 MB (35s)"), then check the SHA-1 Maven Central publishes beside every file.
download() {
  local url=$1 file=$2 name=$3 total started pid rc=0
  need curl "install curl (apt-get install curl)"
  total=$(curl -fsSIL "$url" | tr -d '\r' | awk 'tolower($1) == "content-length:" {n = $2} END {print n + 0}')
  started=$(date +%s)
  curl -fsSL --retry 3 -o "$file.part" "$url" &
  pid=$!
  while ! wait_for "$pid" 5; do
    echo "$name: $(( $(stat -c %s "$file.part" 2>/dev/null || echo 0) / 1000000 )) of $(( total / 1000000 )) MB ($(( $(date +%s) - started ))s)"
  done
  wait "$pid" || rc=$?
  [ "$rc" = 0 ] || { rm -f "$file.part"; die "$name: download of $url failed (curl exit $rc)"; }
  local want got
  want=$(curl -fsSL "$url.sha1" | cut -c1-40) || die "$name: no checksum at $url.sha1"
  got=$(sha1sum "$file.part" | cut -c1-40)
  [ "$want" = "$got" ] || { rm -f "$file.part"; die "$name: checksum mismatch for $url ($got, expected $want)"; }
  mv "$file.part" "$file"
  echo "$name: downloaded $(( total / 1000000 )) MB in $(( $(date +%s) - started ))s"
}

# go_build_begin NAME PIN: the shared prologue of the scripts that build a Go program into $CACHE_DIR/NAME. Sets
# VERSION (PIN and the Go version) and DEST; exits 0 when that build is cached; otherwise waits for a build already
# running (deploy/local/prebuild.sh starts some in the background at the lowest priority: someone waiting for it now
# raises it to the normal one, where allowed), looks again, and sets the stack's Go caches.
go_build_begin() {
  need go "install Go 1.26 or newer"
  VERSION="$2-$(go env GOVERSION)"
  DEST="$CACHE_DIR/$1"
  ready "$DEST/.ready" "$VERSION" && { echo "$1: cached"; exit 0; }
  mkdir -p "$DEST"
  need flock "install util-linux"
  exec 9>"$DEST/.lock"
  if ! flock -n 9; then
    echo "$1: a build is running; raising its priority and waiting for it"
    [ -f "$DEST/.pid" ] && raise_priority "$(cat "$DEST/.pid")"
    flock 9
  fi
  ready "$DEST/.ready" "$VERSION" && { echo "$1: cached"; exit 0; }
  echo $$ > "$DEST/.pid"
  go_caches
}

# go_install NAME PIN PACKAGE: builds PACKAGE@PIN with `go install` into $CACHE_DIR/NAME/bin, for modules without
# replace directives (the others, which `go install` refuses, are built inside their downloaded module: jaeger.sh).
go_install() {
  go_build_begin "$1" "$2"
  echo "$1: building $3@$2 with $(go env GOVERSION)"
  local started
  started=$(date +%s)
  GOBIN="$DEST/bin" go install -trimpath -ldflags "-s -w" "$3@$2"
  echo "$VERSION" > "$DEST/.ready"
  echo "$1: built $DEST/bin/$(basename "$3") in $(( $(date +%s) - started ))s"
}

# go_caches: the go command's own module and build caches (`go env GOMODCACHE GOCACHE`: ~/go/pkg/mod and
# ~/.cache/go-build unless set), shared by every checkout on the machine, as pip's cache is. Why not the stack's own
# any more: a fresh clone then compiled every package of Jaeger, helm, FerretDB and hclfmt again, about 18 CPU-minutes
# of its `make test` (docs/benchmarks.md); with the machine's caches a clone's builds compile only what changed. One
# copy per machine, not one per clone (per-clone copies of 11 GB once filled a CI run's disk); Go trims build cache
# entries unused for five days. -modcacherw keeps the module cache removable (`go clean -modcache`).
go_caches() {
  GOMODCACHE=$(go env GOMODCACHE) GOCACHE=$(go env GOCACHE)
  export GOMODCACHE GOCACHE GOFLAGS=-modcacherw
}

# raise_priority PID: PID and its descendants back to niceness 0 (the compilers a build starts later inherit its
# `go` command's); needs the privilege to lower a niceness (root), else it changes nothing.
raise_priority() {
  local child
  renice -n 0 -p "$1" >/dev/null 2>&1 || return 0
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do raise_priority "$child"; done
}
