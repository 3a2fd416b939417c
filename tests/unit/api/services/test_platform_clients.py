"""Platform-admin clients: only platform admins are reachable, the last active one is kept unless forced, and every
change (refusals included) is audited on the platform. An in-memory store stands in for ``clients``."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from api.context import ApiContext
from api.services import audit, platform_clients
from control.auth.clients import ClientRecord, ClientStore, Role, SecretInfo
from control.auth.principal import Principal, Scope

OPERATOR = Principal(subject="mlc_operator", tenant=None, scopes=frozenset({Scope.PLATFORM_ADMIN.value}))
CTX = cast(ApiContext, object())


class MemoryStore(ClientStore):
    def __init__(self, *records: ClientRecord) -> None:
        self.records = {r.client_id: r for r in records}

    def get(self, client_id: str) -> ClientRecord | None:
        return self.records.get(client_id)

    def other_active_platform_admins(self, client_id: str) -> int:
        return sum(
            1
            for r in self.records.values()
            if r.client_id != client_id and r.role is Role.PLATFORM_ADMIN and r.tenant is None and r.active
        )

    def rotate(self, client_id: str, overlap_s: int) -> tuple[ClientRecord, str] | None:
        record = self.records[client_id]
        return (record, "new-secret") if record.active else None

    def revoke(self, client_id: str) -> ClientRecord | None:
        record = replace(self.records[client_id], state="revoked", secrets=())
        self.records[client_id] = record
        return record


def _client(client_id: str, tenant: str | None, role: Role, state: str = "active") -> ClientRecord:
    now = datetime.now(UTC)
    return ClientRecord(client_id, tenant, role, (), "n", state, now, now, (SecretInfo("h", now, None),))


@pytest.fixture
def audited(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []

    def record_platform(ctx: Any, principal: Principal, action: str, target: str, result: str, **_: Any) -> None:
        rows.append((action, target, result))

    monkeypatch.setattr(audit, "record_platform", record_platform)
    return rows


def test_the_last_active_admin_is_refused_unless_forced(audited: list[tuple[str, str, str]]) -> None:
    store = MemoryStore(
        _client("mlc_a", None, Role.PLATFORM_ADMIN),
        _client("mlc_b", None, Role.PLATFORM_ADMIN),
        _client("mlc_old", None, Role.PLATFORM_ADMIN, state="revoked"),
        # A tenant admin is no platform admin: it does not count as one left.
        _client("mlc_t", "acme", Role.ADMIN),
    )
    revoked = platform_clients.revoke_admin(CTX, store, OPERATOR, "mlc_a", force=False)
    assert revoked is not None and revoked.state == "revoked"
    with pytest.raises(platform_clients.LastPlatformAdmin):
        platform_clients.revoke_admin(CTX, store, OPERATOR, "mlc_b", force=False)
    assert store.records["mlc_b"].active
    forced = platform_clients.revoke_admin(CTX, store, OPERATOR, "mlc_b", force=True)
    assert forced is not None and not forced.active
    assert audited == [
        ("client.revoke", "mlc_a", audit.DONE),
        ("client.revoke", "mlc_b", audit.REFUSED),
        ("client.revoke", "mlc_b", audit.DONE),
    ]


def test_tenant_clients_are_out_of_reach(audited: list[tuple[str, str, str]]) -> None:
    store = MemoryStore(_client("mlc_t", "acme", Role.ADMIN), _client("mlc_a", None, Role.PLATFORM_ADMIN))
    assert platform_clients.get_admin(store, "mlc_t") is None
    assert platform_clients.get_admin(store, "mlc_missing") is None
    assert platform_clients.rotate_admin(CTX, store, OPERATOR, "mlc_t", 0) is None
    assert platform_clients.revoke_admin(CTX, store, OPERATOR, "mlc_t", force=True) is None
    assert store.records["mlc_t"].active and audited == []


def test_rotation_is_audited_and_a_revoked_admin_is_not_rotated(audited: list[tuple[str, str, str]]) -> None:
    store = MemoryStore(
        _client("mlc_a", None, Role.PLATFORM_ADMIN), _client("mlc_r", None, Role.PLATFORM_ADMIN, state="revoked")
    )
    rotated = platform_clients.rotate_admin(CTX, store, OPERATOR, "mlc_a", 0)
    assert rotated is not None and rotated[1] == "new-secret"
    assert platform_clients.rotate_admin(CTX, store, OPERATOR, "mlc_r", 0) is None
    assert audited == [("client.rotate", "mlc_a", audit.DONE)]
