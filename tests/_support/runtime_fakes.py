"""In-memory fakes of the connector runtime's stores and publisher: routes tested as pure logic, no Kafka or MongoDB."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any, cast

from joserfc.jwk import RSAKey
from pydantic import SecretStr

from connectors.runtime.context import Runtime
from connectors.runtime.publisher import Encoded
from connectors.runtime.transforms import Routed
from control.audit import AuditRow
from control.auth.clients import ClientCache, ClientRecord, Role
from control.auth.gate import TokenGate
from control.auth.jwks import JwksCache
from control.auth.validator import AccessTokenValidator
from control.connectors.records import ConnectorRecord, ConnectorState, SecretInfo, WriteKeyGrant
from metalake.events.envelope import decode_record
from metalake.kafka import Delivery, PublishError, RawRecord
from metalake.sealing import SealingError
from ops.settings import Settings
from tenants.model import Tier
from tenants.registry import TenantDirectory, TenantRecord, TenantState
from tests._support.jwt_forge import AUDIENCE, ISSUER, claims, sign

WRITE_KEY = "mlk_k1_supersecretvalue"
# A write key created with the PII grant (control.auth.pii).
PII_WRITE_KEY = "mlk_k2_anothersecretvalue"
TOKEN_HEADER = {"alg": "RS256", "typ": "at+jwt", "kid": "unit-1"}


@cache
def token_key() -> RSAKey:
    """The key the fake issuer signs access tokens with (generated once per test process)."""
    return RSAKey.generate_key(2048, parameters={"kid": "unit-1", "alg": "RS256", "use": "sig"}, private=True)


def access_token(**overrides: Any) -> str:
    """An access token of the fake issuer: ``jwt_forge.claims`` (tenant ``acme``, client ``mlc_test``) overridden."""
    return sign(token_key(), TOKEN_HEADER, claims(**overrides))


class FakeClients:
    """API clients by id: every client exists and is active unless revoked here."""

    def __init__(self) -> None:
        self.revoked: set[str] = set()

    def get(self, client_id: str) -> ClientRecord | None:
        now = datetime.now(UTC)
        state = "revoked" if client_id in self.revoked else "active"
        return ClientRecord(client_id, "acme", Role.ADMIN, (), "unit", state, now, now, ())


class FakeTenants:
    """The tenant registry: no tenant is registered (all pooled and usable) until one is suspended here."""

    def __init__(self) -> None:
        self.records: dict[str, TenantRecord] = {}

    def get(self, tenant_id: str) -> TenantRecord | None:
        return self.records.get(tenant_id)

    def suspend(self, tenant_id: str) -> None:
        now = datetime.now(UTC)
        self.records[tenant_id] = TenantRecord(tenant_id, Tier.POOLED, TenantState.SUSPENDED, None, now, now)


def fake_gate(clients: FakeClients, tenants: FakeTenants) -> TokenGate:
    """The real gate over the fake issuer's key, the fake clients and the fake registry (no caching)."""
    keys = JwksCache(lambda: {"keys": [token_key().as_dict(private=False)]}, min_refresh_s=10, max_age_s=300)
    validator = AccessTokenValidator(keys, issuer=ISSUER, audience=AUDIENCE, leeway_s=5, tenant_claim="tenant")
    return TokenGate(
        validator, ClientCache(cast(Any, clients), 0.0), TenantDirectory(tenants, Path("/lake"), ttl_s=0.0)
    )


class FakeSecrets:
    """``ControlStore.secrets``: each connector's webhook signing secrets (``signing``), no configuration secrets."""

    def __init__(self) -> None:
        self.signing: dict[str, list[SecretStr]] = {}
        # Connectors whose stored secrets do not open with the process's key (sealed elsewhere, moved, plain text).
        self.unsealable: set[str] = set()

    def of(self, tenant: str, name: str) -> tuple[list[SecretStr], dict[str, SecretStr]]:
        if f"{tenant}/{name}" in self.unsealable:
            raise SealingError(f"connector_secrets/{tenant}/{name} field webhook_secrets.x is not sealed")
        return list(self.signing.get(f"{tenant}/{name}", [])), {}

    def config(self, tenant: str, name: str) -> dict[str, SecretStr]:
        return {}

    def webhook_info(self, tenant: str, name: str) -> list[SecretInfo]:
        return []


class FakeWriteKeys:
    """``ControlStore.write_keys``: WRITE_KEY and PII_WRITE_KEY, both of acme's, the second with the PII grant."""

    def __init__(self) -> None:
        self.tenants: dict[str, str] = {
            hashlib.sha256(key.encode()).hexdigest(): "acme" for key in (WRITE_KEY, PII_WRITE_KEY)
        }
        self.pii = {hashlib.sha256(PII_WRITE_KEY.encode()).hexdigest()}

    def tenant_of(self, key: SecretStr) -> str | None:
        return self.tenants.get(hashlib.sha256(key.get_secret_value().encode()).hexdigest())

    def check(self, key: SecretStr) -> WriteKeyGrant | None:
        digest = hashlib.sha256(key.get_secret_value().encode()).hexdigest()
        tenant = self.tenants.get(digest)
        if tenant is None:
            return None
        return WriteKeyGrant(tenant, key.get_secret_value().split("_")[1], digest in self.pii)


