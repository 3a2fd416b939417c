"""TenantDirectory: the TTL cache that routes a tenant to its topics, and answers whether it is active."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tenants.model import Tier
from tenants.naming import BULK_TOPIC, PRIORITY_TOPIC
from tenants.registry import TenantDirectory, TenantRecord, TenantState
from tests._support.fake_clock import FakeClock

ROOT = Path("/lake")


def _record(tenant_id: str, tier: Tier, state: TenantState = TenantState.ACTIVE) -> TenantRecord:
    now = datetime.now(UTC)
    return TenantRecord(id=tenant_id, tier=tier, state=state, lake_root=None, created_at=now, updated_at=now)


class _Registry:
    def __init__(self) -> None:
        self.records: dict[str, TenantRecord] = {}
        self.calls = 0
        self.down = False

    def get(self, tenant_id: str) -> TenantRecord | None:
        self.calls += 1
        if self.down:
            raise ConnectionError("registry unreachable")
        return self.records.get(tenant_id)


def _directory(registry: _Registry, clock: FakeClock) -> TenantDirectory:
    return TenantDirectory(registry, ROOT, ttl_s=5.0, clock=clock)


def test_unregistered_tenant_is_pooled_and_active() -> None:
    directory = _directory(_Registry(), FakeClock())
    names = directory.names("acme")
    assert (names.priority_topic, names.bulk_topic) == (PRIORITY_TOPIC, BULK_TOPIC)
    assert names.lake_dir == ROOT / "acme"
    assert directory.is_active("acme")
    assert not directory.is_active("acme", unregistered=False)


def test_dedicated_tenant_gets_its_topics() -> None:
    registry = _Registry()
    registry.records["acme"] = _record("acme", Tier.DEDICATED)
    names = _directory(registry, FakeClock()).names("acme")
    assert names.priority_topic == "metalake.tenant.acme.events.priority"
    assert names.bulk_topic == "metalake.tenant.acme.events.bulk"


def test_own_lake_root_is_used() -> None:
    registry = _Registry()
    now = datetime.now(UTC)
    registry.records["acme"] = TenantRecord(
        id="acme",
        tier=Tier.DEDICATED,
        state=TenantState.ACTIVE,
        lake_root=Path("/other"),
        created_at=now,
        updated_at=now,
    )
    assert _directory(registry, FakeClock()).names("acme").lake_dir == Path("/other/acme")


def test_cached_within_ttl_then_refreshed() -> None:
    registry, clock = _Registry(), FakeClock()
    directory = _directory(registry, clock)
    assert not directory.names("acme").dedicated
    registry.records["acme"] = _record("acme", Tier.DEDICATED)
    clock.now += 4.9
    assert not directory.names("acme").dedicated  # negative answers are cached too
    assert registry.calls == 1
    clock.now += 0.2
    assert directory.names("acme").dedicated
    assert registry.calls == 2


def test_suspension_is_seen_after_invalidate() -> None:
    registry, clock = _Registry(), FakeClock()
    registry.records["acme"] = _record("acme", Tier.POOLED)
    directory = _directory(registry, clock)
    assert directory.is_active("acme")
    registry.records["acme"] = _record("acme", Tier.POOLED, TenantState.SUSPENDED)
    assert directory.is_active("acme")
    directory.invalidate("acme")
    assert not directory.is_active("acme")


def test_stale_entry_survives_an_unreachable_registry() -> None:
    registry, clock = _Registry(), FakeClock()
    registry.records["acme"] = _record("acme", Tier.DEDICATED)
    directory = _directory(registry, clock)
    assert directory.names("acme").dedicated
    registry.down = True
    clock.now += 60
    assert directory.names("acme").dedicated
    with pytest.raises(ConnectionError):
        directory.names("other")


def test_invalid_id_is_refused_before_any_lookup() -> None:
    registry = _Registry()
    with pytest.raises(ValueError, match="invalid tenant id"):
        _directory(registry, FakeClock()).names("Not_Valid")
    assert registry.calls == 0
