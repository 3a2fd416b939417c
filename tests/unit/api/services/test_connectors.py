"""The connector service's rules over an in-memory store: listing order and keyset, the tasks a status shows, state
transitions and which plugin types a request may name."""

from __future__ import annotations

from typing import Any, cast

import pytest

from api.problems import Problem
from api.services import connectors
from api.services.connector_validation import ConnectorFields
from control.connectors.records import ConnectorRecord, ConnectorState, TaskRecord
from control.connectors.registry import Plugin
from control.connectors.store import ControlStore
from tests._support.runtime_fakes import FakeStore
from tests._support.runtime_plugins import ListSource, SignedWebhook

PLUGINS: dict[str, Plugin] = {
    "hook": Plugin("hook", SignedWebhook),
    "list": Plugin("list", ListSource),
    "off": Plugin("off", None, "no module named 'vendor'"),
}


class FakeTasks:
    """``ControlStore.tasks``: task documents by connector id."""

    def __init__(self) -> None:
        self.by_connector: dict[str, list[TaskRecord]] = {}

    def of(self, tenant: str, name: str) -> list[TaskRecord]:
        return list(self.by_connector.get(f"{tenant}/{name}", []))

    def set_state(self, tenant: str, name: str, task: int, state: ConnectorState) -> None:
        key = f"{tenant}/{name}"
        self.by_connector[key] = [
            TaskRecord(t.tenant, t.name, t.id, t.config, state) if t.id == task else t for t in self.by_connector[key]
        ]


