#!/usr/bin/env bash
# A virtualenv with dbt-core and dbt-postgres, apart from metalake's (dbt pins many packages metalake also uses).
# Only tests/fixtures/dbt_project/regenerate.sh needs it: metalake reads dbt's artifacts, it never runs dbt.
source "$(dirname "$0")/common.sh"
DBT_VERSION="dbt-core==1.11.16 dbt-postgres==1.11.0"
VENV="$CACHE_DIR/dbt-venv"
if ready "$VENV/.metalake-version" "$DBT_VERSION"; then echo "dbt: ready ($VENV)"; exit 0; fi
need python3 "install Python 3.10 to 3.13"
rm -rf "$VENV"
python3 -m venv "$VENV"
# shellcheck disable=SC2086 - the two pins are two arguments
"$VENV/bin/python" -m pip install -q $DBT_VERSION
echo "$DBT_VERSION" > "$VENV/.metalake-version"
echo "dbt: ready ($VENV)"
