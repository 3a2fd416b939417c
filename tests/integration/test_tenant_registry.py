"""TenantRegistry on the real control plane (FerretDB): create, conflicts, compare-and-set states, steps, paging."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantDirectory, TenantExists, TenantRegistry, TenantState


@pytest.fixture
def registry(settings: Settings, stack: StackManager) -> Iterator[TenantRegistry]:
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True)
    yield TenantRegistry(client[CONTROL_DATABASE])
    client.close()


def test_lifecycle(registry: TenantRegistry, tenant: str) -> None:
    created = registry.create(tenant, Tier.DEDICATED, display_name="Acme", settings={"pii_terms": ["iban"]})
    try:
        assert created.state is TenantState.PROVISIONING
        assert not created.is_active
        with pytest.raises(TenantExists):
            registry.create(tenant, Tier.POOLED)

        got = registry.get(tenant)
        assert got is not None
        assert (got.tier, got.display_name, dict(got.settings)) == (Tier.DEDICATED, "Acme", {"pii_terms": ["iban"]})

        assert registry.mark_step(tenant, "topics", done=True) is not None
        got = registry.get(tenant)
        assert got is not None and set(got.steps) == {"topics"}
        registry.mark_step(tenant, "topics", done=False)
        got = registry.get(tenant)
        assert got is not None and dict(got.steps) == {}

        # Compare-and-set: only from the expected state.
        assert registry.set_state(tenant, TenantState.SUSPENDED, expected=[TenantState.ACTIVE]) is None
        active = registry.set_state(tenant, TenantState.ACTIVE, expected=[TenantState.PROVISIONING])
        assert active is not None and active.is_active
        assert registry.is_active(tenant)

        updated = registry.update(tenant, display_name="Acme Corp")
        assert updated is not None and updated.display_name == "Acme Corp"
        assert dict(updated.settings) == {"pii_terms": ["iban"]}
        assert updated.updated_at >= created.updated_at
    finally:
        assert registry.delete(tenant)
    assert registry.get(tenant) is None
    assert not registry.delete(tenant)
    assert not registry.is_active(tenant)
    assert registry.is_active(tenant, unregistered=True)


def test_paging_in_id_order(registry: TenantRegistry, tenant: str) -> None:
    ids = [f"{tenant}-{i}" for i in range(3)]
    for tenant_id in ids:
        registry.create(tenant_id, Tier.POOLED)
    try:
        first = registry.list(after=f"{tenant}-", limit=2)
        assert [r.id for r in first] == ids[:2]
        rest = registry.list(after=first[-1].id, limit=2)
        assert rest[0].id == ids[2]
    finally:
        for tenant_id in ids:
            registry.delete(tenant_id)


def test_directory_routes_a_registered_dedicated_tenant(
    registry: TenantRegistry, settings: Settings, tenant: str
) -> None:
    directory = TenantDirectory(registry, settings.lake_root, ttl_s=60)
    assert not directory.names(tenant).dedicated
    registry.create(tenant, Tier.DEDICATED)
    try:
        directory.invalidate(tenant)
        assert directory.names(tenant).priority_topic == f"metalake.tenant.{tenant}.events.priority"
        assert not directory.is_active(tenant)  # still provisioning
    finally:
        registry.delete(tenant)


def test_a_deleting_or_forgotten_tenant_is_refused_for_events_until_recreated(
    registry: TenantRegistry, tenant: str
) -> None:
    other = f"{tenant}-ok"
    registry.create(tenant, Tier.POOLED)
    registry.create(other, Tier.POOLED)
    try:
        for t in (tenant, other):
            registry.set_state(t, TenantState.ACTIVE)
        unregistered = f"{tenant}-none"
        assert registry.refused_for_events([tenant, other, unregistered]) == set()
        registry.set_state(tenant, TenantState.SUSPENDED)
        assert registry.refused_for_events([tenant, other]) == set()  # suspended: its accepted events are kept
        registry.set_state(tenant, TenantState.DELETING)
        assert registry.refused_for_events([tenant, other, unregistered]) == {tenant}
        # Deleted: no document, but the tombstone keeps its late events out (an unregistered id is still accepted).
        assert registry.forget(tenant)
        assert registry.get(tenant) is None
        assert registry.refused_for_events([tenant, other, unregistered]) == {tenant}
        # The id registered again starts clean.
        registry.create(tenant, Tier.POOLED)
        assert registry.refused_for_events([tenant]) == set()
    finally:
        registry.forget(tenant)
        registry.delete(other)
        registry.create(tenant, Tier.POOLED)  # and clears the tombstone again: leave nothing behind
        registry.delete(tenant)
