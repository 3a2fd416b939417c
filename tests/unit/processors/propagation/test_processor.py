"""The processor's batch handling: reading change records, publishing in order, deterministic replays."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from catalog.changes import STATE_CHANGED, StateChange
from catalog.propagation.graph import Limits
from catalog.propagation.tenant import TenantPropagation
from metalake.events import CloudEvent, decode_record
from processors.propagation.processor import PropagationProcessor, read_change
from tenants.naming import CHANGES_TOPIC
from tests._support.kafka_record import Record

A = "urn:metalake:pg:prod/db/s/src/email"
B = "urn:metalake:pg:prod/db/s/mid/email"
C = "urn:metalake:pg:prod/db/s/out/email"


def FakeRecord(tenant: str, data: dict[str, Any], event_type: str = STATE_CHANGED) -> Record:
    """A state change as the streaming job publishes it; a record of another type with its routing headers only."""
    if event_type != STATE_CHANGED:
        return Record([("ce_type", event_type.encode()), ("ce_tenantid", tenant.encode())], json.dumps(data).encode())
    change = StateChange(id=f"{tenant}-{data['event_id']}", source="/processors/enrichment", tenant=tenant, **data)
    event = change.event()
    return Record(event.headers(), event.value(), key=event.key)


class RecordingPublisher:
    def __init__(self) -> None:
        self.sent: list[tuple[str, CloudEvent]] = []

    def publish(self, events: Sequence[CloudEvent], topic_for: Callable[[CloudEvent], str]) -> object:
        self.sent.extend((topic_for(e), e) for e in events)
        return None


def change(table: str, key: dict[str, str], version: int, deleted: bool = False, **state: Any) -> dict[str, Any]:
    return {
        "table": table,
        "key": key,
        "deleted": deleted,
        "version": version,
        "event_id": f"ev{version}",
        "state": state,
    }


def edges_only(tenant: str) -> TenantPropagation:
    state = TenantPropagation(tenant, Limits())
    state.apply("lineage_edges", {"upstream": A, "urn": B, "version": 1, "event_id": "l1", "deleted": False})
    state.apply("lineage_edges", {"upstream": B, "urn": C, "version": 1, "event_id": "l2", "deleted": False})
    return state


def processor(publisher: RecordingPublisher, **kw: Any) -> PropagationProcessor:
    return PropagationProcessor(edges_only, publisher, lambda t: f"prio.{t}", **kw)


def tagged(version: int, deleted: bool = False) -> FakeRecord:
    return FakeRecord(
        "acme", change("classifications", {"urn": A, "tag": "PII"}, version, deleted, source="human", propagate=True)
    )


def test_a_tag_is_published_to_the_priority_topic_then_completed_to_changes() -> None:
    publisher = RecordingPublisher()
    outcome = processor(publisher).handle([tagged(100)])
    assert (outcome.added, outcome.removed) == (2, 0)
    topics = [t for t, _ in publisher.sent]
    assert topics == ["prio.acme", "prio.acme", CHANGES_TOPIC]
    first, second, completed = (e for _, e in publisher.sent)
    assert first.type == "io.metalake.classification.propagated.v1"
    assert first.data == {"urn": B, "version": 100, "tag": "PII", "origin": A, "path": [A, B], "depth": 1}
    assert second.data["path"] == [A, B, C] and second.data["depth"] == 2
    assert first.partitionkey == f"acme:{B}"
    assert completed.type == "io.metalake.propagation.completed.v1"
    assert completed.partitionkey == "acme"  # keyed by tenant, like every record of metalake.changes
    assert completed.data == {
        "urn": A,
        "version": 100,
        "origin": A,
        "tag": "PII",
        "added": [B, C],
        "removed": [],
        "added_count": 2,
        "removed_count": 0,
        "reached": 2,
        "max_depth": 2,
        "truncated": False,
        "reason": None,
    }
    # What was published decodes as a valid event of its type (schemas and envelope agree).
    for _, event in publisher.sent:
        decoded = decode_record(event.key, event.value(), event.headers())
        assert decoded.data == event.data


def test_a_replay_after_a_restart_publishes_the_same_ids() -> None:
    first, second = RecordingPublisher(), RecordingPublisher()
    processor(first).handle([tagged(100)])
    processor(second).handle([tagged(100)])  # a new process: nothing committed, nothing in the stores yet
    assert [e.id for _, e in first.sent] == [e.id for _, e in second.sent]


def test_a_change_seen_twice_by_one_process_publishes_nothing_the_second_time() -> None:
    publisher = RecordingPublisher()
    proc = processor(publisher)
    proc.handle([tagged(100)])
    sent = len(publisher.sent)
    outcome = proc.handle([tagged(100)])
    assert (outcome.added, outcome.removed, len(publisher.sent)) == (0, 0, sent)


def test_removal_publishes_unpropagations_with_newer_versions() -> None:
    publisher = RecordingPublisher()
    proc = processor(publisher)
    proc.handle([tagged(100)])
    publisher.sent.clear()
    proc.handle([tagged(101, deleted=True)])
    types = [(e.type, e.data["urn"], e.data["version"]) for _, e in publisher.sent]
    assert types == [
        ("io.metalake.classification.unpropagated.v1", B, 101),
        ("io.metalake.classification.unpropagated.v1", C, 101),
        ("io.metalake.propagation.completed.v1", A, 101),
    ]
    assert publisher.sent[-1][1].data["removed"] == [B, C]
    assert publisher.sent[-1][1].data["reached"] == 0


def test_a_tag_with_nothing_downstream_still_completes_with_zero() -> None:
    publisher = RecordingPublisher()
    record = FakeRecord("acme", change("classifications", {"urn": C, "tag": "PII"}, 5, source="human"))
    processor(publisher).handle([record])
    assert [(e.type, e.data["reached"]) for _, e in publisher.sent] == [("io.metalake.propagation.completed.v1", 0)]


def test_other_records_and_other_tenants_are_skipped() -> None:
    publisher = RecordingPublisher()
    records = [
        FakeRecord("acme", {"origin": A}, "io.metalake.propagation.completed.v1"),
        FakeRecord("other", change("classifications", {"urn": A, "tag": "PII"}, 1, source="human")),
    ]
    outcome = processor(publisher, tenants=["acme"]).handle(records)
    assert (outcome.changes, publisher.sent) == (0, [])


def test_the_echo_of_a_propagated_tag_changes_nothing() -> None:
    publisher = RecordingPublisher()
    proc = processor(publisher)
    proc.handle([tagged(100)])
    publisher.sent.clear()
    echo = FakeRecord(
        "acme", change("propagated_tags", {"urn": B, "tag": "PII", "origin": A}, 100, path=[A, B], depth=1)
    )
    outcome = proc.handle([echo])
    assert (outcome.runs, publisher.sent) == (0, [])


@pytest.mark.parametrize("value", [b"not json", b"{}", b'{"table": "assets"}', b"[1]"])
def test_unreadable_change_records_are_skipped(value: bytes, caplog: pytest.LogCaptureFixture) -> None:
    record = FakeRecord("acme", change("classifications", {"urn": A, "tag": "PII"}, 1, source="human"))
    record._value = value
    assert read_change(record) is None
    assert [r.message for r in caplog.records] == ["propagation.unreadable_change"]


def test_a_change_record_reads_as_the_row_it_was_written_from() -> None:
    record = FakeRecord("acme", change("classifications", {"urn": A, "tag": "PII"}, 7, source="human", propagate=True))
    read = read_change(record)
    assert read is not None and read.tenant == "acme" and read.table == "classifications"
    assert read.row == {
        "source": "human",
        "propagate": True,
        "urn": A,
        "tag": "PII",
        "deleted": False,
        "version": 7,
        "event_id": "ev7",
    }


def test_the_hook_runs_after_publishing() -> None:
    publisher = RecordingPublisher()
    seen: list[int] = []
    proc = processor(publisher, after_publish=lambda batch: seen.append(len(publisher.sent)))
    proc.handle([tagged(100)])
    assert seen == [3]


def _on(partition: int, tenant: str, version: int) -> Record:
    record = FakeRecord(
        tenant, change("classifications", {"urn": A, "tag": "PII"}, version, source="human", propagate=True)
    )
    return Record(record.headers(), record.value(), partition=partition, key=record.key())


def test_an_instance_holds_only_the_tenants_of_the_partitions_it_owns() -> None:
    loads: list[str] = []

    def load(tenant: str) -> TenantPropagation:
        loads.append(tenant)
        return edges_only(tenant)

    proc = PropagationProcessor(load, RecordingPublisher(), lambda t: f"prio.{t}", tenants=None)
    proc.reconcile("boot")  # loaded at start, before any record tells its partition
    proc.handle([_on(0, "acme", 100), _on(1, "globex", 100)])
    assert loads == ["boot", "acme", "globex"]

    proc.retain({0})  # partition 1 went to another instance, which may change globex meanwhile
    assert (proc.state("acme") is not None, proc.state("globex"), proc.state("boot")) == (True, None, None)

    # Partition 1 comes back: globex is reloaded (current, from MongoDB) at its next record, not served stale.
    proc.retain({0, 1})
    proc.handle([_on(1, "globex", 101)])
    assert loads == ["boot", "acme", "globex", "globex"]
    assert proc.state("acme") is not None and proc.state("globex") is not None


def test_a_tenant_seen_on_several_partitions_is_held_only_while_all_are_owned() -> None:
    # Records published before changes were keyed by tenant spread a tenant over partitions.
    proc = processor(RecordingPublisher())
    proc.handle([_on(0, "acme", 100), _on(2, "acme", 101)])
    proc.retain({0, 1})
    assert proc.state("acme") is None
