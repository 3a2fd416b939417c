"""The runtime's side of tasks over fakes: ownership enforced per record, offsets handed per task, KEEP and FORGET."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, cast

import pytest
from pydantic import Field

from connectors.runtime.context import Runtime, plugins_from
from connectors.runtime.errors import ErrorPolicy, TaskFailed
from connectors.runtime.source_runner import CrawlRefused, SourceRunner, crawl
from connectors.runtime.tasks import owned_offsets
from connectors.runtime.transforms import Chain
from control.connectors.plugin import FORGET, KEEP, ConnectorConfig, ConnectorContext, SourceConnector, SourceRecord
from control.connectors.reasons import INTERNAL, SourceFailure, shown_error
from control.connectors.records import ConnectorRecord, ConnectorState, TaskRecord, Tolerance
from metalake.events import new_event
from metalake.urn import asset_urn
from ops.settings import Settings
from tests._support.runtime_fakes import (
    FakeClients,
    FakeCounter,
    FakeOffsets,
    FakePublisher,
    FakeStore,
    FakeTenants,
    fake_gate,
)


class LettersConfig(ConnectorConfig):
    tables: list[str]
    offsets: dict[str, str] = Field(default_factory=dict)  # table -> "keep", "forget" or "new" (the default)
    rogue: str | None = None  # a table this task emits although it does not own it


class Letters(SourceConnector[LettersConfig]):
    """Tables split by first letter: a task's config is ``{"letters": "ab"}``."""

    config_model = LettersConfig

    def task_configs(self, max_tasks: int, offsets: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        letters = sorted({t[0] for t in self.config.tables})
        return [{"letters": "".join(letters[i::max_tasks])} for i in range(min(max_tasks, len(letters)))]

    def owns(self, partition: Mapping[str, str]) -> bool:
        letters = self.ctx.task_config.get("letters")
        return letters is None or partition.get("table", "")[:1] in letters

    def poll(self, offsets: Mapping[str, Mapping[str, Any]]) -> Iterator[SourceRecord]:
        for table in self.config.tables:
            if not self.owns({"table": table}) and table != self.config.rogue:
                continue
            data = {"urn": asset_urn("t", "i", "db", "s", table), "version": 1, "kind": "table", "name": table}
            event = new_event("io.metalake.asset.upserted.v1", self.ctx.tenant_id, data, source=self.ctx.source)
            action = self.config.offsets.get(table, "new")
            offset: Any = {"keep": KEEP, "forget": FORGET}.get(action, {"v": 1})
            yield SourceRecord(event, {"table": table}, offset)


def _runner(connector: Letters, offsets: FakeOffsets, publisher: FakePublisher) -> SourceRunner:
    policy = ErrorPolicy(Tolerance.ALL, tenant="acme", connector="c1", plugin="letters", counter=FakeCounter())
    return SourceRunner(
        connector,
        chain=Chain("acme"),
        policy=policy,
        publisher=cast(Any, publisher),
        offsets=cast(Any, offsets),
        batch_size=10,
    )


def _task(config: LettersConfig, task_id: int, letters: str) -> Letters:
    return Letters(config, ConnectorContext("acme", "c1", task_id, {"letters": letters}))


def test_a_task_emitting_for_a_partition_it_does_not_own_fails_before_publishing() -> None:
    offsets, publisher = FakeOffsets(), FakePublisher()
    task = _task(LettersConfig(tables=["apple", "berry"], rogue="berry"), 0, "a")
    with pytest.raises(TaskFailed, match="does not own") as err:
        _runner(task, offsets, publisher).run({})
    assert err.value.stage == "ownership"
    assert publisher.routed == [] and offsets.writes == []


def test_each_task_is_handed_the_offsets_it_owns_only() -> None:
    config = LettersConfig(tables=["apple", "avocado", "berry", "cherry"])
    connector = Letters(config, ConnectorContext("acme", "c1"))
    configs = connector.task_configs(2, {})
    assert configs == [{"letters": "ac"}, {"letters": "b"}]
    tasks = [_task(config, i, c["letters"]) for i, c in enumerate(configs)]
    stored = {"table=apple": {"v": 0}, "table=berry": {"v": 0}, "table=zebra": {"v": 0}, "not a key": {"v": 0}}
    owned, unowned = owned_offsets(stored, tasks)
    assert owned == [{"table=apple": {"v": 0}}, {"table=berry": {"v": 0}}]
    assert unowned == 2  # a partition no task owns is left alone (no task may delete it)


def test_keep_writes_nothing_forget_writes_a_tombstone() -> None:
    offsets, publisher = FakeOffsets(), FakePublisher()
    offsets.stored[("acme", "c1")] = {"table=apple": {"v": 0}, "table=avocado": {"v": 0}}
    config = LettersConfig(tables=["apple", "avocado", "acorn"], offsets={"apple": "keep", "avocado": "forget"})
    summary = _runner(Letters(config, ConnectorContext("acme", "c1")), offsets, publisher).run()
    assert summary.records == 3 and summary.partitions == 2
    assert offsets.writes == [{"table=avocado": None, "table=acorn": {"v": 1}}]
    assert offsets.stored[("acme", "c1")] == {"table=apple": {"v": 0}, "table=acorn": {"v": 1}}


# -- a crawl of several tasks, over fakes ---------------------------------------------------------------------------


class FakeTasks:
    """``ControlStore.tasks`` of one connector (same rules: a changed config restarts the task)."""

    def __init__(self) -> None:
        self.by_id: dict[int, TaskRecord] = {}

    def of(self, tenant: str, name: str) -> list[TaskRecord]:
        return [self.by_id[i] for i in sorted(self.by_id)]

    def assign(self, tenant: str, name: str, configs: list[dict[str, Any]]) -> list[TaskRecord]:
        for i, config in enumerate(configs):
            if i not in self.by_id or dict(self.by_id[i].config) != config:
                self.by_id[i] = TaskRecord(tenant, name, i, config)
        for i in [i for i in self.by_id if i >= len(configs)]:
            del self.by_id[i]
        return self.of(tenant, name)

    def set_state(self, tenant: str, name: str, task: int, state: ConnectorState, **kw: Any) -> bool:
        before = self.by_id[task]
        trace = kw.get("trace") if state is ConnectorState.FAILED else None
        worker, last_run = kw.get("worker_id") or before.worker_id, kw.get("last_run") or before.last_run
        self.by_id[task] = replace(before, state=state, trace=trace, worker_id=worker, last_run=last_run)
        return True


class TaskStore(FakeStore):
    """FakeStore plus the task documents of ControlStore."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks = FakeTasks()


class FailingLetters(Letters):
    def poll(self, offsets: Mapping[str, Mapping[str, Any]]) -> Iterator[SourceRecord]:
        for record in super().poll(offsets):
            if str(record.partition["table"]).startswith("b"):
                raise RuntimeError("source unreachable")
            yield record


def _world(
    tables: list[str], tasks_max: int, cls: type[Letters] | None = None, tenants: FakeTenants | None = None
) -> tuple[Runtime, TaskStore, FakeOffsets, list[FakePublisher]]:
    store, offsets, publishers = TaskStore(), FakeOffsets(), []
    store.add(ConnectorRecord("acme", "c1", "letters", {"tables": tables}, tasks_max=tasks_max))

    def task_io() -> tuple[Any, Any]:
        publishers.append(FakePublisher())
        return publishers[-1], offsets

    runtime = Runtime(
        settings=Settings(),
        store=cast(Any, store),
        deliveries=cast(Any, None),
        publisher=cast(Any, FakePublisher()),
        offsets=cast(Any, offsets),
        plugins=plugins_from({"letters": cls or FailingLetters}),
        gate=fake_gate(FakeClients(), tenants or FakeTenants()),
        dlq_counter=FakeCounter(),
        task_io_factory=task_io,
    )
    return runtime, store, offsets, publishers


def test_a_failing_task_leaves_the_others_running_and_is_skipped_until_restarted() -> None:
    runtime, store, offsets, publishers = _world(["apple", "berry", "cherry", "date"], 3)
    report = crawl(runtime, "acme", "c1")
    assert [(t.task, t.outcome) for t in report.tasks] == [(0, "done"), (1, "failed"), (2, "done")]
    assert len(publishers) == 3  # one producer per task
    assert sorted(r.event.data["name"] for p in publishers for r in p.routed) == ["apple", "cherry", "date"]
    assert store.records["acme/c1"].state is ConnectorState.RUNNING
    assert store.tasks.by_id[1].state is ConnectorState.FAILED and store.tasks.by_id[1].trace == str(INTERNAL)
    assert store.tasks.by_id[0].worker_id and store.tasks.by_id[0].state is ConnectorState.RUNNING
    assert set(offsets.stored[("acme", "c1")]) == {"table=apple", "table=cherry", "table=date"}

    printed = report.as_dict()  # what `metalake connect crawl` prints
    assert printed["failed"] is True and printed["records"] == 3 and printed["per_kind"] == {"table": 3}
    assert [(t["task"], t["outcome"], t["records"]) for t in printed["tasks"]] == [
        (0, "done", 2),
        (1, "failed", 0),
        (2, "done", 1),
    ]
    assert printed["tasks"][1]["error"] == str(INTERNAL)

    again = crawl(runtime, "acme", "c1")
    assert [t.outcome for t in again.tasks] == ["done", "skipped", "done"] and again.failed
    assert again.tasks[1].records == 0 and again.records == 3  # Letters re-emits every owned table each time

    store.tasks.set_state("acme", "c1", 1, ConnectorState.RUNNING)  # what POST .../tasks/1/restart does
    assert [t.outcome for t in crawl(runtime, "acme", "c1").tasks] == ["done", "failed", "done"]


def test_a_changed_split_restarts_a_failed_task_an_unchanged_one_does_not() -> None:
    runtime, store, _, _ = _world(["apple", "berry", "cherry", "date"], 3)
    crawl(runtime, "acme", "c1")  # tasks: "ad", "b" (fails), "c"
    assert store.tasks.by_id[1].state is ConnectorState.FAILED
    store.records["acme/c1"] = replace(store.records["acme/c1"], tasks_max=4)  # "a", "b", "c", "d": task 1 unchanged
    assert [t.outcome for t in crawl(runtime, "acme", "c1").tasks] == ["done", "skipped", "done", "done"]
    store.records["acme/c1"] = replace(store.records["acme/c1"], tasks_max=2)  # "ac", "bd": task 1 changed
    report = crawl(runtime, "acme", "c1")
    assert [(t.task, t.outcome) for t in report.tasks] == [(0, "done"), (1, "failed")]  # it ran again
    assert sorted(store.tasks.by_id) == [0, 1] and store.tasks.by_id[1].config == {"letters": "bd"}


class LeakyLetters(Letters):
    """Fails the way a database driver does: its text names internal hosts and quotes what the peer answered."""

    def poll(self, offsets: Mapping[str, Mapping[str, Any]]) -> Iterator[SourceRecord]:
        raise ConnectionError('connection to "10.0.0.7", port 6379 failed: received "-ERR unknown command"')


class ClassedLetters(Letters):
    def poll(self, offsets: Mapping[str, Mapping[str, Any]]) -> Iterator[SourceRecord]:
        raise SourceFailure("unreachable", "cannot connect to the server")


def test_a_failed_task_stores_an_error_class_and_our_words_the_log_has_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime, store, _, _ = _world(["apple"], 1, LeakyLetters)
    with caplog.at_level(logging.WARNING, logger="connectors.runtime.source_runner"):
        report = crawl(runtime, "acme", "c1")
    stored = str(store.tasks.by_id[0].trace)
    served = [stored, str(store.tasks.by_id[0].last_run), str(report.as_dict())]
    for text in served:  # what tenant:read callers see (the trace and last_run) and the crawl's report
        assert "10.0.0.7" not in text and "-ERR" not in text and "Traceback" not in text and "File " not in text
    assert stored == str(INTERNAL) == "internal-error: the task failed unexpectedly; the operator log has the details"
    logged = [r for r in caplog.records if r.getMessage() == "connect.task_failed"]
    assert logged and logged[0].exc_info is not None and "10.0.0.7" in str(logged[0].exc_info[1])


def test_a_source_failure_is_stored_as_its_class_and_message() -> None:
    runtime, store, _, _ = _world(["apple"], 1, ClassedLetters)
    crawl(runtime, "acme", "c1")
    assert store.tasks.by_id[0].trace == "unreachable: cannot connect to the server"


@pytest.mark.parametrize(
    ("stored", "served"),
    [
        (None, None),
        ("unreachable: cannot connect", "unreachable: cannot connect"),
        # What older versions stored: the error line, then the frames.
        (
            'CatalogError: cannot connect\n  File "/srv/connectors/postgres/catalog.py", line 9',
            "CatalogError: cannot connect",
        ),
    ],
)
def test_a_stored_error_is_served_without_frames(stored: str | None, served: str | None) -> None:
    assert shown_error(stored) == served


def test_a_suspended_tenants_connector_is_not_crawled() -> None:
    tenants = FakeTenants()
    runtime, store, _, publishers = _world(["a", "b"], 1, tenants=tenants)
    tenants.suspend("acme")
    with pytest.raises(CrawlRefused, match="suspended"):
        crawl(runtime, "acme", "c1")
    assert publishers == [] and store.get_connector("acme", "c1") is not None
    assert store.get_connector("acme", "c1").state != ConnectorState.FAILED  # refused, not broken
