"""The one publish path of the worker's HTTP sources (webhooks, the ingest API, OpenLineage): a batch is accepted
only once Kafka confirmed all of it, counted once, and refused the same way for every source."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.runtime.accept import Batch, publish_confirmed
from connectors.runtime.admission import Ticket
from connectors.runtime.publisher import encode
from metalake.events import new_event
from metalake.http.problems import Problem
from metalake.http.ratelimit import RateLimiter
from metalake.kafka import RawRecord
from metalake.telemetry.exposition import install_meter_provider, render
from metalake.urn import asset_urn
from tests._support.runtime_fakes import World
from tests._support.scrape import sample


def _events(*names: str) -> list[Any]:
    return [
        new_event(
            "io.metalake.asset.upserted.v1",
            "acme",
            {"urn": asset_urn("test", "wh", "db", "public", n), "version": 1, "kind": "table", "name": n},
            source="/tenants/acme/connectors/test",
        )
        for n in names
    ]


LETTER = RawRecord("metalake.connectors.dlq", "d1", b"acme:hook", b"{}", [])


def _accepted(source: str) -> float:
    labels = {"source": source, "outcome": "accepted", "reason": "none"}
    return sample(render().decode(), "metalake_events_total", labels)


def test_events_routed_encoded_and_dead_letters_are_published_and_the_events_counted(world: World) -> None:
    install_meter_provider()
    before = _accepted("webhook")
    batch = Batch("acme", Batch.of("acme", _events("a")).routed, encode(_events("b", "c")), [LETTER])
    publish_confirmed(world.runtime, batch, source="webhook")
    assert sorted(r.event.data["name"] for r in world.publisher.routed) == ["a", "b", "c"]
    assert world.publisher.dead == [LETTER]
    assert _accepted("webhook") - before == 3


@pytest.mark.parametrize("source", ["webhook", "ingest", "openlineage"])
def test_kafka_down_is_the_same_503_for_every_source_and_nothing_is_counted(world: World, source: str) -> None:
    install_meter_provider()
    before = _accepted(source)
    world.publisher.down = True
    with pytest.raises(Problem) as info:
        publish_confirmed(world.runtime, Batch.of("acme", _events("a")), source=source)
    problem = info.value
    assert (problem.status, problem.headers) == (503, {"Retry-After": "30"})
    assert problem.detail == "Kafka did not confirm the events; none was accepted, send again later"
    assert world.publisher.routed == [] and _accepted(source) == before


def test_a_batch_over_the_tenants_budget_is_refused_before_anything_is_published(world: World) -> None:
    budget = RateLimiter(1, 4)
    assert budget.acquire("tenant:acme", 3) == 0.0  # the tenant's other requests
    assert budget.acquire("tenant:acme", 1) == 0.0  # this one's estimate: the bucket is empty now
    with pytest.raises(Problem) as info:
        publish_confirmed(
            world.runtime,
            Batch.of("acme", _events("a", "b", "c")),
            source="ingest",
            ticket=Ticket("tenant:acme", 1.0, budget),
        )
    assert info.value.status == 429
    assert world.publisher.routed == []


def test_only_the_parts_a_batch_has_are_sent(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_lookup(tenant: str, encoded: object) -> list[object]:
        raise AssertionError("an empty part is not sent (publish_encoded looks the tenant up)")

    monkeypatch.setattr(world.publisher, "publish_encoded", no_lookup)
    publish_confirmed(world.runtime, Batch("acme", dead=[LETTER]), source="webhook")
    assert world.publisher.dead == [LETTER] and world.publisher.routed == []
