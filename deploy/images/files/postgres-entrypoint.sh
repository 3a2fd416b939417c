#!/bin/sh
# PostgreSQL 15 from Debian: initdb on first start (superuser "metalake", SCRAM passwords over TCP, the password from
# POSTGRES_PASSWORD_FILE), then the server on PGPORT, listening on POSTGRES_LISTEN (loopback by default).
set -eu
BIN=/usr/lib/postgresql/15/bin
DATA="${PGDATA:-/var/lib/postgresql/data}/pgdata"
: "${POSTGRES_PASSWORD_FILE:?POSTGRES_PASSWORD_FILE must name the superuser password file}"
if [ ! -f "$DATA/PG_VERSION" ]; then
  mkdir -p "$DATA"
  "$BIN/initdb" -D "$DATA" -U metalake --pwfile="$POSTGRES_PASSWORD_FILE" --auth-local=scram-sha-256 \
    --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8
fi
exec "$BIN/postgres" -D "$DATA" -p "${PGPORT:-5432}" -c "listen_addresses=${POSTGRES_LISTEN:-127.0.0.1}" \
  -c unix_socket_directories=/tmp
