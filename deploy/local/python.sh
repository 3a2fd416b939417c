# Sourced by bootstrap.sh and unit-python.sh: which Python interpreters metalake runs on.
# The range is pyproject.toml's requires-python (the pins bound it: see the comment there).
METALAKE_PYTHON_MIN=11   # 3.11
METALAKE_PYTHON_MAX=14   # 3.14

# python_ok CMD: true if CMD runs and is a Python metalake supports (a pyenv shim of an inactive version fails here).
python_ok() {
  command -v "$1" >/dev/null 2>&1 &&
    "$1" -c "import sys; sys.exit(not (3, $METALAKE_PYTHON_MIN) <= sys.version_info[:2] <= (3, $METALAKE_PYTHON_MAX))" \
      >/dev/null 2>&1
}

# newest_python: the newest supported Python on PATH, as an absolute path; empty if none.
newest_python() {
  local minor candidate
  for ((minor = METALAKE_PYTHON_MAX; minor >= METALAKE_PYTHON_MIN; minor--)); do
    candidate="python3.$minor"
    if python_ok "$candidate"; then command -v "$candidate"; return; fi
  done
  if python_ok python3; then command -v python3; fi
}
