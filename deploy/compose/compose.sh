#!/usr/bin/env bash
# metalake on one host with podman-compose (docs/deploy.md, "One host with Compose").
#
#   bash deploy/compose/compose.sh up      render the state folder, start everything, wait until every service is healthy
#   bash deploy/compose/compose.sh wait    wait until every service is healthy (prints how long each took)
#   bash deploy/compose/compose.sh status  each container's state and health
#   bash deploy/compose/compose.sh demo    metalake demo against the deployment (from this checkout's Python)
#   bash deploy/compose/compose.sh logs SERVICE
#   bash deploy/compose/compose.sh down    stop and remove the containers (the state folder and its data stay)
#
# Environment: METALAKE_COMPOSE_STATE (default deploy/compose/.state), METALAKE_COMPOSE_PORTS (default | block29 | block27),
# METALAKE_COMPOSE_S3=1 (up: the lake in SeaweedFS, compose.s3.yaml; later commands read the state folder's choice),
# PODMAN_COMPOSE (default: podman-compose 1.6.0 installed into deploy/compose/.venv), PYTHON (default .stack/venv/bin/python: metalake installed),
# METALAKE_COMPOSE_TIMEOUT (seconds, default 900), METALAKE_COMPOSE_PROJECT (default metalake: the containers'
# prefix; another name for a second deployment on one host), TAG (up: the images' tag, as build.sh's; default dev).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
STATE="${METALAKE_COMPOSE_STATE:-$HERE/.state}"
PORTS="${METALAKE_COMPOSE_PORTS:-default}"
PYTHON="${PYTHON:-$REPO/.stack/venv/bin/python}"
PODMAN_COMPOSE="${PODMAN_COMPOSE:-}"
TIMEOUT="${METALAKE_COMPOSE_TIMEOUT:-900}"
TAG="${TAG:-dev}"
PROJECT="${METALAKE_COMPOSE_PROJECT:-metalake}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$REPO/deploy/images/containers.conf}"
SERVICES=(postgres ferretdb kafka api connect trino stream lake-worker propagation outbound access)

# podman-compose from PyPI, in a virtualenv of its own (pinned: the flags below are 1.6's).
if [ -z "$PODMAN_COMPOSE" ]; then
  PODMAN_COMPOSE="$HERE/.venv/bin/podman-compose"
  if [ ! -x "$PODMAN_COMPOSE" ]; then
    /usr/bin/python3 -m venv "$HERE/.venv"
    "$HERE/.venv/bin/pip" install -q podman-compose==1.6.0
  fi
fi

# Whether the state folder was rendered with SeaweedFS (generate --s3 writes METALAKE_S3=true into its .env).
on_s3() { grep -qx 'METALAKE_S3=true' "$STATE/.env" 2>/dev/null; }

compose() {
  local files=(-f "$HERE/compose.yaml")
  if on_s3; then files+=(-f "$HERE/compose.s3.yaml"); fi
  # No pod: host networking, and a pod's infra container would need a network of its own.
  "$PODMAN_COMPOSE" --in-pod false -p "$PROJECT" --env-file "$STATE/.env" "${files[@]}" "$@"
}

generate() {
  local s3=()
  if [ "${METALAKE_COMPOSE_S3:-0}" = 1 ]; then s3=(--s3); fi
  (cd "$REPO" && "$PYTHON" -m ops.compose generate "$STATE" --ports "$PORTS" --tag "$TAG" "${s3[@]+"${s3[@]}"}")
  if on_s3; then SERVICES=(seaweedfs "${SERVICES[@]}"); fi
}

# podman runs health checks from systemd timers; without systemd (containers, CI) nothing runs them, so this loop
# does: `podman healthcheck run` each container until it answers healthy.
wait_healthy() {
  local started=$SECONDS pending=("${SERVICES[@]}") left
  while [ ${#pending[@]} -gt 0 ]; do
    left=()
    for service in "${pending[@]}"; do
      if podman healthcheck run "${PROJECT}_${service}_1" >/dev/null 2>&1; then
        echo "compose: $service healthy after $((SECONDS - started))s"
      else
        left+=("$service")
      fi
    done
    pending=("${left[@]+"${left[@]}"}")
    [ ${#pending[@]} -eq 0 ] && break
    if [ $((SECONDS - started)) -ge "$TIMEOUT" ]; then
      echo "compose: not healthy after ${TIMEOUT}s: ${pending[*]} (bash $0 logs <service>)" >&2
      return 1
    fi
    sleep 3
  done
  echo "compose: every service healthy in $((SECONDS - started))s"
}

case "${1:-}" in
  up)
    t0=$SECONDS
    generate
    compose up -d
    wait_healthy
    echo "compose: up in $((SECONDS - t0))s"
    ;;
  wait)
    if on_s3; then SERVICES=(seaweedfs "${SERVICES[@]}"); fi
    wait_healthy
    ;;
  status)
    podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}\t{{.Status}}'
    ;;
  logs) podman logs --tail "${TAIL:-100}" "${PROJECT}_${2:?which service}_1" ;;
  demo)
    # The host's tool with the deployment's addresses, CA and secret files (STATE/host.env, written by generate).
    set -a
    # shellcheck disable=SC1091
    . "$STATE/host.env"
    set +a
    (cd "$REPO" && "$PYTHON" -m ops demo "${@:2}")
    ;;
  down) compose down ;;
  *) sed -n 2,15p "$0"; exit 2 ;;
esac
