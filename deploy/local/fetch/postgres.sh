#!/usr/bin/env bash
# Makes sure PostgreSQL server binaries from Debian are installed (the catalog crawler's real source).
source "$(dirname "$0")/common.sh"
if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then echo "postgres: installed"; exit 0; fi
[ "$(id -u)" = 0 ] || die "postgres: not installed and not root; run: sudo apt-get install -y postgresql"
echo "postgres: installing the Debian package"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql >/dev/null
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || die "postgres: install finished but no server binary found"
echo "postgres: installed"
