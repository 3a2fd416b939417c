#!/bin/sh
# FerretDB 1.24 (PostgreSQL backend): creates its database and the GIN-index trigger (deploy/local/ferretdb/*.sql, as
# the local stack does), then serves the MongoDB wire protocol on FERRETDB_LISTEN_ADDR.
set -eu
: "${POSTGRES_PASSWORD_FILE:?POSTGRES_PASSWORD_FILE must name the PostgreSQL password file}"
PGPASSWORD=$(cat "$POSTGRES_PASSWORD_FILE")
export PGPASSWORD PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER=metalake
for script in database:postgres indexes:ferretdb; do
  psql --no-psqlrc --quiet --set=ON_ERROR_STOP=1 --set=db=ferretdb --dbname="${script#*:}" \
    --file="/opt/ferretdb/sql/${script%%:*}.sql"
done
# The password reaches FerretDB's driver (pgx) through a password file, never its command line or the URL.
umask 077
printf '%s:%s:*:metalake:%s\n' "$PGHOST" "$PGPORT" "$PGPASSWORD" > /tmp/pgpass
export PGPASSFILE=/tmp/pgpass
unset PGPASSWORD
exec /usr/local/bin/ferretdb --listen-addr="${FERRETDB_LISTEN_ADDR:-127.0.0.1:27017}" \
  --postgresql-url="postgres://metalake@$PGHOST:$PGPORT/ferretdb"
