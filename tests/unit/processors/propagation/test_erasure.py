"""A GDPR erase announced on metalake.changes: the processor forgets the tenant and reloads it from the store, so the
erased asset and its edges never carry a tag again."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from catalog.changes import StateChange
from catalog.propagation.graph import Limits
from catalog.propagation.tenant import TenantPropagation
from metalake.events import CloudEvent, decode_record
from processors.propagation.erasure import ERASED_TYPE, erased_event, erased_tenant
from processors.propagation.processor import PropagationProcessor
from tests._support.kafka_record import Record

A, B, C, D, X = (f"urn:metalake:pg:prod/db/s/{t}" for t in ("src", "mid", "out", "more", "alt"))
PII = {"urn": A, "tag": "PII", "version": 1, "event_id": "t1", "deleted": False, "source": "human"}


def edge(upstream: str, urn: str, version: int = 1) -> dict[str, Any]:
    return {"upstream": upstream, "urn": urn, "version": version, "event_id": f"e-{upstream}-{urn}", "deleted": False}


class Store:
    """What MongoDB holds of the tenant (the loader reads it at each load): edges and assignments, and the loads."""

    def __init__(self, edges: list[dict[str, Any]]) -> None:
        self.edges = edges
        self.loads = 0

    def load(self, tenant: str) -> TenantPropagation:
        self.loads += 1
        state = TenantPropagation(tenant, Limits())
        for row in self.edges:
            state.apply("lineage_edges", row)
        state.apply("classifications", PII)
        return state


def of_event(event: CloudEvent) -> Record:
    return Record(event.headers(), event.value(), key=event.key)


def erased(tenant: str = "acme") -> Record:
    return of_event(erased_event(tenant, str(uuid.uuid4()), hashlib.sha256(B.encode()).hexdigest(), False))


def edge_change(upstream: str, urn: str, version: int = 2, tenant: str = "acme") -> Record:
    change = StateChange(
        id=f"{tenant}-{upstream}-{urn}-{version}",
        source="/processors/enrichment",
        tenant=tenant,
        table="lineage_edges",
        key={"upstream": upstream, "urn": urn},
        deleted=False,
        version=version,
        event_id=f"e{version}",
    )
    return of_event(change.event())


class RecordingPublisher:
    def __init__(self) -> None:
        self.sent: list[CloudEvent] = []

    def publish(self, events: Sequence[CloudEvent], topic_for: Callable[[CloudEvent], str]) -> object:
        self.sent.extend(events)
        return None


def running(store: Store, **kw: Any) -> tuple[PropagationProcessor, RecordingPublisher]:
    """A processor that has loaded the tenant with A -> B -> C and PII on A, and propagated it to B and C."""
    publisher = RecordingPublisher()
    proc = PropagationProcessor(store.load, publisher, lambda t: f"prio.{t}", **kw)
    proc.reconcile("acme")
    assert sorted(e.data["urn"] for e in publisher.sent if e.type.endswith("propagated.v1")) == [B, C]
    publisher.sent.clear()
    return proc, publisher


def named(events: list[CloudEvent]) -> set[str]:
    return {urn for e in events for urn in json.dumps(e.data).split('"') if urn.startswith("urn:")}


def test_the_event_names_a_hash_and_decodes() -> None:
    event = erased_event("acme", "0b6f1c1e-3f4a-4d2b-9a8e-5c7d6e5f4a3b", hashlib.sha256(B.encode()).hexdigest(), True)
    decoded = decode_record(event.key, event.value(), event.headers())
    assert decoded.type == ERASED_TYPE and decoded.subject is None
    assert event.partitionkey == "acme"  # keyed by tenant, like every record of metalake.changes
    assert "urn:" not in event.value().decode() + str(event.headers())
    assert erased_tenant(of_event(event)) == "acme"
    assert erased_tenant(edge_change(C, D)) is None


def test_without_the_erase_the_stale_memory_carries_the_tag_through_the_erased_asset() -> None:
    # The bug the event fixes: the store is scrubbed, the processor is not told, a new edge C -> D propagates A's tag
    # along A, B, C, D.
    store = Store([edge(A, B), edge(B, C)])
    proc, publisher = running(store)
    store.edges = []
    proc.handle([edge_change(C, D)])
    assert [e.data["path"] for e in publisher.sent if e.data.get("urn") == D] == [[A, B, C, D]]


def test_after_the_erase_a_new_edge_reaches_nothing_through_the_erased_asset() -> None:
    store = Store([edge(A, B), edge(B, C)])
    proc, publisher = running(store)
    store.edges = []  # what the erase left in MongoDB: A and C, no edge
    store.edges.append(edge(C, D, 2))  # the edge committed after the erase, before the processor reads it
    outcome = proc.handle([erased(), edge_change(C, D)])
    assert store.loads == 2
    assert B not in named(publisher.sent) and D not in named(publisher.sent)
    assert (outcome.added, outcome.removed) == (0, 0)
    state = proc.state("acme")
    assert state is not None and len(state.graph) == 1 and state.graph.get((C, D)) is not None  # C -> D only
    # The tag still travels on edges that do not pass through B.
    proc.handle([edge_change(A, X, 3)])
    assert [(e.data["urn"], e.data["path"]) for e in publisher.sent if e.data.get("urn") == X] == [(X, [A, X])]


def test_changes_before_the_erase_in_the_same_batch_are_not_replayed_into_memory() -> None:
    # Edge B -> D was committed before the erase (so the erase deleted it); its change is read in the same batch.
    store = Store([edge(A, B), edge(B, C)])
    proc, publisher = running(store)
    store.edges = []
    proc.handle([edge_change(B, D), erased()])
    assert B not in named(publisher.sent) and D not in named(publisher.sent)
    state = proc.state("acme")
    assert state is not None and state.graph.get((B, D)) is None and len(state.graph) == 0


def test_the_reload_reconciles_at_once_a_path_that_avoided_the_erased_asset() -> None:
    # A -> B -> C and A -> X -> C: C holds the tag by its shortest path, through B; the erase deleted that row.
    store = Store([edge(A, B), edge(B, C), edge(A, X), edge(X, C)])
    publisher = RecordingPublisher()
    proc = PropagationProcessor(store.load, publisher, lambda t: f"prio.{t}")
    proc.reconcile("acme")
    store.edges = [edge(A, X), edge(X, C)]
    publisher.sent.clear()
    proc.handle([erased()])
    assert store.loads == 2
    propagated = [(e.data["urn"], e.data["path"]) for e in publisher.sent if e.type.endswith(".propagated.v1")]
    assert (C, [A, X, C]) in propagated
    assert B not in named(publisher.sent)


def test_an_erase_of_a_tenant_not_followed_is_ignored() -> None:
    store = Store([edge(A, B), edge(B, C)])
    proc, publisher = running(store, tenants=["acme"])
    proc.handle([erased("other")])
    assert store.loads == 1 and publisher.sent == []
