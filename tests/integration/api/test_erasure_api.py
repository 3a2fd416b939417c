"""``POST /v1/tenants/{t}/erasures`` only queues (no erase runs in the API): 202 with the status resource, 409 for a
target already queued, 429 problem+json with Retry-After when the tenant's share or the whole queue is full. The
queue is a scratch database's (the stack's lake worker drains the control plane's)."""

from __future__ import annotations

import hashlib
import secrets
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient
from pymongo.database import Database

from api.app import create_app
from api.auth.deps import current_principal
from api.routes.erasures import erasure_queue
from control.auth.principal import Principal
from control.erased import urn_hasher
from control.erasures import PENDING_ERASURES, ErasureQueue, ErasureState, QueueLimits
from control.settings import ErasureSettings
from ops.settings import Settings
from tenants.naming import names_for

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]
URN = "urn:metalake:postgres:it/shop/public/customers"


@pytest.fixture
def scratch(control: Mongo) -> Iterator[Database[Any]]:
    name = f"it_erasure_api_{secrets.token_hex(4)}"
    yield control[name]
    control.drop_database(name)


@pytest.fixture
def api(settings: Settings, control: Mongo, scratch: Database[Any], tenant: str) -> Iterator[TestClient]:
    tuned = settings.model_copy(update={"erasure": ErasureSettings(queue_max=3, per_tenant_max=2, retry_after_s=42)})
    app = create_app(tuned, mongo=control)
    admin = Principal(subject="it-dpo", tenant=tenant, scopes=frozenset({"tenant:admin"}))
    app.dependency_overrides[current_principal] = lambda: admin
    app.dependency_overrides[erasure_queue] = lambda: ErasureQueue(scratch, QueueLimits(queue_max=3, per_tenant_max=2))
    try:
        with TestClient(app) as client:
            yield client
    finally:
        # The erasure.request audit rows went to the tenant's audit table in the lake.
        shutil.rmtree(names_for(tenant, settings.lake_root).lake_dir, ignore_errors=True)


def test_erasures_are_queued_and_bounded(api: TestClient, scratch: Database[Any], tenant: str) -> None:
    path = f"/v1/tenants/{tenant}/erasures"
    first = api.post(path, json={"urn": URN})
    assert first.status_code == 202, first.text
    assert first.json()["state"] == ErasureState.ACCEPTED.value
    # Queued, not run: it stays accepted (nobody but a lake worker runs it).
    assert api.get(first.headers["location"]).json()["state"] == "accepted"
    assert scratch[PENDING_ERASURES].count_documents({}) == 1

    same = api.post(path, json={"urn": URN, "include_children": True})
    assert same.status_code == 409
    assert same.headers["content-type"].startswith("application/problem+json")
    assert same.json()["erasure"] == first.json()["id"]

    assert api.post(path, json={"urn": f"{URN}/email"}).status_code == 202
    full = api.post(path, json={"urn": f"{URN}/name"})
    assert full.status_code == 429
    assert full.headers["content-type"].startswith("application/problem+json")
    assert full.headers["retry-after"] == "42"
    assert "tenant" in full.json()["detail"]
    assert URN not in full.text

    # Another tenant's requests fill the global queue: then everyone gets 429.
    scratch_queue = ErasureQueue(scratch, QueueLimits(queue_max=3, per_tenant_max=2))
    scratch_queue.store.update(tenant, first.json()["id"], ErasureState.DONE)
    scratch_queue.enqueue(f"{tenant}-b", URN, "0" * 64, False, "it-other")
    scratch_queue.enqueue(f"{tenant}-c", URN, "0" * 64, False, "it-other")
    everyone = api.post(path, json={"urn": f"{URN}/name"})
    assert everyone.status_code == 429 and "queue is full" in everyone.json()["detail"]


def test_any_spelling_of_the_urn_is_accepted_as_the_canonical_one(
    api: TestClient, settings: Settings, tenant: str
) -> None:
    # Issue 12, item 10: ".../jane doe's orders" was refused as "not canonical", so an asset ingested so could never
    # be erased. Any valid spelling names the asset; the erasure records the canonical URN's hash.
    odd = "urn:metalake:postgres:it/shop/public/jane doe's orders"
    canonical = "urn:metalake:postgres:it/shop/public/jane%20doe%27s%20orders"
    path = f"/v1/tenants/{tenant}/erasures"
    accepted = api.post(path, json={"urn": odd})
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["target_hash"] == urn_hasher(settings).digest(canonical)
    assert api.post(path, json={"urn": canonical}).status_code == 409  # the same asset
    invalid = api.post(path, json={"urn": "jane doe's orders"})
    assert invalid.status_code == 422 and invalid.json()["field"] == "urn"


def test_the_erased_urn_is_recorded_by_a_keyed_hash_the_audit_finds_by_the_urn(
    api: TestClient, settings: Settings, tenant: str
) -> None:
    # Issue 21, item 14: a plain sha256 of a URN is tested against guessed URNs by anyone who reads it (the erasure's
    # status, the audit table through SQL). The erasure and its audit row hold an HMAC under a key derived from the
    # KEK; whoever knows the URN still finds the rows through the API, which hashes it.
    hasher = urn_hasher(settings)
    assert hasher.keyed, "the stack configures a key-encryption key"
    digest = hasher.digest(URN)
    accepted = api.post(f"/v1/tenants/{tenant}/erasures", json={"urn": URN})
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["target_hash"] == digest != hashlib.sha256(URN.encode()).hexdigest()
    listed = api.get(f"/v1/tenants/{tenant}/audit", params={"target": URN, "action": "erasure.request"})
    assert listed.status_code == 200, listed.text
    assert [(i["action"], i["target_hash"]) for i in listed.json()["items"]] == [("erasure.request", digest)]
