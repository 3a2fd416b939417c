"""What the connector routes do to the control plane: look connectors up, validate and store their configuration,
change their state and their tasks', rotate webhook signing secrets and read or forget source offsets.

Configuration, state and secrets are in ``metalake_control`` (``control.connectors.store.ControlStore``), source
offsets in the compacted offsets topic (``control.connectors.offsets.OffsetStore``). A rule broken or an object
missing raises :class:`~api.problems.Problem` naming the field, as the routes answer it.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Literal

from pydantic import SecretStr

from api.problems import Problem
from api.services.connector_validation import ConnectorFields, InvalidConfig, put_validated
from api.settings import AdminApiSettings
from control.connectors.offsets import Offset, OffsetStore, OffsetsUnavailable
from control.connectors.plugin import SourceConnector, WebhookConnector
from control.connectors.reasons import safe_reason
from control.connectors.records import ConnectorRecord, ConnectorState, SecretInfo, TaskRecord
from control.connectors.registry import ConnectorClass, Plugin
from control.connectors.store import ControlStore
from metalake.kafka import EventProducer, PublishError

RETRY_AFTER_S = 5

Transition = Literal["pause", "resume", "activate", "deactivate"]


def kind(cls: ConnectorClass | None) -> str | None:
    """``source`` or ``webhook``; ``None`` for a type that is not installed or is disabled."""
    if cls is None:
        return None
    return "source" if issubclass(cls, SourceConnector) else "webhook"


def kind_of(plugins: dict[str, Plugin], record: ConnectorRecord) -> str | None:
    plugin = plugins.get(record.type)
    return kind(plugin.cls if plugin else None)


def plugin_class(plugins: dict[str, Plugin], type_: str, *, status: int = 422) -> ConnectorClass:
    """The installed, enabled class of ``type_``; else a problem with ``status`` (422 for a body's ``type``, 404 for
    a path's)."""
    plugin = plugins.get(type_)
    if plugin is None or plugin.cls is None:
        reason = "unknown connector type" if plugin is None else f"connector type is disabled: {plugin.disabled_reason}"
        raise Problem(status, "unknown-connector-type" if status == 422 else "not-found", reason, field="type")
    return plugin.cls


def get(store: ControlStore, tenant: str, name: str) -> ConnectorRecord:
    record = store.get_connector(tenant, name)
    if record is None:
        raise Problem(404, "not-found", "no such connector", field="name")
    return record


def page(store: ControlStore, tenant: str | None, after: tuple[str, str] | None, limit: int) -> list[ConnectorRecord]:
    """Up to ``limit + 1`` connectors of ``tenant`` (every tenant's if ``None``) by tenant and name, those after the
    key ``after`` (tenant, name); one more than ``limit`` says another page follows."""
    records = sorted(store.list_connectors(tenant), key=lambda r: (r.tenant, r.name))
    if after is not None:
        records = [r for r in records if (r.tenant, r.name) > after]
    return records[: limit + 1]


def _put(
    store: ControlStore,
    plugins: dict[str, Plugin],
    tenant: str,
    name: str,
    spec: ConnectorFields,
    min_interval_s: int = 1,
) -> tuple[ConnectorRecord, bool]:
    """Validate ``config`` by the plugin's model (whose JSON Schema the API serves), then store it; a secret field
    left out or masked keeps its stored value."""
    cls = plugin_class(plugins, spec.type)
    try:
        return put_validated(store, cls, tenant, name, spec, min_interval_s=min_interval_s)
    except InvalidConfig as exc:
        raise Problem(422, "invalid-config", exc.detail, field=exc.field) from None


def create(
    store: ControlStore,
    plugins: dict[str, Plugin],
    tenant: str,
    name: str,
    spec: ConnectorFields,
    min_interval_s: int = 1,
) -> tuple[ConnectorRecord, bool]:
    """A new connector (RUNNING); 409 if one of that name exists. ``False`` with the record when a concurrent create
    won between the check and the write: this one replaced it. ``min_interval_s``: the shortest schedule accepted."""
    if store.get_connector(tenant, name) is not None:
        raise Problem(409, "connector-exists", "a connector of that name exists; PUT replaces it", field="name")
    return _put(store, plugins, tenant, name, spec, min_interval_s)


def replace(
    store: ControlStore,
    plugins: dict[str, Plugin],
    tenant: str,
    name: str,
    spec: ConnectorFields,
    min_interval_s: int = 1,
) -> ConnectorRecord:
    """The existing connector's new configuration; its state and signing secrets are kept."""
    get(store, tenant, name)
    record, _ = _put(store, plugins, tenant, name, spec, min_interval_s)
    return record


def delete(store: ControlStore, tenant: str, name: str) -> None:
    if not store.delete_connector(tenant, name):
        raise Problem(404, "not-found", "no such connector", field="name")


def shown_tasks(store: ControlStore, plugins: dict[str, Plugin], record: ConnectorRecord) -> list[TaskRecord]:
    """The tasks the status shows. A source connector's are those of its last split (none before its first crawl);
    a webhook connector has one task, the worker's handler of its deliveries, whose state is the connector's."""
    if kind_of(plugins, record) == "source":
        return store.tasks.of(record.tenant, record.name)
    trace = record.error if record.state is ConnectorState.FAILED else None
    handler = TaskRecord(
        tenant=record.tenant,
        name=record.name,
        id=0,
        config={},
        state=record.state,
        trace=trace,
        updated_at=record.updated_at,
    )
    return [handler]


def transition(
    store: ControlStore,
    tenant: str,
    name: str,
    action: Transition,
    *,
    include_tasks: bool = False,
    only_failed: bool = False,
) -> ConnectorRecord:
    """The connector after ``action``: ``pause`` and ``deactivate`` make it PAUSED, ``resume`` and ``activate``
    RUNNING. ``resume`` refuses a FAILED connector (409: its error needs a look), ``activate`` runs it from any state
    and clears its error; with ``include_tasks`` it restarts the tasks too (only the FAILED ones if ``only_failed``)."""
    if action == "resume" and get(store, tenant, name).state is ConnectorState.FAILED:
        raise Problem(409, "connector-failed", "state: the connector FAILED; activate restarts it", field="state")
    if action == "activate" and include_tasks:
        record = get(store, tenant, name)
        for each in store.tasks.of(record.tenant, record.name):
            if not only_failed or each.state is ConnectorState.FAILED:
                store.tasks.set_state(record.tenant, record.name, each.id, ConnectorState.RUNNING)
    state = ConnectorState.RUNNING if action in ("resume", "activate") else ConnectorState.PAUSED
    if not store.set_state(tenant, name, state):
        raise Problem(404, "not-found", "no such connector", field="name")
    return get(store, tenant, name)


def task(store: ControlStore, record: ConnectorRecord, task_id: int) -> TaskRecord:
    for candidate in store.tasks.of(record.tenant, record.name):
        if candidate.id == task_id:
            return candidate
    raise Problem(404, "not-found", "no such task", field="task_id")


def restart_task(store: ControlStore, record: ConnectorRecord, task_id: int) -> TaskRecord:
    """Clear a task's failure (the next crawl runs it again) and return it; the connector's state is left as is."""
    store.tasks.set_state(record.tenant, record.name, task(store, record, task_id).id, ConnectorState.RUNNING)
    return task(store, record, task_id)


def _unavailable(exc: Exception) -> Problem:
    return Problem(503, "unavailable", safe_reason(exc), headers={"Retry-After": str(RETRY_AFTER_S)})


def offsets(settings: AdminApiSettings, record: ConnectorRecord) -> dict[str, Offset]:
    """The stored offset of each source partition, read from the compacted offsets topic to its end (503 if it is
    not reached in time)."""
    try:
        return OffsetStore(settings).load(record.tenant, record.name)
    except OffsetsUnavailable as exc:
        raise _unavailable(exc) from None


def reset_offsets(settings: AdminApiSettings, producer: EventProducer, record: ConnectorRecord) -> list[str]:
    """Forget every stored offset with tombstones, so the next crawl starts over; the partitions forgotten. Only a
    PAUSED connector's (409), so no crawl writes offsets meanwhile; 503 when Kafka did not confirm."""
    if record.state is not ConnectorState.PAUSED:
        raise Problem(409, "connector-not-paused", "state: pause the connector before resetting offsets", field="state")
    offsets_store = OffsetStore(settings, producer=producer)
    try:
        stored = offsets_store.load(record.tenant, record.name)
        offsets_store.store(record.tenant, record.name, dict.fromkeys(stored))
    except (OffsetsUnavailable, PublishError) as exc:
        raise _unavailable(exc) from None
    return sorted(stored)


def _webhook_only(plugins: dict[str, Plugin], record: ConnectorRecord) -> None:
    if not issubclass(plugin_class(plugins, record.type), WebhookConnector):
        raise Problem(409, "not-a-webhook", "name: only webhook connectors have signing secrets", field="name")


def rotate_secret(
    store: ControlStore,
    plugins: dict[str, Plugin],
    record: ConnectorRecord,
    secret: SecretStr | None,
    overlap_s: int,
) -> tuple[list[SecretInfo], str | None]:
    """Activate ``secret`` (a generated one if ``None``); the previous one stays valid for ``overlap_s`` seconds
    (0: retired now), the one before is retired: the active secrets, newest first, and the generated value (``None``
    for a supplied secret, which is never echoed). Only webhook connectors have signing secrets (409)."""
    _webhook_only(plugins, record)
    generated = secret is None
    value = secret or SecretStr(secrets.token_urlsafe(42))
    active = store.secrets.add_webhook(record.tenant, record.name, value, timedelta(seconds=overlap_s))
    return active, value.get_secret_value() if generated else None


def revoke_secret(
    store: ControlStore, plugins: dict[str, Plugin], record: ConnectorRecord, secret_id: str
) -> list[SecretInfo]:
    """Retire one signing secret now: the active secrets left (404 naming ``secret_id`` if there is no such
    active secret; 409 for a connector that has none)."""
    _webhook_only(plugins, record)
    active = store.secrets.revoke_webhook(record.tenant, record.name, secret_id)
    if active is None:
        raise Problem(404, "not-found", "no such signing secret", field="secret_id")
    return active
