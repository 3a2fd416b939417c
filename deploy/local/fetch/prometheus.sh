#!/usr/bin/env bash
# Fetches Debian's prometheus package (prometheus and promtool, 2.42 on bookworm) without installing it: `apt-get
# download` into the stack's cache, unpacked with `dpkg-deb -x`, no root needed (a root without package lists runs
# `apt-get update` once first). Its web UI's JavaScript and fonts are Debian packages of their own (the package's
# libjs-*/fonts-* dependencies, and d3, which rickshaw needs): fetched and unpacked beside it (3 MB), so the UI works
# from the cache too (`--web.local-assets`). The local stack's Prometheus (ops/stack/services/prometheus.py) runs the
# server; the alert rules' tests (tests/integration/test_prometheus_rules.py) run promtool. Started by
# deploy/local/prefetch.sh.
source "$(dirname "$0")/common.sh"
# The layout of the cache entry; the package's own version is recorded beside it (bin/VERSION).
LAYOUT=deb-4
DEST="$CACHE_DIR/prometheus"
ready "$DEST/.ready" "$LAYOUT" && [ -x "$DEST/bin/prometheus" ] && { echo "prometheus: cached"; exit 0; }
fetch_lock "$DEST"
ready "$DEST/.ready" "$LAYOUT" && [ -x "$DEST/bin/prometheus" ] && { echo "prometheus: cached"; exit 0; }
need apt-get "Debian's apt is needed to download the prometheus package"
need dpkg-deb "Debian's dpkg is needed to unpack the prometheus package"
tmp="$DEST/download.$$"; rm -rf "$tmp" "$DEST/bin" "$DEST/root"; mkdir -p "$tmp"
# As root, apt would hand the download to its _apt user, who cannot write here (and says so): it stays root.
sandbox=(); [ "$(id -u)" = 0 ] && sandbox=(-o APT::Sandbox::User=root)
download_debs() { (cd "$tmp" && apt-get download -q "${sandbox[@]}" "$@"); }
echo "prometheus: downloading Debian's prometheus package"
if ! download_debs prometheus; then
  [ "$(id -u)" = 0 ] || die "prometheus: apt-get download failed; run: sudo apt-get update"
  echo "prometheus: no package list; running apt-get update"
  apt-get update -qq && download_debs prometheus || die "prometheus: apt-get download failed"
fi
deb=$(ls "$tmp"/prometheus_*.deb)
ui=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*)//; s/[[:space:]]//g' | grep -E '^(libjs-|fonts-)' || true)
echo "prometheus: downloading its web UI's packages:" $ui libjs-d3
# shellcheck disable=SC2086 # one package name per word
download_debs $ui libjs-d3 || die "prometheus: apt-get download of the web UI's packages failed"
# Everything but the documentation and moment-timezone's raw time-zone data (210 MB the UI does not load).
mkdir -p "$DEST/root"
for package in "$tmp"/*.deb; do
  dpkg-deb --fsys-tarfile "$package" | tar -x -C "$DEST/root" --exclude=./usr/share/doc \
    --exclude=./usr/share/javascript/moment-timezone/data
done
mkdir -p "$DEST/bin"
ln -s ../root/usr/bin/prometheus ../root/usr/bin/promtool "$DEST/bin/"
dpkg-deb -f "$deb" Version > "$DEST/bin/VERSION"
rm -rf "$tmp"
echo "$LAYOUT" > "$DEST/.ready"
echo "prometheus: ready in $DEST/bin ($(cat "$DEST/bin/VERSION"))"
