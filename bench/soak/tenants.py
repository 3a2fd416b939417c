"""The soak's tenants, made through the admin API as the demo makes them: pooled tenants, each with a write key (its
ingest), a signed-webhook subscription to the bench's receiver and a Monte Carlo connector (its incident webhooks).
Kept owner-only in the stack's folder, so ``--reuse`` runs on the same tenants (a validation run, then the long one)."""

from __future__ import annotations

import json
import os
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tenant_isolation_setup import create_tenant  # bench/ is on sys.path: bench/soak.py runs as a script

from ops.demo import montecarlo
from ops.demo.api_client import ApiClient
from ops.settings import Settings

STATE_FILE = "bench-soak.json"
SUBSCRIPTION = "soak-hook"
#: What the soak's subscriptions take: tag changes, propagation and incidents (not every asset's state change).
EVENT_TYPES = ("classification.*", "tag.*", "propagation.*", "incidents.*")


@dataclass(frozen=True)
class Tenant:
    id: str
    write_key: str
    mc_secret: str  # Monte Carlo's signing secret of the tenant's connector


@dataclass(frozen=True)
class Fleet:
    tenants: tuple[Tenant, ...]
    webhook_secret: str

    def save(self, settings: Settings) -> None:
        path = settings.local_stack_dir / STATE_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(asdict(self), out)

    @classmethod
    def load(cls, settings: Settings) -> Fleet | None:
        path: Path = settings.local_stack_dir / STATE_FILE
        if not path.is_file():
            return None
        doc = json.loads(path.read_text())
        return cls(tuple(Tenant(**t) for t in doc["tenants"]), doc["webhook_secret"])


def montecarlo_secret(api: ApiClient, tenant: str) -> str:
    path = f"/v1/tenants/{tenant}/connectors"
    spec = {"type": montecarlo.TYPE, "config": montecarlo.connector_config()}
    if api.call("POST", path, json={"name": montecarlo.CONNECTOR, **spec}, expect=(201, 409)).status_code == 409:
        api.call("PUT", f"{path}/{montecarlo.CONNECTOR}", json=spec)
    rotated = api.json("POST", f"{path}/{montecarlo.CONNECTOR}/secrets", json={"overlap_seconds": 0}, expect=(201,))
    secret: str = rotated["secret"]
    return secret


def point_subscription(api: ApiClient, tenant: str, url: str, secret: str) -> None:
    """Create the tenant's webhook subscription, or point it at this run's receiver and secret."""
    body: dict[str, Any] = {
        "config": {"url": url},
        "secrets": {"key_id": "soak", "secret": secret},
        "filters": {"event_types": list(EVENT_TYPES)},
    }
    path = f"/v1/tenants/{tenant}/subscriptions"
    created = api.call("POST", path, json={"name": SUBSCRIPTION, "destination": "webhook", **body}, expect=(201, 409))
    if created.status_code == 409:
        api.call("PATCH", f"{path}/{SUBSCRIPTION}", json={**body, "enabled": True})


def one_tenant(api: ApiClient, url: str, secret: str) -> Tenant:
    tenant = create_tenant(api, "soak", 120)
    key: str = api.json("POST", f"/v1/tenants/{tenant}/write-keys", json={}, expect=(201,))["key"]
    point_subscription(api, tenant, url, secret)
    return Tenant(tenant, key, montecarlo_secret(api, tenant))


def provision(api: ApiClient, count: int, url: str) -> Fleet:
    """``count`` new pooled tenants, four at a time (each waits for its provisioning)."""
    secret = secrets.token_urlsafe(24)
    with ThreadPoolExecutor(max_workers=4) as pool:
        tenants = list(pool.map(lambda _: one_tenant(api, url, secret), range(count)))
    return Fleet(tuple(tenants), secret)


def repoint(api: ApiClient, fleet: Fleet, url: str) -> None:
    """A reused fleet: every subscription to this run's receiver (its port is fixed, but it may have been disabled)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda t: point_subscription(api, t.id, url, fleet.webhook_secret), fleet.tenants))


def disable(api: ApiClient, fleet: Fleet) -> None:
    """At the end: the receiver stops with the bench, outbound must not retry against its closed port for ever."""
    for t in fleet.tenants:
        api.call("PATCH", f"/v1/tenants/{t.id}/subscriptions/{SUBSCRIPTION}", json={"enabled": False})
