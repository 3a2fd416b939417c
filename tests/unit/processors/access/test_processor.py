"""The access processor's pure parts: which tag documents mask which columns, and which changes name a tenant."""

from __future__ import annotations

from typing import Any

import pytest

from catalog.changes import StateChange
from ops.settings import Settings
from processors.access import processor as runner_module
from processors.access.processor import AccessRunner, tenants_to_refresh
from tenants.access.columns import masked_columns
from tenants.access.rules import MirroredSchema, TrinoColumn
from tenants.access.sync import resolve
from tests._support.kafka_record import Record

PATTERNS = ["PII", "GDPR.*"]
BASE = "urn:metalake:trino:metalake/lake/acme"


def _masked(docs: list[dict[str, Any]]) -> set[TrinoColumn]:
    return masked_columns(docs, schema="acme", patterns=PATTERNS, catalog="lake", instance="metalake")


def test_direct_and_propagated_tags_mask_columns_of_the_tenant_schema() -> None:
    docs: list[dict[str, Any]] = [
        {"urn": f"{BASE}/people/email", "tag": "PII", "deleted": False},
        {"urn": f"{BASE}/people/phone", "tag": "GDPR.contact", "origin": "urn:x", "depth": 2},  # propagated
        {"urn": f"{BASE}/people/age", "tag": "Quality", "deleted": False},  # not a PII tag
        {"urn": f"{BASE}/people/name", "tag": "PII", "deleted": True},  # removed
        {"urn": "urn:metalake:postgres:prod/crm/public/people/email", "tag": "PII"},  # not a Trino column
        {"urn": "urn:metalake:trino:metalake/lake/globex/people/email", "tag": "PII"},  # another tenant's schema
        {"urn": f"{BASE}/orders", "tag": "PII"},  # a whole table
        {"tag": "PII"},
        {"urn": 7, "tag": "PII"},
    ]
    assert _masked(docs) == {
        TrinoColumn("acme", "people", "email"),
        TrinoColumn("acme", "people", "phone"),
        TrinoColumn("acme", "orders", None),
    }


def test_tags_on_a_mirrored_schema_mask_the_mirror() -> None:
    mirrored = [MirroredSchema("postgres", "prod", "crm", "public")]
    docs: list[dict[str, Any]] = [
        {"urn": "urn:metalake:postgres:prod/crm/public/customers/email", "tag": "PII"},
        {"urn": "urn:metalake:postgres:prod/crm/private/customers/email", "tag": "PII"},
    ]
    found = masked_columns(
        docs, schema="acme", patterns=PATTERNS, catalog="lake", instance="metalake", mirrored=mirrored
    )
    assert found == {TrinoColumn("acme", "customers", "email")}
    assert _masked(docs) == set()


def test_resolve_expands_tagged_tables_and_keeps_unknown_columns_with_a_null_type() -> None:
    tagged = [TrinoColumn("acme", "people", "email"), TrinoColumn("acme", "orders", None)]
    types = {"people": {"email": "varchar", "age": "integer"}, "orders": {"card": "varchar", "total": "double"}}
    assert resolve(tagged, types) == {
        "people": {"email": "varchar"},
        "orders": {"card": "varchar", "total": "double"},
    }
    # Not registered in Trino yet: the column keeps a NULL mask; a whole table has nothing to mask yet.
    assert resolve(tagged, {}) == {"people": {"email": None}}


URN = "urn:metalake:postgres:prod/shop/public/people/email"


def _change(tenant: str, table: str) -> Record:
    """A state change as the streaming job publishes it."""
    key = {"urn": URN, "tag": "PII"} if table in ("classifications", "propagated_tags") else {"urn": URN}
    if table == "propagated_tags":
        key["origin"] = URN
    change = StateChange(
        id=f"{tenant}-{table}",
        source="/processors/enrichment",
        tenant=tenant,
        table=table,
        key=key,
        deleted=False,
        version=1,
        event_id="e1",
    )
    event = change.event()
    return Record(event.headers(), event.value(), key=event.key)


def _broken(value: bytes, drop: str = "", tenant: str = "umbrella") -> Record:
    """A classification change with another value, a header left out, or another tenant id."""
    record = _change("umbrella", "classifications")
    headers = [(n, tenant.encode() if n == "ce_tenantid" else v) for n, v in record.headers() if n != drop]
    return Record(headers, value, key=record.key())


def test_tag_changes_name_the_tenants_to_refresh() -> None:
    valid = _change("umbrella", "classifications").value()
    completed = Record([("ce_type", b"io.metalake.propagation.completed.v1"), ("ce_tenantid", b"hooli")], b"{}")
    batch = [
        _change("acme", "classifications"),
        _change("globex", "propagated_tags"),
        _change("initech", "assets"),  # not a tag change
        completed,
        _broken(valid, tenant="Bad_Tenant"),
        _broken(b"not json"),
        _broken(b"[1, 2]"),
        _broken(valid, drop="ce_tenantid"),
    ]
    assert tenants_to_refresh(batch) == {"acme", "globex"}


class _FlakySync:
    """Fails the first ``failures`` syncs as an unreachable Trino or MongoDB would."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[set[str] | None] = []

    def sync(self, tenants: set[str] | None = None) -> list[str]:
        self.calls.append(tenants)
        if len(self.calls) <= self.failures:
            raise OSError("connection refused")
        return sorted(tenants or ())


def test_a_failing_sync_is_retried_until_it_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "_FIRST_RETRY_S", 0.01)
    flaky = _FlakySync(failures=2)
    runner = AccessRunner(Settings(), flaky, consumer=None)  # type: ignore[arg-type]
    runner.handle([_change("acme", "classifications")])  # type: ignore[list-item]
    assert flaky.calls == [{"acme"}] * 3


def test_a_stopping_runner_gives_up_and_leaves_the_batch_uncommitted() -> None:
    flaky = _FlakySync(failures=10)
    runner = AccessRunner(Settings(), flaky, consumer=None)  # type: ignore[arg-type]
    runner.stop.set()
    with pytest.raises(OSError, match="connection refused"):
        runner.handle([_change("acme", "classifications")])  # type: ignore[list-item]
    assert len(flaky.calls) == 1
