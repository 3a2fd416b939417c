#!/usr/bin/env bash
# Builds a Kubernetes API server and its etcd from the Go module proxy, for `make chart-install-check`
# (deploy/helm/check-install.sh: the chart installed on a real API server). Not part of `make test`: a first build is
# about 8 CPU-minutes (docs/benchmarks.md).
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every k8s.io/* library with ./staging/src/..., which
# the module's zip leaves out (they are modules of their own, published as k8s.io/api, k8s.io/apiserver... v0.X.Y for
# Kubernetes v1.X.Y). So it is downloaded into the stack's module cache and built there through a go.mod of our own
# (-modfile): the same requirements with those replace directives dropped and the published libraries of the same
# release required instead. etcd comes from the same build list (k8s.io/kubernetes requires
# go.etcd.io/etcd/server/v3, whose root package is etcd's main): the version Kubernetes' own integration tests run.
source "$(dirname "$0")/common.sh"
MODULE=k8s.io/kubernetes
PIN=v1.33.13  # infra/terraform/modules/eks's kubernetes_version, and the offline checks' schemas
go_build_begin kube "$PIN"
# GOWORK=off: the module's go.work names the staging folders too.
export GOFLAGS="$GOFLAGS -mod=mod" GOWORK=off
echo "kube: building kube-apiserver $PIN and its etcd with $(go env GOVERSION)"
started=$(date +%s)
SRC=$(go mod download -json "$MODULE@$PIN" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$SRC" ] && [ -f "$SRC/go.mod" ] || die "kube: $MODULE@$PIN could not be downloaded"
# The staging libraries' published version: v1.33.13 -> v0.33.13.
LIBS="v0.${PIN#v1.}"
cp "$SRC/go.mod" "$DEST/build.mod"
cp "$SRC/go.sum" "$DEST/build.sum"
edits=()
for lib in $(sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*|\1|p' "$SRC/go.mod"); do
  edits+=("-dropreplace=$lib")
  # Only what the module requires (listing the others would make the go command resolve them too).
  if grep -Eq "^[[:space:]]*$lib v0\.0\.0( |$)" "$SRC/go.mod"; then edits+=("-require=$lib@$LIBS"); fi
done
[ ${#edits[@]} -gt 0 ] || die "kube: no staging replace directives found in $SRC/go.mod (a new layout?)"
go mod edit "${edits[@]}" "$DEST/build.mod"
# What `kube-apiserver --version` and the discovery endpoint report (helm checks the chart's kubeVersion against it).
pkg=k8s.io/component-base/version
minor=${PIN#v1.}
ldflags="-s -w -X $pkg.gitVersion=$PIN -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor%%.*} -X $pkg.gitTreeState=clean"
(cd "$SRC" && every 30 kube go build -modfile="$DEST/build.mod" -trimpath -ldflags "$ldflags" \
  -o "$DEST/kube-apiserver.tmp" ./cmd/kube-apiserver)
(cd "$SRC" && every 30 etcd go build -modfile="$DEST/build.mod" -trimpath -ldflags "-s -w" \
  -o "$DEST/etcd.tmp" go.etcd.io/etcd/server/v3)
mkdir -p "$DEST/bin"
mv "$DEST/kube-apiserver.tmp" "$DEST/bin/kube-apiserver"
mv "$DEST/etcd.tmp" "$DEST/bin/etcd"
echo "$VERSION" > "$DEST/.ready"
echo "kube: built $DEST/bin/kube-apiserver and $DEST/bin/etcd in $(( $(date +%s) - started ))s"