class TaskStore(FakeStore):
    """FakeStore with ControlStore's task documents."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks = FakeTasks()

    def set_state(self, tenant: str, name: str, state: ConnectorState, error: str | None = None) -> bool:
        # As ControlStore: False for no such connector.
        return f"{tenant}/{name}" in self.records and super().set_state(tenant, name, state, error)


def _store(*records: ConnectorRecord) -> TaskStore:
    store = TaskStore()
    for record in records:
        store.add(record)
    return store


def _control(store: TaskStore) -> ControlStore:
    return cast(ControlStore, cast(Any, store))


def test_a_page_is_ordered_by_tenant_then_name_and_resumes_strictly_after_its_key() -> None:
    # "acme-b/..." sorts before "acme/..." as a string; by (tenant, name) acme comes first.
    store = _store(
        ConnectorRecord("acme-b", "a", "hook", {}),
        ConnectorRecord("acme", "z", "hook", {}),
        ConnectorRecord("acme", "b", "hook", {}),
    )
    every = connectors.page(_control(store), None, None, 10)
    assert [(r.tenant, r.name) for r in every] == [("acme", "b"), ("acme", "z"), ("acme-b", "a")]
    after = connectors.page(_control(store), None, ("acme", "b"), 1)
    assert [(r.tenant, r.name) for r in after] == [("acme", "z"), ("acme-b", "a")]  # limit + 1: another page
    assert [r.name for r in connectors.page(_control(store), "acme", ("acme", "b"), 10)] == ["z"]


def test_a_webhook_connector_shows_one_task_with_its_state_and_error() -> None:
    record = ConnectorRecord("acme", "h", "hook", {}, state=ConnectorState.FAILED, error="boom")
    (task,) = connectors.shown_tasks(_control(_store(record)), PLUGINS, record)
    assert (task.id, task.state, task.trace) == (0, ConnectorState.FAILED, "boom")
    running = ConnectorRecord("acme", "h", "hook", {}, error="stale")
    assert connectors.shown_tasks(_control(_store(running)), PLUGINS, running)[0].trace is None


def test_a_source_connector_shows_the_tasks_of_its_last_split() -> None:
    record = ConnectorRecord("acme", "s", "list", {})
    store = _store(record)
    assert connectors.shown_tasks(_control(store), PLUGINS, record) == []
    store.tasks.by_connector["acme/s"] = [TaskRecord("acme", "s", 0, {"units": ["a"]}), TaskRecord("acme", "s", 1, {})]
    assert [t.id for t in connectors.shown_tasks(_control(store), PLUGINS, record)] == [0, 1]


def test_a_failed_connector_is_not_resumed_but_activated_with_its_failed_tasks() -> None:
    store = _store(ConnectorRecord("acme", "s", "list", {}, state=ConnectorState.FAILED, error="boom"))
    store.tasks.by_connector["acme/s"] = [
        TaskRecord("acme", "s", 0, {}, ConnectorState.FAILED),
        TaskRecord("acme", "s", 1, {}, ConnectorState.PAUSED),
    ]
    with pytest.raises(Problem) as refused:
        connectors.transition(_control(store), "acme", "s", "resume")
    assert (refused.value.status, refused.value.field) == (409, "state")
    record = connectors.transition(_control(store), "acme", "s", "activate", include_tasks=True, only_failed=True)
    assert (record.state, record.error) == (ConnectorState.RUNNING, None)
    assert [t.state for t in store.tasks.of("acme", "s")] == [ConnectorState.RUNNING, ConnectorState.PAUSED]


def test_a_missing_connector_or_task_is_404() -> None:
    store = _store(ConnectorRecord("acme", "s", "list", {}))
    with pytest.raises(Problem) as missing:
        connectors.transition(_control(store), "acme", "nope", "pause")
    assert (missing.value.status, missing.value.field) == (404, "name")
    with pytest.raises(Problem) as no_task:
        connectors.restart_task(_control(store), connectors.get(_control(store), "acme", "s"), 3)
    assert (no_task.value.status, no_task.value.field) == (404, "task_id")


@pytest.mark.parametrize(
    ("type_", "status", "slug"), [("nope", 422, "unknown-connector-type"), ("off", 404, "not-found")]
)
def test_an_unknown_or_disabled_type_is_refused_as_the_caller_names_it(type_: str, status: int, slug: str) -> None:
    with pytest.raises(Problem) as refused:
        connectors.plugin_class(PLUGINS, type_, status=status)
    assert (refused.value.status, refused.value.slug, refused.value.field) == (status, slug, "type")


def test_only_a_webhook_connector_rotates_a_signing_secret() -> None:
    record = ConnectorRecord("acme", "s", "list", {})
    with pytest.raises(Problem) as refused:
        connectors.rotate_secret(_control(_store(record)), PLUGINS, record, None, 3600)
    assert (refused.value.status, refused.value.slug) == (409, "not-a-webhook")
    with pytest.raises(Problem) as refused:
        connectors.revoke_secret(_control(_store(record)), PLUGINS, record, "0a1b2c3d")
    assert (refused.value.status, refused.value.slug) == (409, "not-a-webhook")


def test_a_schedule_below_the_minimum_or_on_a_webhook_connector_is_refused_naming_the_field() -> None:
    store = _store()
    short = ConnectorFields.model_validate({"type": "list", "schedule": {"interval_s": 59}})
    with pytest.raises(Problem) as too_short:
        connectors.create(_control(store), PLUGINS, "acme", "s", short, min_interval_s=60)
    assert (too_short.value.status, too_short.value.slug, too_short.value.field) == (
        422,
        "invalid-config",
        "schedule/interval_s",
    )
    hook = ConnectorFields.model_validate({"type": "hook", "schedule": {"interval_s": 3600}})
    with pytest.raises(Problem) as not_a_source:
        connectors.create(_control(store), PLUGINS, "acme", "h", hook, min_interval_s=60)
    assert (not_a_source.value.status, not_a_source.value.field) == (422, "schedule")
    assert store.records == {}  # nothing stored


def test_the_status_of_a_scheduled_connector_shows_its_last_run_and_the_next() -> None:
    from datetime import UTC, datetime

    from api.routes.connectors import schedule_view
    from control.connectors.schedule import Schedule, ScheduleDoc

    never = schedule_view(Schedule(interval_s=600), None)
    assert never.interval_s == 600 and never.last_started_at is None and never.next_run_at is None
    # As MongoDB returns it: naive UTC.
    runs: ScheduleDoc = {
        "_id": "acme/pg",
        "tenant": "acme",
        "name": "pg",
        "last_started_at": datetime(2026, 11, 26, 12, 0),
        "last_finished_at": datetime(2026, 11, 26, 12, 1),
        "last_outcome": "refused",
        "last_records": 0,
        "last_error": "connector acme/pg is being crawled already: held by h:1\nsecond line",
    }
    view = schedule_view(Schedule(interval_s=600), runs)
    assert view.last_started_at == datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    assert view.next_run_at == datetime(2026, 11, 26, 12, 10, tzinfo=UTC)
    assert view.last_finished_at == datetime(2026, 11, 26, 12, 1, tzinfo=UTC)
    assert (view.last_outcome, view.last_records) == ("refused", 0)
    assert view.last_error == "connector acme/pg is being crawled already: held by h:1"  # first line only
