"""The tenants of ``bench/tenant_isolation.py`` and what each needs, made through the admin API as the demo makes them
(a platform-admin client kept in ``.stack``), and the bodies the bench sends: CloudEvents batches for the ingest API
and OpenLineage run events with nested schemas."""

from __future__ import annotations

import json
import os
import secrets
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from metalake.kafka import EventProducer
from metalake.urn import asset_urn
from ops.demo.api_client import ApiClient, ApiError, admin_file, load_or_create_admin
from ops.demo.catalog import invalid_record
from ops.settings import Settings
from tenants.naming import names_for

STATE_FILE = "bench-tenant-isolation.json"
SUBSCRIPTION = "bench-trickle"
SOURCE = "/bench/tenant-isolation"
OL_PRODUCER = "https://github.com/metalake/bench/tenant_isolation"


@dataclass(frozen=True)
class Credentials:
    """Everything the bench needs of its two tenants; stored owner-only in .stack for ``--reuse``."""

    victim: str
    noisy: str
    victim_key: str  # a write key of the victim: its ingest
    victim_reader: tuple[str, str]  # a read-only client (sql:read): its SQL
    noisy_key: str  # a write key of the noisy tenant: OpenLineage
    noisy_admins: tuple[tuple[str, str], ...]  # admin clients: dead-letter listings, tagging
    noisy_assets: tuple[str, ...]  # table URNs the noisy tenant tags
    webhook_secret: str

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Credentials:
        return cls(
            victim=doc["victim"],
            noisy=doc["noisy"],
            victim_key=doc["victim_key"],
            victim_reader=(doc["victim_reader"][0], doc["victim_reader"][1]),
            noisy_key=doc["noisy_key"],
            noisy_admins=tuple((c[0], c[1]) for c in doc["noisy_admins"]),
            noisy_assets=tuple(doc["noisy_assets"]),
            webhook_secret=doc["webhook_secret"],
        )


def state_path(settings: Settings) -> Path:
    return settings.local_stack_dir / STATE_FILE


def save_state(settings: Settings, creds: Credentials) -> None:
    path = state_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(asdict(creds), out)


def load_state(settings: Settings) -> Credentials | None:
    path = state_path(settings)
    return Credentials.from_json(json.loads(path.read_text())) if path.is_file() else None


def admin_api(settings: Settings) -> ApiClient:
    """The admin API with the demo's platform-admin client (created once, its secret kept owner-only in .stack)."""
    api = ApiClient(f"http://{settings.api.host}:{settings.api.port}")
    client_id, secret, created = load_or_create_admin(settings)
    try:
        api.token(client_id, secret)
    except ApiError as exc:
        if created or exc.status != 401:
            raise
        admin_file(settings).unlink()  # the stored client is gone (a wiped .stack/data): make a new one
        client_id, secret, _ = load_or_create_admin(settings)
        api.token(client_id, secret)
    return api


@contextmanager
def admin_session(settings: Settings) -> Iterator[ApiClient]:
    """A platform-admin session with a fresh token (a run may outlast one: api.token_lifetime_s, 15 min)."""
    api = admin_api(settings)
    try:
        yield api
    finally:
        api.close()


def create_tenant(api: ApiClient, prefix: str, timeout_s: float) -> str:
    tenant = f"{prefix}-{secrets.token_hex(3)}"
    api.call("POST", "/v1/tenants", json={"id": tenant, "display_name": "bench tenant_isolation"}, expect=(202,))
    deadline = time.monotonic() + timeout_s
    while api.json("GET", f"/v1/tenants/{tenant}").get("state") != "active":
        if time.monotonic() > deadline:
            raise SystemExit(
                f"tenant {tenant} did not become active within {timeout_s:.0f} s (metalake stack logs api)"
            )
        time.sleep(0.5)
    return tenant


def create_client(api: ApiClient, tenant: str, role: str, name: str) -> tuple[str, str]:
    body = {"name": name, "role": role}
    doc = api.json("POST", f"/v1/tenants/{tenant}/clients", json=body, expect=(201, 200))
    return doc["client_id"], doc["client_secret"]


def create_write_key(api: ApiClient, tenant: str) -> str:
    key: str = api.json("POST", f"/v1/tenants/{tenant}/write-keys", json={}, expect=(201,))["key"]
    return key


def provision(api: ApiClient, connect_base: str, admins: int, assets: int, timeout_s: float) -> Credentials:
    """Two new tenants: the victim with a write key and a reader, the noisy one with a write key, ``admins`` admin
    clients and ``assets`` tables in its catalog (tagging needs the asset in the projection)."""
    victim = create_tenant(api, "victim", timeout_s)
    noisy = create_tenant(api, "noisy", timeout_s)
    noisy_key = create_write_key(api, noisy)
    urns = seed_assets(connect_base, noisy_key, noisy, assets)
    wait_for_asset(api, noisy, urns[-1], timeout_s)
    return Credentials(
        victim=victim,
        noisy=noisy,
        victim_key=create_write_key(api, victim),
        victim_reader=create_client(api, victim, "read-only", "bench sql"),
        noisy_key=noisy_key,
        noisy_admins=tuple(create_client(api, noisy, "admin", f"bench flood {i}") for i in range(admins)),
        noisy_assets=urns,
        webhook_secret=secrets.token_urlsafe(24),
    )


