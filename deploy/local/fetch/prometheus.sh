#!/usr/bin/env bash
# Fetches Debian's prometheus package (prometheus and promtool, 2.42 on bookworm) without installing it: `apt-get
# download` into the stack's cache, unpacked with `dpkg-deb -x`, no root needed (a root without package lists runs
# `apt-get update` once first). The local stack's Prometheus (ops/stack/services/prometheus.py) runs the server;
# the alert rules' tests (tests/integration/test_prometheus_rules.py) run promtool. Started by deploy/local/prefetch.sh.
source "$(dirname "$0")/common.sh"
# The layout of the cache entry; the package's own version is recorded beside it (bin/VERSION).
LAYOUT=deb-1
DEST="$CACHE_DIR/prometheus"
ready "$DEST/.ready" "$LAYOUT" && [ -x "$DEST/bin/prometheus" ] && { echo "prometheus: cached"; exit 0; }
fetch_lock "$DEST"
ready "$DEST/.ready" "$LAYOUT" && [ -x "$DEST/bin/prometheus" ] && { echo "prometheus: cached"; exit 0; }
need apt-get "Debian's apt is needed to download the prometheus package"
need dpkg-deb "Debian's dpkg is needed to unpack the prometheus package"
tmp="$DEST/download.$$"; rm -rf "$tmp" "$DEST/bin"; mkdir -p "$tmp"
echo "prometheus: downloading Debian's prometheus package"
if ! (cd "$tmp" && apt-get download -q prometheus); then
  [ "$(id -u)" = 0 ] || die "prometheus: apt-get download failed; run: sudo apt-get update"
  echo "prometheus: no package list; running apt-get update"
  apt-get update -qq && (cd "$tmp" && apt-get download -q prometheus) || die "prometheus: apt-get download failed"
fi
deb=$(ls "$tmp"/prometheus_*.deb)
dpkg-deb -x "$deb" "$tmp/root"
mkdir -p "$DEST/bin"
mv "$tmp/root/usr/bin/prometheus" "$tmp/root/usr/bin/promtool" "$DEST/bin/"
dpkg-deb -f "$deb" Version > "$DEST/bin/VERSION"
rm -rf "$tmp"
echo "$LAYOUT" > "$DEST/.ready"
echo "prometheus: ready in $DEST/bin ($(cat "$DEST/bin/VERSION"))"
