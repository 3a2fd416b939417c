"""Dead letters in the real, shared DLQ topics that are no longer the tenant's (issue 21): Kafka keeps a letter until
the topic's retention, whatever happens to its tenant meanwhile.

- Item 14: once the tenant erased an asset, a letter naming its URN (as the erase records it: the URN's keyed hash
  in the tenant's erased set) is not listed, not shown and not replayable (a replay would publish the asset again).
- Item 7: a tenant id registered again after its deletion does not inherit the letters of the tenant that held the
  id before: the letters older than the registration are not listed, shown nor replayed; its own new ones are."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app as create_api
from control.erased import ErasedUrns, urn_hasher
from metalake.kafka import EventProducer, RawRecord
from metalake.kafka.dlq import DeadLetter, dead_letter_record
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE, dlq_topic
from tenants.registry import TenantRegistry, TenantState
from tests._support.itest import wait_for
from tests._support.tokens import api_settings, auth_headers

pytestmark = pytest.mark.integration


def _letter(tenant: str, urn: str) -> RawRecord:
    """An outbound dead letter of a change about ``urn`` (as the outbound runtime writes one that failed for good)."""
    change = {"type": "io.metalake.asset.upserted.v1", "tenantid": tenant, "data": {"urn": urn, "version": 1}}
    letter = DeadLetter(
        reason="the receiver answered 410",
        error_class="PermanentDelivery",
        stage="outbound",
        tenant_id=tenant,
        subscription=f"sub_{uuid.uuid4().hex[:12]}",
    )
    key = f"{tenant}:{urn}".encode()
    return dead_letter_record(dlq_topic("outbound"), str(uuid.uuid4()), key, json.dumps(change).encode(), [], letter)


def _publish(settings: Settings, *records: RawRecord) -> None:
    with EventProducer(settings) as producer:
        producer.publish_raw(list(records))


def _listed(api: TestClient, tenant: str, headers: dict[str, str]) -> dict[str, str]:
    """The tenant's outbound letters: id -> the key of the record (which names its URN)."""
    route = f"/v1/tenants/{tenant}/dead-letters"
    items = api.get(route, params={"stage": "outbound"}, headers=headers).json()["items"]
    return {i["id"]: api.get(f"{route}/{i['id']}", headers=headers).json()["key"] for i in items}


def _gone(api: TestClient, tenant: str, headers: dict[str, str], letter: str) -> None:
    route = f"/v1/tenants/{tenant}/dead-letters/{letter}"
    assert api.get(route, headers=headers).status_code == 404
    assert api.post(f"{route}/replay", headers=headers).status_code == 404


def test_letters_naming_an_erased_urn_are_not_listed_shown_nor_replayed(
    settings: Settings, stack: StackManager, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    erased = f"urn:metalake:postgres:{tenant}/shop/public/customers"
    kept = f"urn:metalake:postgres:{tenant}/shop/public/orders"
    _publish(settings, _letter(tenant, erased), _letter(tenant, f"{erased}/email"), _letter(tenant, kept))
    tuned = api_settings(settings)
    with TestClient(create_api(tuned)) as api:
        admin = auth_headers(api, tenant=tenant, role="admin")

        def all_three() -> dict[str, str] | None:
            found = _listed(api, tenant, admin)
            return found if len(found) == 3 else None

        before = wait_for("the three letters listed", all_three)
        by_key = {key: letter for letter, key in before.items()}

        # What the erase records before it deletes anything (processors.lake.erase), with its children.
        ErasedUrns(mongo[CONTROL_DATABASE]).add(tenant, urn_hasher(tuned).digest(erased), True)

        after = _listed(api, tenant, admin)
        assert list(after.values()) == [f"{tenant}:{kept}"]
        for urn in (erased, f"{erased}/email"):
            _gone(api, tenant, admin, by_key[f"{tenant}:{urn}"])


def test_a_re_registered_tenant_id_does_not_inherit_the_previous_tenants_letters(
    settings: Settings, stack: StackManager, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    old_urn = f"urn:metalake:postgres:{tenant}/old/public/payroll"
    new_urn = f"urn:metalake:postgres:{tenant}/new/public/orders"
    registry.create(tenant, Tier.POOLED)
    registry.set_state(tenant, TenantState.ACTIVE)
    try:
        _publish(settings, _letter(tenant, old_urn))
        with TestClient(create_api(api_settings(settings))) as api:
            first = auth_headers(api, tenant=tenant, role="admin")
            [old] = wait_for("the first tenant's letter", lambda: list(_listed(api, tenant, first)) or None)

            # The tenant is deleted (its registry document goes, a tombstone stays), then the id is registered again.
            registry.forget(tenant)
            registry.create(tenant, Tier.POOLED)
            registry.set_state(tenant, TenantState.ACTIVE)
            _publish(settings, _letter(tenant, new_urn))
            second = auth_headers(api, tenant=tenant, role="admin")
            listed = wait_for("the new tenant's letter", lambda: _listed(api, tenant, second) or None)
            assert list(listed.values()) == [f"{tenant}:{new_urn}"]
            _gone(api, tenant, second, old)
    finally:
        registry.delete(tenant)
