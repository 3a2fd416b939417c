"""Suspending a tenant re-renders Trino's rules at once: its users lose every rule within Trino's reload, not at the
access runner's next resync (300 s); resuming gives them back."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from api.context import ApiContext
from api.routes import tenants as route
from control.auth.principal import Principal, Scope
from ops.settings import Settings
from tenants.access import catalog
from tenants.access.sync import AccessSync
from tenants.model import Tier
from tenants.registry import TenantRecord, TenantState

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class _Registry:
    def __init__(self) -> None:
        self.records = {t: TenantRecord(t, Tier.POOLED, TenantState.ACTIVE, None, NOW, NOW) for t in ("acme", "globex")}

    def list(self) -> list[TenantRecord]:
        return list(self.records.values())

    def get(self, tenant: str) -> TenantRecord | None:
        return self.records.get(tenant)

    def set_state(self, tenant: str, state: TenantState, *, expected: Any = None) -> TenantRecord | None:
        if tenant not in self.records or (expected is not None and self.records[tenant].state not in expected):
            return None
        self.records[tenant] = replace(self.records[tenant], state=state)
        return self.records[tenant]


class _NoMasks:
    def find(self, *args: Any) -> list[dict[str, Any]]:
        return []


def _users(rules_file: Path) -> str:
    rules = json.loads(rules_file.read_text())
    return " ".join(rule.get("user", "") for rule in rules["tables"])


def test_suspend_and_resume_rewrite_the_trino_rules_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(access_rules_file=tmp_path / "rules.json")
    registry = _Registry()

    def sync(settings: Settings, mongo: Any) -> AccessSync:
        out = object.__new__(AccessSync)
        out._settings, out._registry, out._access = settings, registry, _NoMasks()  # type: ignore[assignment]
        return out

    monkeypatch.setattr(route, "AccessSync", sync)
    monkeypatch.setattr(catalog, "schemas", lambda settings: [])
    monkeypatch.setattr(route, "_registry", lambda ctx: registry)
    monkeypatch.setattr(route.audit, "record", lambda *a, **k: None)
    monkeypatch.setattr(route.audit, "record_platform", lambda *a, **k: None)
    monkeypatch.setattr(route.audit, "flush", lambda *a, **k: None)
    monkeypatch.setattr(route, "_view", lambda ctx, record: record)
    ctx = ApiContext(settings=settings, mongo=None)  # type: ignore[arg-type]
    request = SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace()))
    admin = Principal("ops", None, frozenset({Scope.PLATFORM_ADMIN.value}))

    def transition(action: Any) -> Any:
        tc = SimpleNamespace(tenant="acme", principal=admin)
        return asyncio.run(route._transition(request, tc, ctx, action))  # type: ignore[arg-type]

    sync(settings, None).render()
    assert "tenant\\.acme" in _users(settings.access_rules_file)
    assert transition("suspend").state is TenantState.SUSPENDED
    # No rule names a suspended tenant's users any more: Trino denies them everything.
    assert "tenant\\.acme" not in _users(settings.access_rules_file)
    assert "tenant\\.globex" in _users(settings.access_rules_file)
    assert transition("resume").state is TenantState.ACTIVE
    assert "tenant\\.acme" in _users(settings.access_rules_file)
    # Deleting: its users go at once too, before the deprovisioning runs (queued for the lake worker, not run here).
    tc = SimpleNamespace(tenant="acme", principal=admin)
    asyncio.run(route.delete_tenant(request, tc, ctx, confirm="acme"))  # type: ignore[arg-type]
    assert registry.records["acme"].state is TenantState.DELETING
    assert "tenant\\.acme" not in _users(settings.access_rules_file)


def test_a_failed_render_does_not_undo_the_suspension(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(settings: Settings, mongo: Any) -> Any:
        raise ConnectionError("trino down")

    monkeypatch.setattr(route, "AccessSync", broken)
    ctx = ApiContext(settings=Settings(access_rules_file=tmp_path / "rules.json"), mongo=None)  # type: ignore[arg-type]
    route.render_access(ctx, "acme")  # logged: the access runner's resync renders it
    assert not (tmp_path / "rules.json").exists()
