"""Moving an existing tenant schema to its keyed name on the real Trino 476 (issue 21 item 21): its tables renamed
into the new schema with their data, metalake's views re-created there, what metalake did not create left in the old
schema, and the old schema dropped once empty. Only this test's own schema is moved (the shared stack holds other
tests' schemas): ``tenants.schema_migration.plan``, which picks the schemas, is unit-tested."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from metalake.trino_admin import admin_cursor
from ops.settings import Settings
from tenants.access import catalog
from tenants.lake_catalog import drop_schema, move_schema, pooled_columns, view_sql
from tenants.naming import names_for
from tenants.trino_schemas import UNKEYED, trino_schema
from tests._support.accessit import EMAILS, make_data_table

pytestmark = pytest.mark.integration


def _run(settings: Settings, sql: str) -> list[Any]:
    with admin_cursor(settings) as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def test_a_schema_named_after_the_id_moves_to_its_keyed_name(
    settings: Settings, trino_cursor: Any, tenant: str
) -> None:
    names = names_for(tenant, settings.lake_root)
    old, new = UNKEYED.schema(tenant), trino_schema(settings, tenant)
    assert old != new  # the stack has a key
    try:
        make_data_table(settings, trino_cursor, names, "people", in_schema=old)
        _run(settings, view_sql("lake", old, names, "assets", pooled_columns(settings)["assets"]))
        _run(settings, f'CREATE VIEW lake."{old}".mine AS SELECT 1 AS x')
        assert move_schema(settings, names, old) == ["mine"]
        assert catalog.tables(settings, new) == {"people": "BASE TABLE", "assets": "VIEW"}
        assert catalog.tables(settings, old) == {"mine": "VIEW"}
        assert _run(settings, f'SELECT email FROM lake."{new}".people ORDER BY id') == [[e] for e in EMAILS]
        assert _run(settings, f'SELECT count(*) FROM lake."{new}".assets') == [[0]]  # the tenant's (no) rows
        # Once the operator moved what metalake did not create, a second run drops the old schema.
        _run(settings, f'DROP VIEW lake."{old}".mine')
        assert move_schema(settings, names, old) == []
        assert old not in catalog.schemas(settings)
        assert catalog.tables(settings, new) == {"people": "BASE TABLE", "assets": "VIEW"}
    finally:
        for schema in (old, new):
            drop_schema(settings, schema)
        shutil.rmtree(names.lake_dir, ignore_errors=True)
