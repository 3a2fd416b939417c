"""The tenant's Trino view of its assets with a person's edits laid over (run against Trino by the integration test
tests/integration/api/test_api_edits.py)."""

from __future__ import annotations

from pathlib import Path

from tenants.lake_catalog import EDITED_ASSETS_VIEW, edited_assets_sql
from tenants.naming import names_for


def test_the_view_reads_the_tenants_own_schema_with_the_readers_rights() -> None:
    for names in (names_for("acme-1", Path("/lake")), names_for("acme-1", Path("/lake"), dedicated=True)):
        sql = edited_assets_sql("lake", "acme_1_k3y", names)
        assert sql.startswith(f'CREATE OR REPLACE VIEW lake."acme_1_k3y"."{EDITED_ASSETS_VIEW}" SECURITY INVOKER AS ')
        assert 'FROM lake."acme_1_k3y"."assets" a' in sql and 'lake."acme_1_k3y"."asset_edits"' in sql
        assert "_pooled" not in sql  # a pooled tenant's view reads its own views, never the shared tables


def test_the_view_lays_live_edits_only_over_the_sources_values() -> None:
    sql = edited_assets_sql("lake", "acme", names_for("acme", Path("/lake")))
    assert sql.count("WHERE NOT deleted") == 4  # every join reads live edits only
    assert "IF(d.urn IS NULL, a.description, d.text) AS description" in sql
    assert "IF(o.urn IS NULL, a.owners, o.owners) AS owners" in sql
    # map_concat keeps the last map's value of a key: the edited property wins.
    assert "map_concat(coalesce(a.properties, CAST(MAP() AS map(varchar, varchar))), p.properties)" in sql
    assert "substr(aspect, 12)" in sql and len("properties.") == 11