def reader_works(api_base: str, reader: tuple[str, str]) -> bool:
    """Whether a stored client still gets a token (a reused state file may outlive a wiped stack)."""
    form = {"grant_type": "client_credentials"}
    return httpx.post(f"{api_base}/oauth/token", data=form, auth=reader, timeout=30).status_code == 200


def point_subscription(api: ApiClient, tenant: str, url: str, secret: str) -> None:
    """The noisy tenant's webhook to this run's receiver: every tag change of the tenant is delivered there."""
    body = {
        "config": {"url": url},
        "secrets": {"key_id": "bench", "secret": secret},
        "filters": {"event_types": ["classification.*", "tag.*", "propagation.*"]},
    }
    path = f"/v1/tenants/{tenant}/subscriptions"
    created = api.call("POST", path, json={"name": SUBSCRIPTION, "destination": "webhook", **body}, expect=(201, 409))
    if created.status_code == 409:  # a --reuse run: the receiver's port is new
        api.call("PATCH", f"{path}/{SUBSCRIPTION}", json={**body, "enabled": True})


def disable_subscription(api: ApiClient, tenant: str) -> None:
    """The receiver stops with the bench: the runtime must not retry against its closed port for an hour."""
    api.call("PATCH", f"/v1/tenants/{tenant}/subscriptions/{SUBSCRIPTION}", json={"enabled": False})


def seed_dead_letters(settings: Settings, tenant: str, count: int) -> None:
    """Invalid records on the tenant's event topic (as the demo's): the streaming job dead-letters them into the
    tenant's ``_dlq`` rows, which a listing reads beside the DLQ topics."""
    topic = names_for(tenant, settings.lake_root).priority_topic
    with EventProducer(settings) as producer:
        producer.publish_raw([invalid_record(tenant, topic) for _ in range(count)])


def seed_assets(connect_base: str, key: str, tenant: str, count: int) -> tuple[str, ...]:
    urns = tuple(asset_urn("postgres", "noisy-bench", "shop", "public", f"t{i}") for i in range(count))
    body = [upsert_event(tenant, urn, int(time.time() * 1000)) for urn in urns]
    answer = httpx.post(f"{connect_base}/v1/events", json=body, headers=_bearer(key), timeout=60)
    if answer.status_code != 200 or answer.json().get("rejected"):
        raise SystemExit(f"seeding the noisy tenant's assets: {answer.status_code} {answer.text[:300]}")
    return urns


def wait_for_asset(api: ApiClient, tenant: str, urn: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    params = {"urn": urn}
    while api.call("GET", f"/v1/tenants/{tenant}/assets", params=params, expect=(200, 404)).status_code != 200:
        if time.monotonic() > deadline:
            raise SystemExit(f"{urn} not in the projection after {timeout_s:.0f} s (metalake stack logs stream)")
        time.sleep(1)


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def upsert_event(tenant: str, urn: str, version: int) -> dict[str, Any]:
    """A structured CloudEvent for ``POST /v1/events``: a table as its source sees it."""
    data = {"urn": urn, "version": version, "kind": "table", "name": urn.rsplit("/", 1)[-1]}
    return {
        "specversion": "1.0",
        "id": str(uuid.uuid4()),
        "source": SOURCE,
        "type": "io.metalake.asset.upserted.v1",
        "tenantid": tenant,
        "data": data,
    }


def ingest_batch(tenant: str, events: int, seq: int) -> list[dict[str, Any]]:
    """``events`` table upserts over a rolling set of 1000 tables; ``seq`` keeps versions increasing."""
    version = int(time.time() * 1000)
    return [
        upsert_event(tenant, asset_urn("postgres", "victim-bench", "shop", "public", f"t{(seq + i) % 1000}"), version)
        for i in range(events)
    ]


def nested_fields(depth: int, width: int, name_bytes: int) -> list[dict[str, Any]]:
    """A schema facet's ``fields``: ``width`` plain columns per level plus one struct holding the next level,
    ``depth`` levels. Column names are built as ``parent.child`` paths, so a deep struct with long names costs the
    mapping far more than its bytes (issue 21, item 2)."""
    innermost: list[dict[str, Any]] = []
    fields = innermost
    for level in range(depth):
        fields.extend({"name": f"c{level}_{j}".ljust(name_bytes, "x"), "type": "varchar"} for j in range(width))
        if level + 1 < depth:
            nested: list[dict[str, Any]] = []
            fields.append({"name": f"s{level}".ljust(name_bytes, "x"), "type": "struct", "fields": nested})
            fields = nested
    return innermost


def lineage_event(i: int, depth: int, width: int, name_bytes: int) -> bytes:
    """One COMPLETE RunEvent with an output whose schema facet is ``nested_fields(depth, width, name_bytes)``."""
    dataset = {
        "namespace": "postgres://noisy.bench:5432",
        "name": f"shop.public.flood_{i % 50}",
        "facets": {"schema": {"_producer": OL_PRODUCER, "fields": nested_fields(depth, width, name_bytes)}},
    }
    doc = {
        "eventType": "COMPLETE",
        "eventTime": datetime.now(UTC).isoformat(),
        "producer": OL_PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "bench", "name": f"flood_{i % 50}"},
        "inputs": [],
        "outputs": [dataset],
    }
    return json.dumps(doc).encode()
