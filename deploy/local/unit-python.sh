#!/usr/bin/env bash
# Runs the unit tests (tests/unit: no services) under another supported Python, in a venv of its own that is kept
# beside the stack's: .stack/venv-<version>, with metalake and all its extras installed editable from this checkout
# (re-installed when pyproject.toml changes). The local stack keeps using .stack/venv.
#   bash deploy/local/unit-python.sh python3.13 [pytest args...]      (or: make unit-py PY=python3.13)
set -euo pipefail
REPO_DIR=$(cd "$(dirname "$0")/../.." && pwd)
STACK_DIR="${METALAKE_STACK__DIR:-$REPO_DIR/.stack}"
log() { echo "[unit-python] $*"; }
die() { echo "[unit-python] error: $*" >&2; exit 1; }
# shellcheck source=deploy/local/python.sh
. "$REPO_DIR/deploy/local/python.sh"

[ $# -ge 1 ] || die "usage: $0 PYTHON [pytest args...]   e.g. $0 python3.13"
PYTHON=$1; shift
python_ok "$PYTHON" || die "$PYTHON is not on PATH or not a Python 3.$METALAKE_PYTHON_MIN-3.$METALAKE_PYTHON_MAX"
version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
VENV="$STACK_DIR/venv-$version"

mkdir -p "$STACK_DIR"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtualenv $VENV with $("$PYTHON" -V)"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.metalake-installed"
want=$(sha256sum < "$REPO_DIR/pyproject.toml" | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing metalake and its dependencies into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e "$REPO_DIR[all]"
  echo "$want" > "$stamp"
fi
cd "$REPO_DIR"
log "$("$VENV/bin/python" -V): pytest tests/unit $*"
exec "$VENV/bin/python" -m pytest tests/unit "$@"
