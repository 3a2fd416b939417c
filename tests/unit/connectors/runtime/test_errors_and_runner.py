"""Error tolerance (dead letters, TaskFailed, the DLQ counter) and the source runner over fakes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

import pytest
from pydantic import BaseModel, ValidationError

from connectors.runtime.errors import DeadLetterBudget, ErrorPolicy, TaskFailed
from connectors.runtime.source_runner import SourceRunner
from connectors.runtime.transforms import Chain, TransformError
from control.connectors.plugin import ConnectorContext, SourceConnector, SourceRecord
from control.connectors.reasons import safe_reason
from control.connectors.records import Tolerance
from control.connectors.transforms import TRANSFORM_SPECS
from metalake.events import new_event
from metalake.urn import asset_urn
from tests._support.runtime_fakes import FakeCounter, FakeOffsets, FakePublisher
from tests._support.runtime_plugins import ListSource, ListSourceConfig


def _policy(tolerance: Tolerance, counter: FakeCounter | None = None) -> ErrorPolicy:
    return ErrorPolicy(tolerance, tenant="acme", connector="c1", plugin="listsource", counter=counter or FakeCounter())


def test_all_makes_the_kernels_dead_letter_for_the_connectors_dlq() -> None:
    letter = _policy(Tolerance.ALL).dead_letter(
        TransformError("rename: data/x already exists", "data/x"),
        stage="transform",
        value=b'{"x":1}',
        original_headers=[("ce_id", b"e1")],
        origin="source:acme/c1/table=t",
    )
    assert (letter.topic, letter.key, letter.value) == ("metalake.connectors.dlq", b"acme:c1", b'{"x":1}')
    assert letter.headers == [
        ("ce_id", b"e1"),
        ("error.class", b"TransformError"),
        ("error.message", b"rename: data/x already exists"),
        ("stage", b"transform"),
        ("plugin", b"listsource"),
        ("tenant_id", b"acme"),
        ("attempts", b"1"),
        ("connector", b"c1"),
        ("origin", b"source:acme/c1/table=t"),
        ("error.field", b"data/x"),
    ]


def test_dead_letters_are_counted_by_their_stage() -> None:
    counter = FakeCounter()
    policy = _policy(Tolerance.ALL, counter)
    letters = [
        policy.dead_letter(TransformError("t"), stage=stage, value=None, origin="x")
        for stage in ("mapping", "transform")
    ]
    policy.count(letters)
    assert counter.calls == [
        {"plugin": "listsource", "stage": "mapping"},
        {"plugin": "listsource", "stage": "transform"},
    ]


def test_none_raises_task_failed_chained() -> None:
    cause = TransformError("boom")
    with pytest.raises(TaskFailed) as err:
        _policy(Tolerance.NONE).dead_letter(cause, stage="transform", value=None, origin="x")
    assert err.value.__cause__ is cause and err.value.stage == "transform"


def test_safe_reason_never_quotes_validation_input() -> None:
    class M(BaseModel):
        n: int

    with pytest.raises(ValidationError) as err:
        M.model_validate({"n": "secret-value-123"})
    assert "secret-value-123" not in safe_reason(err.value)
    assert safe_reason(err.value).startswith("n: ")


def _runner(tables: list[str], offsets: FakeOffsets, publisher: FakePublisher, **kw: Any) -> SourceRunner:
    connector = ListSource(ListSourceConfig(tables=tables, **kw), ConnectorContext("acme", "c1"))
    return SourceRunner(
        connector,
        chain=Chain("acme"),
        policy=_policy(Tolerance.ALL),
        publisher=cast(Any, publisher),
        offsets=cast(Any, offsets),
        batch_size=2,
    )


def test_runner_publishes_in_batches_then_stores_offsets_and_resumes() -> None:
    offsets, publisher = FakeOffsets(), FakePublisher()
    summary = _runner(["a", "b", "c"], offsets, publisher).run()
    assert summary.records == 3 and summary.batches == 2 and summary.per_kind == {"table": 3}
    assert offsets.writes == [{"table=a": {"version": 1}, "table=b": {"version": 1}}, {"table=c": {"version": 1}}]
    again = _runner(["a", "b"], offsets, publisher).run()  # c disappeared; a and b are current
    assert again.records == 1 and again.deletions == 1
    assert offsets.stored[("acme", "c1")] == {"table=a": {"version": 1}, "table=b": {"version": 1}}


def test_offsets_are_not_stored_when_publishing_fails() -> None:
    offsets, publisher = FakeOffsets(), FakePublisher(down=True)
    with pytest.raises(Exception, match="not confirmed"):
        _runner(["a"], offsets, publisher).run()
    assert offsets.writes == []


def test_runner_dead_letters_what_a_transform_rejects() -> None:
    offsets, publisher, counter = FakeOffsets(), FakePublisher(), FakeCounter()
    connector = ListSource(ListSourceConfig(tables=["a"]), ConnectorContext("acme", "c1"))
    chain = Chain.from_specs(
        "acme", TRANSFORM_SPECS.validate_python([{"type": "rename", "from": "name", "to": "kind"}])
    )
    summary = SourceRunner(
        connector,
        chain=chain,
        policy=_policy(Tolerance.ALL, counter),
        publisher=cast(Any, publisher),
        offsets=cast(Any, offsets),
    ).run()
    assert summary.dead_lettered == 1 and summary.records == 0
    assert dict(publisher.dead[0].headers)["stage"] == b"transform"
    assert counter.calls == [{"plugin": "listsource", "stage": "transform"}]
    assert offsets.stored[("acme", "c1")] == {"table=a": {"version": 1}}  # a dead-lettered record is handled


def test_the_dead_letter_budget_caps_each_connector_per_window() -> None:
    now = [0.0]
    budget = DeadLetterBudget(cap=3, window_s=60, clock=lambda: now[0])
    assert [budget.take("acme", "mc", 2), budget.take("acme", "mc", 2), budget.take("acme", "mc", 1)] == [2, 1, 0]
    assert budget.take("acme", "other", 5) == 3 and budget.take("globex", "mc", 1) == 1  # per connector
    now[0] = 59.9
    assert budget.take("acme", "mc", 1) == 0
    now[0] = 60.0  # a new window
    assert budget.take("acme", "mc", 4) == 3


def test_the_budget_forgets_connectors_whose_window_is_over() -> None:
    now = [0.0]
    budget = DeadLetterBudget(cap=1, window_s=60, clock=lambda: now[0])
    for i in range(10_001):
        budget.take("acme", f"c{i}", 1)
    now[0] = 61.0
    assert budget.take("acme", "fresh", 1) == 1
    assert len(budget._used) == 1  # only the fresh connector's window is left


class _EdgeSource(SourceConnector[ListSourceConfig]):
    """Emits one lineage edge: an event without an asset kind."""

    config_model = ListSourceConfig

    def poll(self, offsets: Mapping[str, Mapping[str, Any]]) -> Iterator[SourceRecord]:
        data = {"urn": asset_urn("pg", "i", "db", "s", "b"), "upstream": asset_urn("pg", "i", "db", "s", "a")}
        event = new_event("io.metalake.lineage.edge.added.v1", "acme", {**data, "version": 1}, source="/t")
        yield SourceRecord(event, {"table": "b"}, {"version": 1})


def test_counts_of_events_without_a_kind_have_keys_the_control_plane_can_store() -> None:
    # The summary is stored as a document (a task's last run): MongoDB and FerretDB refuse a key with a dot.
    connector = _EdgeSource(ListSourceConfig(tables=[]), ConnectorContext("acme", "c1"))
    runner = SourceRunner(
        connector, chain=Chain("acme"), policy=_policy(Tolerance.ALL), publisher=cast(Any, FakePublisher()),
        offsets=cast(Any, FakeOffsets()), batch_size=2,
    )  # fmt: skip
    assert runner.run().per_kind == {"lineage_edge_added": 1}
