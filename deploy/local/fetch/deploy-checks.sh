#!/usr/bin/env bash
# A virtual environment of its own for the deployment artifacts' offline checks: checkov (Terraform's static analysis;
# it pins dozens of packages that would fight the project's own venv) and kubernetes-validate (the rendered chart
# against the Kubernetes schemas it ships). Started in the background by deploy/local/prebuild.sh; the checks run it
# too, and wait on its lock.
source "$(dirname "$0")/common.sh"
PACKAGES=(checkov==3.3.30 kubernetes-validate==1.37.0)
PYTHON=${PYTHON:-python3}
need "$PYTHON" "install Python 3.11 or newer"
VERSION="${PACKAGES[*]} $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
DEST="$CACHE_DIR/deploy-checks"
ready "$DEST/.ready" "$VERSION" && { echo "deploy-checks: cached"; exit 0; }
mkdir -p "$DEST"
need flock "install util-linux"
exec 9>"$DEST/.lock"
flock 9
ready "$DEST/.ready" "$VERSION" && { echo "deploy-checks: cached"; exit 0; }
echo "deploy-checks: installing ${PACKAGES[*]} into $DEST/venv"
started=$(date +%s)
rm -rf "$DEST/venv"
"$PYTHON" -m venv "$DEST/venv"
"$DEST/venv/bin/pip" install -q --disable-pip-version-check "${PACKAGES[@]}"
echo "$VERSION" > "$DEST/.ready"
echo "deploy-checks: installed in $(( $(date +%s) - started ))s"
