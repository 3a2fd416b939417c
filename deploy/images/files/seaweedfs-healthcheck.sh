#!/bin/bash
# SeaweedFS's health check: its S3 gateway's GET /healthz answers 200 (bash's /dev/tcp: the image has no curl).
#   seaweedfs-healthcheck.sh [PORT]   (default: $SEAWEEDFS_S3_PORT, else 8333)
set -eu
port="${1:-${SEAWEEDFS_S3_PORT:-8333}}"
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
read -r -t 4 _ status _ <&3
[ "$status" = 200 ] || { echo "unhealthy: S3 gateway on $port answered ${status:-nothing}"; exit 1; }
echo "S3 gateway on $port: healthy"
