"""Issue 13 item 5 on the real stack: two instances each of propagation, outbound and access share
``metalake.changes`` (one consumer group per processor, fresh and positioned at the end of the topic so the stack's
own processors never collide with them), both get partitions and do work, and a rebalance in the middle of a run
(one instance stopped, a third started) loses nothing and doubles nothing.

The processes are started as the stack starts them (``python -m processors.<name> run``). No streaming job runs
here: the test commits state the way the job does (MongoDB first, then the change record on ``metalake.changes``,
keyed by tenant), and for propagation it also applies the published propagated tags to MongoDB as the job would, so
an instance that takes a tenant over reloads what the job would hold. The tenants are picked so that their records
land on every partition of the topic (asserted from Kafka's delivery reports).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from catalog.changes import StateChange
from control.subscriptions.store import SubscriptionStore
from metalake.events import CloudEvent
from metalake.kafka import EventProducer
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import CHANGES_TOPIC, CONTROL_DATABASE, TenantNames
from tests._support.itest import wait_for
from tests._support.kafka_tail import Record, mark, read_since
from tests._support.outbound_helpers import WEBHOOK_SECRET, classification_event, webhook_sub
from tests._support.outbound_runtime import MAIN_TOPICS, RETRY, start_groups_at_end
from tests._support.pipeline_procs import dedicated_tenant
from tests._support.sealing import stack_sealer
from tests._support.trinoschema import schema_of
from tests._support.webhook_server import WebhookServer

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]
PROPAGATED = "io.metalake.classification.propagated.v1"
UNPROPAGATED = "io.metalake.classification.unpropagated.v1"
COMPLETED = "io.metalake.propagation.completed.v1"


class Instance:
    """One processor process with its JSON log in a file."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.name, self.log = name, log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", *args],
                env={**os.environ, "PYTHONUNBUFFERED": "1", "METALAKE_TELEMETRY__LOG_LEVEL": "INFO", **env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def lines(self, *events: str) -> list[dict[str, Any]]:
        """The log records of these events, in the order logged."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines() if self.log.exists() else ():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") in events:
                out.append(record)
        return out

    def owns(self) -> int:
        """How many partitions of its group it owns now (from its last assignment log line)."""
        changes = self.lines("kafka.partitions_assigned", "kafka.partitions_revoked")
        return int(changes[-1]["owned"]) if changes else 0

    def check(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        return self.proc.returncode


@pytest.fixture
def instances() -> Iterator[list[Instance]]:
    started: list[Instance] = []
    yield started
    for inst in started:
        inst.stop()


def partitions_of(settings: Settings) -> int:
    return len(mark(settings, CHANGES_TOPIC))


def spread_tenants(settings: Settings) -> list[str]:
    """One fresh tenant per partition of ``metalake.changes``: librdkafka's default partitioner puts a key on
    ``crc32(key) % partitions`` (checked against the delivery reports where the tenants' records are published)."""
    count = partitions_of(settings)
    assert count >= 2, "metalake.changes needs several partitions to show instances sharing it"
    chosen: dict[int, str] = {}
    while len(chosen) < count:
        tenant = f"it-{secrets.token_hex(4)}"
        chosen.setdefault(zlib.crc32(tenant.encode()) % count, tenant)
    return [chosen[p] for p in sorted(chosen)]


def commit_changes(settings: Settings, changes: list[StateChange]) -> None:
    """Publish state changes as the job does (keyed by tenant); every tenant must land on a partition of its own."""
    with EventProducer(settings) as producer:
        deliveries = producer.publish([c.event() for c in changes], lambda e: CHANGES_TOPIC)
    where: dict[str, set[int]] = {}
    for change, delivery in zip(changes, deliveries, strict=True):
        where.setdefault(change.tenant, set()).add(delivery.partition)
    assert all(len(p) == 1 for p in where.values()), where
    assert len({next(iter(p)) for p in where.values()}) == len(where), f"tenants share a partition: {where}"


def started_in_group(instances: list[Instance], timeout_s: float = 90) -> None:
    def probe() -> bool:
        for inst in instances:
            inst.check()
        return all(inst.owns() > 0 for inst in instances)

    wait_for("every instance to own partitions", probe, timeout_s=timeout_s, interval_s=0.5)


# --- propagation ------------------------------------------------------------------------------------------------


def col(tenant: str, table: str) -> str:
    return f"urn:metalake:postgres:prod/{tenant}/public/{table}/email"


def state_change(
    tenant: str, table: str, key: dict[str, Any], version: int, deleted: bool, **state: Any
) -> StateChange:
    event_id = f"{tenant}-{table}-{'-'.join(map(str, key.values()))}-{version}"
    return StateChange(
        id=event_id,
        source="/tests/scale-out",
        tenant=tenant,
        table=table,
        key=key,
        deleted=deleted,
        version=version,
        event_id=event_id,
        state=state,
    )


def commit_edge(mongo: Mongo, names: TenantNames, up: str, down: str, version: int) -> StateChange:
    change = state_change(names.tenant_id, "lineage_edges", {"upstream": up, "urn": down}, version, False)
    mongo[names.mongo_database]["lineage"].replace_one({"_id": f"{up}|{down}"}, change.row, upsert=True)
    return change


def commit_tag(mongo: Mongo, names: TenantNames, urn: str, version: int, deleted: bool = False) -> StateChange:
    change = state_change(
        names.tenant_id, "classifications", {"urn": urn, "tag": "PII"}, version, deleted, source="human", propagate=True
    )
    mongo[names.mongo_database]["classifications"].replace_one({"_id": f"{urn}|PII"}, change.row, upsert=True)
    return change


def apply_as_the_job(mongo: Mongo, names: TenantNames, records: list[Record]) -> None:
    """What the streaming job does with the propagated tags of the tenant's priority topic: version-guarded rows."""
    rows = mongo[names.mongo_database]["propagated_tags"]
    for record in records:
        data = json.loads(record.value or b"{}")
        row = {
            "urn": data["urn"],
            "tag": data["tag"],
            "origin": data["origin"],
            "path": data["path"],
            "depth": data["depth"],
            "version": data["version"],
            "event_id": record.headers["ce_id"].decode(),
            "deleted": record.headers["ce_type"] == UNPROPAGATED.encode(),
        }
        doc_id = f"{row['urn']}|{row['tag']}|{row['origin']}"
        held = rows.find_one({"_id": doc_id})
        if held is None or (held["version"], held["event_id"]) < (row["version"], row["event_id"]):
            rows.replace_one({"_id": doc_id}, row, upsert=True)


def tag_events(
    settings: Settings, names: TenantNames, since: dict[int, int], wanted: set[tuple[str, str]]
) -> list[Record]:
    """The tenant's tag events since ``since``, once every (type, urn) of ``wanted`` is among them."""

    def probe() -> list[Record] | None:
        records = read_since(
            settings,
            names.priority_topic,
            since,
            lambda r: r.headers.get("ce_type") in (PROPAGATED.encode(), UNPROPAGATED.encode()),
            expect=len(wanted),
            timeout_s=3,
            settle_s=0.5,
        )
        return records if wanted <= set(by_state(records)) else None

    return wait_for(f"{names.tenant_id}'s tag events", probe, timeout_s=90, interval_s=0.5)


def by_state(records: list[Record]) -> dict[tuple[str, str], set[str]]:
    """(type, urn) -> the distinct event ids published for it (one per state; copies of an id are replays)."""
    out: dict[tuple[str, str], set[str]] = {}
    for r in records:
        urn = json.loads(r.value or b"{}")["urn"]
        out.setdefault((r.headers["ce_type"].decode(), urn), set()).add(r.headers["ce_id"].decode())
    return out


def test_propagation_instances_split_the_tenants_and_a_rebalance_loses_and_doubles_nothing(
    settings: Settings, stack: StackManager, mongo: Mongo, instances: list[Instance], tmp_path: Path
) -> None:
    tenants = spread_tenants(settings)
    group = f"it-scale-propagation-{secrets.token_hex(4)}"
    start_groups_at_end(settings, {group: CHANGES_TOPIC})
    with ExitStack() as stack_of_tenants:
        names = [stack_of_tenants.enter_context(dedicated_tenant(settings, mongo, t)) for t in tenants]
        # users -> customers -> report in every tenant, committed before the processors start.
        commit_changes(
            settings,
            [
                c
                for n in names
                for c in (
                    commit_edge(mongo, n, col(n.tenant_id, "users"), col(n.tenant_id, "customers"), 1),
                    commit_edge(mongo, n, col(n.tenant_id, "customers"), col(n.tenant_id, "report"), 1),
                )
            ],
        )
        args = ["processors.propagation", "run", "--group", group, "--progress-s", "5"]
        for t in tenants:
            args += ["--tenant", t]

        def start(name: str) -> Instance:
            inst = Instance(name, args, tmp_path / f"{name}.log", {})
            instances.append(inst)
            return inst

        first, second = start("propagation-1"), start("propagation-2")
        started_in_group([first, second])
        marks = {n.tenant_id: mark(settings, n.priority_topic) for n in names}

        # 1. The tag on users.email: each tenant is propagated by the instance that owns its partition.
        commit_changes(settings, [commit_tag(mongo, n, col(n.tenant_id, "users"), 100) for n in names])
        for n in names:
            t = n.tenant_id
            wanted = {(PROPAGATED, col(t, "customers")), (PROPAGATED, col(t, "report"))}
            apply_as_the_job(mongo, n, tag_events(settings, n, marks[t], wanted))
        for inst in (first, second):
            # Nothing was published at start (no tags yet): each instance's lines are its share of step 1.
            assert inst.lines("propagation.published"), f"{inst.name} did no work:\n{inst.tail()}"

        # 2. A new edge per tenant, and a rebalance while it is processed: one instance leaves, a third joins.
        commit_changes(
            settings,
            [commit_edge(mongo, n, col(n.tenant_id, "report"), col(n.tenant_id, "dashboard"), 2) for n in names],
        )
        assert second.stop() == 0, second.tail()
        third = start("propagation-3")
        started_in_group([first, third])
        for n in names:
            wanted = {(PROPAGATED, col(n.tenant_id, u)) for u in ("customers", "report", "dashboard")}
            apply_as_the_job(mongo, n, tag_events(settings, n, marks[n.tenant_id], wanted))

        # 3. The tag goes after the rebalance: every propagated tag goes with it.
        commit_changes(settings, [commit_tag(mongo, n, col(n.tenant_id, "users"), 101, deleted=True) for n in names])
        for n in names:
            t = n.tenant_id
            reached = [col(t, "customers"), col(t, "report"), col(t, "dashboard")]
            records = tag_events(settings, n, marks[t], {(k, u) for k in (PROPAGATED, UNPROPAGATED) for u in reached})
            apply_as_the_job(mongo, n, records)
            published = by_state(records)
            # Nothing lost: each propagated and unpropagated; nothing doubled: one event id per state (an instance
            # that takes a tenant over may publish a state again after its reload: with the same id).
            assert sorted(published) == sorted((k, u) for k in (PROPAGATED, UNPROPAGATED) for u in reached), published
            assert all(len(ids) == 1 for ids in published.values()), published
            live = mongo[n.mongo_database]["propagated_tags"].count_documents({"deleted": False})
            assert live == 0
        forgotten = [r for inst in instances for r in inst.lines("propagation.tenant_forgotten")]
        assert any(r.get("reason") == "partition_not_owned" for r in forgotten), "no tenant changed hands"
        for inst in (first, third):
            inst.check()
        assert third.lines("propagation.published"), third.tail()


# --- outbound ---------------------------------------------------------------------------------------------------


OUTBOUND_FAST = {
    "METALAKE_OUTBOUND__ALLOW_BASE_URL_OVERRIDE": "true",
    "METALAKE_OUTBOUND__SSRF_ALLOW": '["127.0.0.0/8"]',
    "METALAKE_OUTBOUND__SUBSCRIPTIONS_TTL_S": "1",
    "METALAKE_OUTBOUND__BACKOFF_INITIAL_S": "0.05",
    "METALAKE_OUTBOUND__BACKOFF_MAX_S": "0.2",
    "METALAKE_OUTBOUND__HTTP_TIMEOUT_S": "3",
    "METALAKE_OUTBOUND__POLL_TIMEOUT_S": "0.2",
    "METALAKE_OUTBOUND__SESSION_TIMEOUT_MS": "6000",
}


def test_outbound_instances_share_deliveries_and_a_rebalance_sends_each_change_once(
    settings: Settings, stack: StackManager, mongo: Mongo, instances: list[Instance], tmp_path: Path
) -> None:
    tenants = spread_tenants(settings)
    run = secrets.token_hex(4)
    group, retry_group = f"it-scale-outbound-{run}", f"it-scale-outbound-retry-{run}"
    start_groups_at_end(settings, {group: MAIN_TOPICS, retry_group: RETRY})
    env = {**OUTBOUND_FAST, "METALAKE_OUTBOUND__GROUP_ID": group, "METALAKE_OUTBOUND__RETRY_GROUP_ID": retry_group}
    hook = WebhookServer(WEBHOOK_SECRET).start()
    store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
    try:
        for t in tenants:
            webhook_sub(store, t, hook.url)

        def start(name: str) -> Instance:
            inst = Instance(name, ["processors.outbound", "run"], tmp_path / f"{name}.log", env)
            instances.append(inst)
            return inst

        def changes(first_version: int) -> list[CloudEvent]:
            return [
                classification_event(t, f"urn:metalake:postgres:prod/{t}/public/t{i}/email", "PII", version=1)
                for t in tenants
                for i in range(first_version, first_version + 10)
            ]

        def publish(events: list[CloudEvent]) -> None:
            commit_changes(settings, [StateChange.of(e) for e in events])

        def delivered(expected: int) -> None:
            def probe() -> bool:
                for inst in instances:
                    if inst.proc.returncode is None:
                        inst.check()
                return len(hook.verified) >= expected

            wait_for(f"{expected} webhook deliveries", probe, timeout_s=90, interval_s=0.5)

        one, two = start("outbound-1"), start("outbound-2")
        started_in_group([one, two])
        publish(changes(0))
        delivered(10 * len(tenants))
        for inst in (one, two):
            assert {r["tenant"] for r in inst.lines("outbound.delivered")} & set(tenants), inst.tail()

        # A rebalance in the middle of a run: the second batch is published, one instance stops, a third joins.
        publish(changes(10))
        assert two.stop() == 0, two.tail()
        three = start("outbound-3")
        started_in_group([one, three])
        delivered(20 * len(tenants))
        publish(changes(20))
        delivered(30 * len(tenants))

        ids = [{k.lower(): v for k, v in r["headers"].items()}["webhook-id"] for r in hook.verified]
        assert len(ids) == 30 * len(tenants) == len(set(ids)), "a change was delivered twice"
        assert hook.rejected == 0
        assert three.lines("outbound.delivered"), three.tail()
    finally:
        hook.stop()
        for t in tenants:
            store.delete(t, "hook")


# --- access -----------------------------------------------------------------------------------------------------


def masked(rules_file: Path) -> dict[str, set[str]]:
    """schema -> the columns masked for its plain user, from the rules file."""
    if not rules_file.is_file():
        return {}
    out: dict[str, set[str]] = {}
    for rule in json.loads(rules_file.read_text())["tables"]:
        for column in rule.get("columns", ()):
            if column.get("mask"):
                out.setdefault(rule["schema"].strip("^()$"), set()).add(column["name"])
    return out


def test_access_instances_share_the_tenants_and_a_rebalance_leaves_every_mask_in_the_rules(
    settings: Settings, stack: StackManager, mongo: Mongo, instances: list[Instance], tmp_path: Path
) -> None:
    tenants = spread_tenants(settings)
    group = f"it-scale-access-{secrets.token_hex(4)}"
    start_groups_at_end(settings, {group: CHANGES_TOPIC})
    rules = tmp_path / "rules.json"
    # Its own rules file (Trino keeps reading the stack's); a long resync, so the changes alone drive the work.
    env = {
        "METALAKE_ACCESS__GROUP_ID": group,
        "METALAKE_ACCESS__RULES_FILE": str(rules),
        "METALAKE_ACCESS__RESYNC_INTERVAL_S": "3600",
    }
    instance_name = settings.access.trino_instance
    with ExitStack() as stack_of_tenants:
        names = [stack_of_tenants.enter_context(dedicated_tenant(settings, mongo, t)) for t in tenants]
        stack_of_tenants.callback(mongo[CONTROL_DATABASE]["trino_access"].delete_many, {"_id": {"$in": tenants}})

        def start(name: str) -> Instance:
            inst = Instance(name, ["processors.access", "run"], tmp_path / f"{name}.log", env)
            instances.append(inst)
            return inst

        def column(n: TenantNames, name: str) -> str:
            return f"urn:metalake:trino:{instance_name}/{settings.trino.catalog}/{schema_of(n)}/people/{name}"

        def tag_all(name: str) -> None:
            commit_changes(settings, [commit_tag(mongo, n, column(n, name), 1) for n in names])

        def rules_hold(columns: set[str]) -> None:
            def probe() -> bool:
                for inst in instances:
                    if inst.proc.returncode is None:
                        inst.check()
                now = masked(rules)
                return all(now.get(schema_of(n)) == columns for n in names)

            wait_for(f"{sorted(columns)} masked for every tenant", probe, timeout_s=90, interval_s=0.5)

        one, two = start("access-1"), start("access-2")
        started_in_group([one, two], timeout_s=180)  # each runs a full sync of every tenant first
        tag_all("email")
        rules_hold({"email"})
        for inst in (one, two):
            worked = {r["tenant"] for r in inst.lines("access.tenant_refreshed") if r.get("columns")}
            assert worked & set(tenants), f"{inst.name} refreshed none of the tenants:\n{inst.tail()}"

        # A rebalance in the middle of a run.
        tag_all("phone")
        assert two.stop() == 0, two.tail()
        three = start("access-3")
        started_in_group([one, three], timeout_s=180)
        rules_hold({"email", "phone"})
        tag_all("ssn")
        rules_hold({"email", "phone", "ssn"})
        stored = {
            d["_id"]: d["masked"] for d in mongo[CONTROL_DATABASE]["trino_access"].find({"_id": {"$in": tenants}})
        }
        assert all(len(masks) == 3 for masks in stored.values()) and len(stored) == len(tenants), stored