class FakeStore:
    def __init__(self) -> None:
        self.records: dict[str, ConnectorRecord] = {}
        self.secrets = FakeSecrets()
        self.write_keys = FakeWriteKeys()

    def add(self, record: ConnectorRecord, *webhook_secrets: str) -> None:
        self.records[record.id] = record
        self.secrets.signing[record.id] = [SecretStr(s) for s in webhook_secrets]

    def get_connector(self, tenant: str, name: str) -> ConnectorRecord | None:
        return self.records.get(f"{tenant}/{name}")

    def connectors_of_type(self, tenant: str, type_: str) -> list[ConnectorRecord]:
        return [r for r in self.records.values() if r.tenant == tenant and r.type == type_]

    def list_connectors(self, tenant: str | None = None) -> list[ConnectorRecord]:
        return [r for r in self.records.values() if tenant is None or r.tenant == tenant]

    def set_state(self, tenant: str, name: str, state: ConnectorState, error: str | None = None) -> bool:
        record = self.records[f"{tenant}/{name}"]
        self.records[record.id] = ConnectorRecord(
            record.tenant,
            record.name,
            record.type,
            record.config,
            record.transforms,
            record.errors_tolerance,
            state,
            error if state is ConnectorState.FAILED else None,
        )
        return True


class FakeAudit:
    """The tenants' audit tables, in memory."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, AuditRow]] = []

    def record(self, tenant: str, rows: Sequence[AuditRow]) -> None:
        self.rows += [(tenant, row) for row in rows]


class FakeDeliveries:
    retention = timedelta(days=7)

    def __init__(self, ttl_index: bool = True) -> None:
        self.seen_keys: dict[str, str] = {}
        self.ttl_index = ttl_index
        self.prunes = 0

    def ensure_expiry(self) -> bool:
        return self.ttl_index

    def prune(self) -> int:
        self.prunes += 1
        return 0

    def seen(self, tenant: str, connector: str, dedup_key: str) -> bool:
        return f"{tenant}/{connector}/{dedup_key}" in self.seen_keys

    def record(self, tenant: str, connector: str, dedup_key: str, outcome: str, event_ids: Sequence[str]) -> bool:
        self.seen_keys[f"{tenant}/{connector}/{dedup_key}"] = outcome
        return True


@dataclass
class FakePublisher:
    routed: list[Routed] = field(default_factory=list)
    dead: list[RawRecord] = field(default_factory=list)
    down: bool = False

    def publish(self, routed: Sequence[Routed]) -> list[Delivery]:
        if self.down and routed:
            raise PublishError("1 event(s) not confirmed by Kafka within 1s", True)
        self.routed.extend(routed)
        return [Delivery(r.event.id, "t", 0, i) for i, r in enumerate(routed)]

    def publish_encoded(self, tenant: str, encoded: Sequence[Encoded]) -> list[Delivery]:
        # Read back as the streaming job reads a record: what was encoded must be a valid event of the tenant.
        events = [decode_record(e.key, e.value, e.headers) for e in encoded]
        assert {e.tenantid for e in events} <= {tenant}
        return self.publish([Routed(event, e.topic_class) for event, e in zip(events, encoded, strict=True)])

    def publish_dead_letters(self, letters: Sequence[RawRecord]) -> list[Delivery]:
        if self.down and letters:
            raise PublishError("1 event(s) not confirmed by Kafka within 1s", True)
        self.dead.extend(letters)
        return [Delivery("dlq", "t", 0, i) for i, _ in enumerate(letters)]

    def close(self) -> None:
        pass


class FakeOffsets:
    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[dict[str, Any]] = []

    def load(self, tenant: str, connector: str, timeout_s: float | None = None) -> dict[str, Any]:
        return dict(self.stored.get((tenant, connector), {}))

    def store(self, tenant: str, connector: str, offsets: Mapping[str, Any]) -> None:
        self.writes.append(dict(offsets))
        current = self.stored.setdefault((tenant, connector), {})
        for key, value in offsets.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value

    def close(self) -> None:
        pass


class FakeCounter:
    def __init__(self) -> None:
        self.calls: list[dict[str, str] | None] = []

    def add(self, amount: int, attributes: dict[str, str] | None = None) -> None:
        self.calls.extend([attributes] * amount)


@dataclass
class World:
    settings: Settings
    store: FakeStore
    deliveries: FakeDeliveries
    publisher: FakePublisher
    offsets: FakeOffsets
    counter: FakeCounter
    runtime: Runtime
    clients: FakeClients
    tenants: FakeTenants
    audit: FakeAudit
