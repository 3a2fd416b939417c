"""The OPA `allow` and `batch` decisions (api/services/opa_decisions.py), on the request shapes Trino 476's OPA plugin
sends, and the restrictive rules file handed out beside them (api/services/trino_files.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from api.schemas.engines import OpaQuery
from api.services import opa_decisions
from api.services.enforcement import CatalogSource, Engine
from api.services.trino_files import OPA_FILE, RULES_JSON, trino_files

SOURCE = CatalogSource("warehouse", "postgres", "shop-prod", "shop")


def _engine(**kw: Any) -> Engine:
    values: dict[str, Any] = {
        "tenant": "acme",
        "engine_id": "0123456789abcdef",
        "name": "t",
        "created_at": datetime(2026, 1, 1, tzinfo=UTC),
        "catalogs": (SOURCE,),
        "pii_users": frozenset({"dpo"}),
        "consent_tag": "consent",
        "impersonators": frozenset({"superset"}),
        "operators": frozenset({"ops"}),
        **kw,
    }
    return Engine(**values)


def _query(user: str, operation: str, *, groups: tuple[str, ...] = (), **action: Any) -> OpaQuery:
    body = {
        "input": {
            "context": {"identity": {"user": user, "groups": list(groups)}, "softwareStack": {"trinoVersion": "476"}},
            "action": {"operation": operation, **action},
        }
    }
    return OpaQuery.model_validate_json(json.dumps(body))


def _allow(engine: Engine, user: str, operation: str, resource: Any = None, groups: tuple[str, ...] = ()) -> bool:
    query = _query(user, operation, groups=groups, **({"resource": resource} if resource is not None else {}))
    action = query.input.action
    return opa_decisions.allow(engine, action.operation, query.input.context.identity, action.resource)


def _batch(engine: Engine, user: str, operation: str, resources: list[Any]) -> list[int]:
    query = _query(user, operation, filterResources=resources)
    action = query.input.action
    return opa_decisions.batch(engine, action.operation, query.input.context.identity, action.filterResources or [])


def _target(user: str) -> dict[str, Any]:
    return {"user": {"user": user}}


def _owner(user: str) -> dict[str, Any]:
    # A query owner is sent as its whole identity, unwrapped into `user` (TrinoUser with an identity).
    return {"user": {"user": user, "groups": [], "extraCredentials": {}}}


def test_impersonation_is_refused_unless_configured_and_never_towards_a_pii_user() -> None:
    engine = _engine()
    # X-Trino-Original-User or SET SESSION AUTHORIZATION: both are ImpersonateUser (Trino has no other operation).
    assert not _allow(engine, "analyst", "ImpersonateUser", _target("dpo"))
    assert not _allow(engine, "analyst", "ImpersonateUser", _target("bob"))  # not an impersonator
    assert _allow(engine, "analyst", "ImpersonateUser", _target("analyst"))  # oneself
    assert _allow(engine, "superset", "ImpersonateUser", _target("analyst"))  # the configured gateway
    assert not _allow(engine, "superset", "ImpersonateUser", _target("dpo"))  # ...never towards a PII user
    assert not _allow(engine, "superset", "ImpersonateUser", {})  # no target named: refused
    trusted = _engine(impersonators=frozenset({"dpo"}))
    assert _allow(trusted, "dpo", "ImpersonateUser", _target("dpo2"))  # holds the grant itself


def test_with_pii_groups_an_impersonator_needs_the_grant_itself() -> None:
    # Trino names the target only, not its groups: any target might be a member of a PII group.
    engine = _engine(pii_groups=frozenset({"privacy"}))
    assert not _allow(engine, "superset", "ImpersonateUser", _target("analyst"))
    assert _allow(engine, "superset", "ImpersonateUser", _target("analyst"), groups=("privacy",))


def test_others_queries_are_neither_visible_nor_killable_but_for_operators() -> None:
    engine = _engine()
    for operation in ("ViewQueryOwnedBy", "KillQueryOwnedBy", "FilterViewQueryOwnedBy"):
        assert _allow(engine, "analyst", operation, _owner("analyst"))
        assert not _allow(engine, "analyst", operation, _owner("dpo"))
        assert _allow(engine, "ops", operation, _owner("dpo"))
    owners = [_owner("dpo"), _owner("analyst"), _owner("bob"), {}]
    assert _batch(engine, "analyst", "FilterViewQueryOwnedBy", owners) == [1]
    assert _batch(engine, "ops", "FilterViewQueryOwnedBy", owners) == [0, 1, 2, 3]


def test_writing_system_information_is_for_operators_only() -> None:
    engine = _engine()
    assert not _allow(engine, "analyst", "WriteSystemInformation")
    assert not _allow(engine, "dpo", "WriteSystemInformation")
    assert _allow(engine, "ops", "WriteSystemInformation")
    assert _allow(engine, "analyst", "ReadSystemInformation")


def test_a_mapped_catalogs_pass_through_functions_and_procedures_need_the_pii_grant() -> None:
    engine = _engine()
    query_fn = {"function": {"catalogName": "warehouse", "schemaName": "system", "functionName": "query"}}
    execute = {"function": {"catalogName": "warehouse", "schemaName": "system", "functionName": "execute"}}
    for operation, resource in (
        ("ExecuteFunction", query_fn),
        ("CreateViewWithExecuteFunction", query_fn),
        ("ExecuteProcedure", execute),
    ):
        assert not _allow(engine, "analyst", operation, resource)
        assert _allow(engine, "dpo", operation, resource)
    other = {"function": {"catalogName": "lake", "schemaName": "system", "functionName": "query"}}
    assert _allow(engine, "analyst", "ExecuteFunction", other)  # not mapped: the customer's rules decide


def test_handing_a_view_to_someone_else_needs_the_pii_grant() -> None:
    engine = _engine()
    view = {"table": {"catalogName": "hive", "schemaName": "s", "tableName": "v"}}
    assert not _allow(engine, "analyst", "SetViewAuthorization", view)
    assert _allow(engine, "dpo", "SetViewAuthorization", view)


def test_ordinary_reads_stay_the_customers_decision() -> None:
    engine = _engine()
    table = {"table": {"catalogName": "warehouse", "schemaName": "public", "tableName": "people", "columns": ["id"]}}
    assert _allow(engine, "analyst", "ExecuteQuery")
    assert _allow(engine, "analyst", "AccessCatalog", {"catalog": {"name": "warehouse"}})
    assert _allow(engine, "analyst", "SelectFromColumns", table)
    tables = [{"table": {"catalogName": "warehouse", "schemaName": "public", "tableName": t}} for t in "abc"]
    assert _batch(engine, "analyst", "FilterTables", tables) == [0, 1, 2]


def test_filter_columns_keeps_every_column_of_the_one_table() -> None:
    # Trino sends one table with its columns; the answer's indexes are the columns' (not the resources').
    columns = ["id", "name", "email", "city", "consent"]
    resource = {
        "table": {"catalogName": "warehouse", "schemaName": "public", "tableName": "people", "columns": columns}
    }
    assert _batch(_engine(), "analyst", "FilterColumns", [resource]) == [0, 1, 2, 3, 4]
    assert (
        opa_decisions.batch_size(
            "FilterColumns", _query("a", "FilterColumns", filterResources=[resource]).input.action.filterResources or []
        )
        == 5
    )


def test_the_handed_out_files_are_the_two_file_form_with_restrictive_rules() -> None:
    engine = _engine(impersonators=frozenset({"superset", "bi.gw"}), operators=frozenset({"ops"}))
    files = trino_files("https://metalake.example", "mle_0123456789abcdef_s", engine)
    assert files["config.properties"] == (
        "access-control.config-files=etc/rules-access-control.properties,etc/opa-access-control.properties\n"
    )
    assert files["rules-access-control.properties"].splitlines() == [
        "access-control.name=file",
        "security.config-file=etc/metalake-rules.json",
    ]
    assert files[OPA_FILE].startswith("access-control.name=opa\n")
    rules = json.loads(files[RULES_JSON])
    assert rules["catalogs"] == [{"allow": "read-only"}]
    assert rules["authorization"] == []
    assert "functions" not in rules and "procedures" not in rules  # absent: only system.builtin ones run
    assert rules["impersonation"] == [{"original_user": r"bi\.gw|superset", "new_user": ".*", "allow": True}]
    assert rules["queries"] == [{"user": "ops", "allow": ["execute", "view", "kill"]}, {"allow": ["execute"]}]
    assert rules["system_information"] == [{"user": "ops", "allow": ["read", "write"]}]
    bare = json.loads(
        trino_files("https://m", "k", _engine(impersonators=frozenset(), operators=frozenset()))[RULES_JSON]
    )
    assert (
        bare["impersonation"] == [] and bare["system_information"] == [] and bare["queries"] == [{"allow": ["execute"]}]
    )
