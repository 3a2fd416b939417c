"""Deleting a tenant tombstones its connector offsets in the compacted offsets topic (real Kafka), those of a
connector deleted earlier too, and leaves other tenants' offsets alone."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app
from api.auth.deps import current_principal
from control.auth.principal import Principal
from control.connectors.offsets import OffsetStore
from control.connectors.store import ControlStore
from control.provisioning.provisioner import Provisioner
from control.provisioning.steps import STEPS, ControlPlaneStep, OffsetsStep, StepContext
from metalake.kafka.config import client_config, consumer_config
from ops.settings import Settings
from ops.stack.launcher import LocalProcessLauncher
from tenants.model import Tier
from tenants.naming import CONNECT_OFFSETS_TOPIC, CONTROL_DATABASE
from tenants.registry import TenantRegistry, TenantState
from tests._support.sealing import stack_sealer

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]


def last_values(settings: Settings) -> dict[tuple[str, str, str], bytes | None]:
    """The last value of every key of the offsets topic, read from the beginning to the end (None: a tombstone)."""
    consumer = Consumer(consumer_config(settings, f"it-offsets-{uuid.uuid4().hex}"))
    try:
        topic = consumer.list_topics(CONNECT_OFFSETS_TOPIC, timeout=30).topics[CONNECT_OFFSETS_TOPIC]
        ends: dict[int, int] = {}
        starts = []
        for partition in topic.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(CONNECT_OFFSETS_TOPIC, partition), timeout=30)
            if high > low:
                ends[partition] = high
                starts.append(TopicPartition(CONNECT_OFFSETS_TOPIC, partition, low))
        consumer.assign(starts)
        last: dict[tuple[str, str, str], bytes | None] = {}
        while ends:
            for msg in consumer.consume(num_messages=1000, timeout=1.0):
                assert msg.error() is None, msg.error()
                try:
                    key = tuple(json.loads(msg.key() or b""))
                except ValueError:
                    continue
                if len(key) == 3:
                    last[(str(key[0]), str(key[1]), str(key[2]))] = msg.value()
                partition, offset = msg.partition() or 0, msg.offset() or 0
                if offset + 1 >= ends.get(partition, 0):
                    ends.pop(partition, None)
        return last
    finally:
        consumer.close()


def test_deprovisioning_tombstones_every_offset_of_the_tenant_only(
    settings: Settings, control: Mongo, tenant: str
) -> None:
    other = f"{tenant}-b"
    store = OffsetStore(settings)
    connectors = ControlStore(control[CONTROL_DATABASE], stack_sealer())
    registry = TenantRegistry(control[CONTROL_DATABASE])
    try:
        store.store(tenant, "pg", {"shop.public.a": {"lsn": 1}, "shop.public.b": {"lsn": 2}})
        store.store(tenant, "deleted-before", {"p": {"page": 3}})  # no connector document any more
        store.store(other, "pg", {"shop.public.a": {"lsn": 9}})
        connectors.put_connector(tenant, "pg", "postgres", {"host": "db"})
        registry.create(tenant, Tier.POOLED)
        registry.set_state(tenant, TenantState.DELETING)

        context = StepContext(settings, control, LocalProcessLauncher(settings))
        prov = Provisioner(registry, context, (ControlPlaneStep(), OffsetsStep()))
        outcome = prov.deprovision(tenant)
        assert outcome.ok, outcome
        assert outcome.ran == ("offsets", "control")  # while the connectors are still documented
        assert registry.get(tenant) is None
        assert connectors.get_connector(tenant, "pg") is None

        last = last_values(settings)
        mine = {k: v for k, v in last.items() if k[0] == tenant}
        assert set(mine) == {
            (tenant, "pg", "shop.public.a"),
            (tenant, "pg", "shop.public.b"),
            (tenant, "deleted-before", "p"),
        }
        assert set(mine.values()) == {None}  # the last record of each key is a tombstone
        assert last[(other, "pg", "shop.public.a")] == b'{"lsn":9}'
        loaded = OffsetStore(settings).load_all()
        assert loaded.get((other, "pg")) == {"shop.public.a": {"lsn": 9}}
        assert not any(offsets for (t, _), offsets in loaded.items() if t == tenant)
        # Again: nothing live, nothing written.
        assert store.forget_tenant(tenant) == 0
    finally:
        store.forget_tenant(other)
        store.close()
        connectors.delete_connector(tenant, "pg")
        registry.delete(tenant)


def test_offsets_step_undoes_before_the_control_plane_step() -> None:
    """Deprovisioning runs STEPS backwards: the offsets go while the connector documents still exist."""
    names = [s.name for s in STEPS]
    assert names.index("offsets") > names.index("control")


def test_an_erased_urn_leaves_the_offsets_api_and_the_topics_latest_values(
    settings: Settings, control: Mongo, tenant: str
) -> None:
    """Issue 12, item 11: the crawler's offsets name tables, columns and upstreams; after an erase of a table (the
    erase command calls ``forget_urn``, here directly: no Spark) neither ``GET .../connectors/{name}/offsets`` nor
    the last value of any key of the topic holds its URN, in any spelling. Other tenants' offsets stay."""
    table = f"urn:metalake:postgres:{tenant}/shop/public/jane%20doe%27s%20orders"
    odd = f"urn:metalake:postgres:{tenant}/shop/public/jane doe's orders"
    orders = f"urn:metalake:postgres:{tenant}/shop/public/orders"
    other = f"{tenant}-b"
    store = OffsetStore(settings)
    connectors = ControlStore(control[CONTROL_DATABASE], stack_sealer())
    app = create_app(settings, mongo=control)
    reader = Principal(subject="it-reader", tenant=tenant, scopes=frozenset({"tenant:read"}))
    app.dependency_overrides[current_principal] = lambda: reader
    try:
        store.ensure_topic()
        store.store(
            tenant,
            "pg",
            {
                '{"table":"jane"}': {"urn": odd, "hash": "h1", "version": 1, "columns": ["id"], "upstreams": []},
                '{"table":"orders"}': {
                    "urn": orders,
                    "hash": "h2",
                    "version": 1,
                    "columns": ["id"],
                    "upstreams": [table],
                },
            },
        )
        store.store(other, "pg", {'{"table":"orders"}': {"urn": orders, "upstreams": [table]}})
        connectors.put_connector(tenant, "pg", "postgres", {"host": "db"})

        assert store.forget_urn(tenant, table) == (1, 1)

        with TestClient(app) as api:
            served = api.get(f"/v1/tenants/{tenant}/connectors/pg/offsets")
        assert served.status_code == 200, served.text
        assert [o["partition"] for o in served.json()["offsets"]] == ['{"table":"orders"}']
        assert "jane" not in served.text
        last = last_values(settings)
        mine = {k: v for k, v in last.items() if k[0] == tenant}
        assert mine[(tenant, "pg", '{"table":"jane"}')] is None  # tombstoned
        assert json.loads(mine[(tenant, "pg", '{"table":"orders"}')] or b"{}")["upstreams"] == []
        assert not any(b"jane" in (v or b"") for v in mine.values())
        assert json.loads(last[(other, "pg", '{"table":"orders"}')] or b"{}")["upstreams"] == [table]
        # The topic bounds how long the superseded records stay (docs/events.md).
        admin = AdminClient(client_config(settings))
        resource = ConfigResource(ConfigResource.Type.TOPIC, CONNECT_OFFSETS_TOPIC)
        described = next(iter(admin.describe_configs([resource]).values())).result(timeout=30)
        assert described["max.compaction.lag.ms"].value == str(settings.connect.offsets_max_compaction_lag_ms)
        assert described["segment.ms"].value == str(settings.connect.offsets_segment_ms)
    finally:
        store.forget_tenant(tenant)
        store.forget_tenant(other)
        store.close()
        connectors.delete_connector(tenant, "pg")
