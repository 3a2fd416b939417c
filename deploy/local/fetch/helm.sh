#!/usr/bin/env bash
# Builds helm from the Go module proxy (no replace directives: `go install module@version` works), for the chart's
# offline checks (tests/integration/deploy: helm lint and helm template of deploy/helm/metalake). Started in the
# background at low priority by deploy/local/prebuild.sh; the checks run it too, and wait on its lock.
source "$(dirname "$0")/common.sh"
PIN=v3.22.0
go_build_begin helm "$PIN"
export GOBIN="$DEST/bin"
echo "helm: building helm.sh/helm/v3/cmd/helm@$PIN with $(go env GOVERSION)"
started=$(date +%s)
go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$PIN"
echo "$VERSION" > "$DEST/.ready"
echo "helm: built $DEST/bin/helm in $(( $(date +%s) - started ))s"
