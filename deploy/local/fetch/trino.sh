#!/usr/bin/env bash
# Fetches Trino 476 (the last release on Maven Central) and unpacks the server with only the plugins we use.
# The per-plugin ZIPs are not on the registry this machine reaches, so the full server tarball is fetched once and thinned.
# Both files come straight from Maven Central over HTTPS (checked against its SHA-1), not through Maven: the 820 MB
# download shows its progress, and it runs beside the Maven fetches of Kafka and Spark (one Maven at a time).
source "$(dirname "$0")/common.sh"
TRINO_VERSION=476
# resource-group-managers: the file-based resource groups (one per tenant, ops/stack/services/trino.py).
# password-authenticators: the password file of the platform's service users (Trino's HTTPS authentication).
PLUGINS="delta-lake resource-group-managers password-authenticators"
# Kept beside the server, OUT of its plugin.dir (so the stack's Trino loads exactly what it did before): opa and
# postgresql make a "customer's Trino" (a warehouse catalog whose access control asks metalake's OPA endpoint), used
# by tests/integration/test_opa_enforcement.py and bench/opa_enforcement.py (docs/enforcement.md). The PostgreSQL
# connector needs the Geometry type of the geospatial plugin (without it the catalog fails to load).
EXTRA_PLUGINS="opa postgresql geospatial"
VERSION="$TRINO_VERSION-$PLUGINS-extra:$EXTRA_PLUGINS"
DEST="$CACHE_DIR/trino"
# The Trino CLI (an executable jar), for operators and the tests that connect with it as a tenant.
CLI="$DEST/trino-cli-$TRINO_VERSION.jar"
[ -f "$CLI" ] && ready "$DEST/.ready" "$VERSION" && { echo "trino: cached"; exit 0; }
fetch_lock "$DEST"
mkdir -p "$DEST"
if [ ! -f "$CLI" ]; then
  echo "trino: downloading trino-cli $TRINO_VERSION"
  download "$MAVEN_CENTRAL/io/trino/trino-cli/$TRINO_VERSION/trino-cli-$TRINO_VERSION-executable.jar" "$CLI" trino-cli
fi
ready "$DEST/.ready" "$VERSION" && { echo "trino: cached"; exit 0; }
rm -rf "$DEST/server" "$DEST/extra-plugins" && mkdir -p "$DEST"
TARBALL="$DEST/trino-server-$TRINO_VERSION.tar.gz"
if [ ! -f "$TARBALL" ]; then
  echo "trino: downloading trino-server $TRINO_VERSION (about 820 MB, once)"
  download "$MAVEN_CENTRAL/io/trino/trino-server/$TRINO_VERSION/trino-server-$TRINO_VERSION.tar.gz" "$TARBALL" trino
fi
echo "trino: unpacking server and plugins: $PLUGINS (extra: $EXTRA_PLUGINS)"
tmp="$DEST/unpack.$$"; rm -rf "$tmp"; mkdir -p "$tmp"
# The tarball hard-links jars shared between plugins to their first plugin, so members cannot be picked one by one:
# unpack it whole, then drop the plugins we do not load (the links keep the shared jars alive).
every 5 "trino: unpacking" tar -xzf "$TARBALL" -C "$tmp"
mkdir -p "$tmp/extra-plugins"
for dir in "$tmp/trino-server-$TRINO_VERSION"/plugin/*; do
  name="$(basename "$dir")"
  case " $PLUGINS " in
    *" $name "*) ;;
    *) case " $EXTRA_PLUGINS " in *" $name "*) mv "$dir" "$tmp/extra-plugins/$name" ;; *) rm -rf "$dir" ;; esac ;;
  esac
done
mv "$tmp/trino-server-$TRINO_VERSION" "$DEST/server" && mv "$tmp/extra-plugins" "$DEST/extra-plugins" && rm -rf "$tmp"
# The tarball is no longer needed: the unpacked server is the cache.
rm -f "$TARBALL"
echo "$VERSION" > "$DEST/.ready"
echo "trino: ready in $DEST/server"
