#!/usr/bin/env bash
# Builds helm from the Go module proxy (no replace directives: `go install module@version` works), for the chart's
# offline checks (tests/integration/deploy: helm lint and helm template of deploy/helm/metalake). Started in the
# background at low priority by deploy/local/prebuild.sh; the checks run it too, and wait on its lock.
source "$(dirname "$0")/common.sh"
go_install helm v3.22.0 helm.sh/helm/v3/cmd/helm
