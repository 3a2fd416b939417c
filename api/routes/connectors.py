"""A tenant's connectors: the same control plane the connector worker runs from, behind OAuth and the tenant check.
The one place connectors are managed: the worker serves no management routes.

Configuration, state and secrets live in ``metalake_control`` (``control.connectors.store.ControlStore``); source
offsets in the compacted offsets topic (``control.connectors.offsets.OffsetStore``). The worker reads both on every
delivery and crawl, so a change made here takes effect at the next one. Reads need ``tenant:read`` (or
``tenant:admin``), changes ``tenant:admin``. Secrets are write-only: no answer carries a stored secret.

States are the runtime's (RUNNING, PAUSED, FAILED; the worker works only for RUNNING). ``pause``/``resume`` are
Connect's (resuming a FAILED connector is refused: it needs ``activate``); ``activate`` runs the connector from any
state and clears its error (Connect's restart); ``deactivate`` takes it out of service (PAUSED: the runtime has one
"not running" state, so webhooks answer 503 with Retry-After and crawls refuse to start).
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic.config import JsonDict

from api.auth.deps import require
from api.context import ApiContext, ContextDep
from api.deps import ConnectorStoreDep, PlatformAdmin, TenantAdmin, TenantReader
from api.paging import DEFAULT_LIMIT, CursorParam, Limit, Page, decode_cursor, encode_cursor
from api.problems import Problem
from api.security import TenantContext
from api.services import audit
from api.services.events import PublisherDep
from control.auth.principal import Scope
from control.connectors import registry
from control.connectors.offsets import OffsetStore, OffsetsUnavailable
from control.connectors.plugin import SourceConnector, WebhookConnector
from control.connectors.reasons import safe_reason
from control.connectors.registry import ConnectorClass, Plugin
from control.connectors.status import task_state
from control.connectors.store import ConnectorRecord, ConnectorState, ControlStore, TaskRecord
from control.connectors.validation import MASK, ConnectorFields, InvalidConfig, put_validated
from metalake.kafka import PublishError

NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
RETRY_AFTER_S = 5

ConnectorName = Annotated[str, Path(pattern=NAME_PATTERN, description="The connector's name within the tenant.")]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid access token."},
    403: {"description": "The token lacks the scope."},
    404: {"description": "No such tenant or connector (another tenant's objects answer 404 too)."},
    422: {"description": "Invalid request or configuration (problem+json naming the field, e.g. `config/url`)."},
}


def _errors(*extra: tuple[int, str]) -> dict[int | str, dict[str, Any]]:
    return {**_ERRORS, **{status: {"description": text} for status, text in extra}}


def connector_plugins() -> dict[str, Plugin]:
    """The installed connector types (entry points of ``metalake.connectors``). A dependency, so tests may swap it."""
    return registry.plugins()


PluginsDep = Annotated[dict[str, Plugin], Depends(connector_plugins)]


router = APIRouter(tags=["connectors"])
PREFIX = "/v1/tenants/{tenant}/connectors"

# -- models ---------------------------------------------------------------------------------------------------------

_MC_CONFIG: JsonDict = {"default_platform": "snowflake", "default_instance": "acme"}


class ConnectorSpec(ConnectorFields):
    """A connector's configuration. ``config`` must satisfy the type's JSON Schema
    (``GET /v1/connector-plugins/{type}/schema``); secret fields may be sent as ``**********`` to keep them."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"example": {"type": "montecarlo", "config": _MC_CONFIG}}
    )


class ConnectorCreate(ConnectorSpec):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"example": {"name": "monte-carlo", "type": "montecarlo", "config": _MC_CONFIG}},
    )

    name: str = Field(pattern=NAME_PATTERN)


class SecretInfoView(BaseModel):
    id: str
    created_at: datetime


class ConnectorView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "tenant": "acme",
                "name": "monte-carlo",
                "type": "montecarlo",
                "kind": "webhook",
                "config": _MC_CONFIG,
                "transforms": [],
                "errors_tolerance": "all",
                "tasks_max": 1,
                "state": "RUNNING",
                "webhook_secrets": [{"id": "9f86d081", "created_at": "2026-11-22T03:00:00Z"}],
            }
        }
    )

    tenant: str
    name: str
    type: str
    kind: str | None = Field(description="webhook or source")
    config: dict[str, Any] = Field(description="Secret fields are masked as `**********`.")
    transforms: list[dict[str, Any]]
    errors_tolerance: str
    tasks_max: int
    state: str
    webhook_secrets: list[SecretInfoView] = Field(description="Active signing secrets, newest first: ids only.")


class ConnectorStateView(BaseModel):
    state: str = Field(description="RUNNING | PAUSED | FAILED")
    error: str | None = None
    updated_at: datetime | None = None


class TaskStatusView(BaseModel):
    id: int
    state: str = Field(description="RUNNING | PAUSED | FAILED (a paused connector's tasks show PAUSED)")
    worker_id: str | None = Field(default=None, description="Who ran the task last (source connectors).")
    trace: str | None = Field(default=None, description="Why the task FAILED.")
    last_run: dict[str, Any] | None = None
    updated_at: datetime | None = None


class StatusView(BaseModel):
    """Shaped like Kafka Connect's status: the connector and its tasks (source connectors, after a first crawl)."""

    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "name": "warehouse",
                "type": "source",
                "connector": {"state": "RUNNING", "error": None},
                "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "host:4242"}],
            }
        }
    )

    name: str
    type: str | None = Field(description="webhook or source")
    connector: ConnectorStateView
    tasks: list[TaskStatusView]


class TaskConfigView(BaseModel):
    id: int
    config: dict[str, Any] = Field(description="What the connector's split gave the task (the crawler: its units).")


class TasksView(BaseModel):
    tasks: list[TaskConfigView] = Field(description="The tasks of the last split, by id (none before a first crawl).")


class SecretCreate(BaseModel):
    """A webhook signing secret to activate; omitted: one is generated and shown once in the answer."""

    model_config = ConfigDict(extra="forbid")

    secret: SecretStr | None = Field(default=None, min_length=16, max_length=512)


class SecretsView(BaseModel):
    id: str | None = Field(default=None, description="The secret just activated.")
    active: list[SecretInfoView]
    secret: str | None = Field(default=None, description="Only when generated, only in this answer.")


class PluginView(BaseModel):
    name: str
    kind: str | None = Field(description="webhook or source; null when the plugin is disabled")
    disabled_reason: str | None = None


class PluginSchemaView(BaseModel):
    name: str
    config_schema: dict[str, Any]


class OffsetView(BaseModel):
    partition: str
    offset: dict[str, Any]


class OffsetsView(BaseModel):
    offsets: list[OffsetView]


class OffsetsReset(BaseModel):
    reset: list[str] = Field(description="Partitions whose offsets were forgotten.")


# -- helpers --------------------------------------------------------------------------------------------------------


def _kind(cls: ConnectorClass | None) -> str | None:
    if cls is None:
        return None
    return "source" if issubclass(cls, SourceConnector) else "webhook"


def _plugin_class(plugins: dict[str, Plugin], type_: str, *, status: int = 422) -> ConnectorClass:
    plugin = plugins.get(type_)
    if plugin is None or plugin.cls is None:
        reason = "unknown connector type" if plugin is None else f"connector type is disabled: {plugin.disabled_reason}"
        raise Problem(status, "unknown-connector-type" if status == 422 else "not-found", reason, field="type")
    return plugin.cls


def _record(store: ControlStore, tenant: str, name: str) -> ConnectorRecord:
    record = store.get_connector(tenant, name)
    if record is None:
        raise Problem(404, "not-found", "no such connector", field="name")
    return record


def _secret_infos(store: ControlStore, record: ConnectorRecord) -> list[SecretInfoView]:
    return [
        SecretInfoView(id=s.id, created_at=s.created_at) for s in store.webhook_secret_info(record.tenant, record.name)
    ]


def _view(store: ControlStore, plugins: dict[str, Plugin], record: ConnectorRecord) -> ConnectorView:
    plugin = plugins.get(record.type)
    return ConnectorView(
        tenant=record.tenant,
        name=record.name,
        type=record.type,
        kind=_kind(plugin.cls if plugin else None),
        config={**record.config, **dict.fromkeys(record.secret_fields, MASK)},
        transforms=[t.model_dump(mode="json", by_alias=True) for t in record.transforms],
        errors_tolerance=record.errors_tolerance.value,
        tasks_max=record.tasks_max,
        state=record.state.value,
        webhook_secrets=_secret_infos(store, record),
    )


def _put(
    store: ControlStore, plugins: dict[str, Plugin], tenant: str, name: str, spec: ConnectorSpec
) -> tuple[ConnectorRecord, bool]:
    """Validate ``config`` by the plugin's model (whose JSON Schema the API serves), then store it; a secret field
    left out or masked keeps its stored value."""
    cls = _plugin_class(plugins, spec.type)
    try:
        return put_validated(store, cls, tenant, name, spec)
    except InvalidConfig as exc:
        raise Problem(422, "invalid-config", exc.detail, field=exc.field) from None


def _task_view(record: ConnectorRecord, task: TaskRecord) -> TaskStatusView:
    # Only a FAILED task shows its trace.
    state = task_state(record, task)
    return TaskStatusView(
        id=task.id,
        state=state.value,
        worker_id=task.worker_id,
        trace=task.trace if state is ConnectorState.FAILED else None,
        last_run=dict(task.last_run) if task.last_run is not None else None,
        updated_at=task.updated_at,
    )


def _status(store: ControlStore, plugins: dict[str, Plugin], record: ConnectorRecord) -> StatusView:
    """Connect's status shape. A source connector's tasks are those of its last split (none before its first crawl);
    a webhook connector has one task, the worker's handler of its deliveries, whose state is the connector's."""
    plugin = plugins.get(record.type)
    kind = _kind(plugin.cls if plugin else None)
    if kind == "source":
        tasks = [_task_view(record, t) for t in store.get_tasks(record.tenant, record.name)]
    else:
        trace = record.error if record.state is ConnectorState.FAILED else None
        tasks = [TaskStatusView(id=0, state=record.state.value, trace=trace, updated_at=record.updated_at)]
    return StatusView(
        name=record.name,
        type=kind,
        connector=ConnectorStateView(state=record.state.value, error=record.error, updated_at=record.updated_at),
        tasks=tasks,
    )


def _transition(
    ctx: ApiContext, tc: TenantContext, store: ControlStore, plugins: dict[str, Plugin], name: str, action: str
) -> StatusView:
    state = ConnectorState.RUNNING if action in ("resume", "activate") else ConnectorState.PAUSED
    if not store.set_state(tc.tenant, name, state):
        raise Problem(404, "not-found", "no such connector", field="name")
    _audit(ctx, tc, f"connector.{action}", name)
    return _status(store, plugins, _record(store, tc.tenant, name))


def _task(store: ControlStore, record: ConnectorRecord, task_id: int) -> TaskRecord:
    for task in store.get_tasks(record.tenant, record.name):
        if task.id == task_id:
            return task
    raise Problem(404, "not-found", "no such task", field="task_id")


def _audit(ctx: ApiContext, tc: TenantContext, action: str, target: str) -> None:
    audit.record(ctx, tc.tenant, tc.principal, action, target, audit.DONE)


def _unavailable(exc: Exception) -> Problem:
    return Problem(503, "unavailable", safe_reason(exc), headers={"Retry-After": str(RETRY_AFTER_S)})


# -- plugins --------------------------------------------------------------------------------------------------------

_READ_ANY = Depends(require(Scope.TENANT_READ, Scope.TENANT_ADMIN))


@router.get(
    "/v1/connector-plugins",
    summary="Installed connector types",
    response_model=list[PluginView],
    dependencies=[_READ_ANY],
    responses=_errors(),
)
def list_plugins(plugins: PluginsDep) -> list[PluginView]:
    """Every connector type with its kind, and why one is disabled."""
    return [
        PluginView(name=name, kind=_kind(p.cls), disabled_reason=p.disabled_reason)
        for name, p in sorted(plugins.items())
    ]


@router.get(
    "/v1/connector-plugins/{type}/schema",
    summary="A connector type's configuration schema",
    response_model=PluginSchemaView,
    dependencies=[_READ_ANY],
    responses=_errors(),
)
def plugin_schema(type_: Annotated[str, Path(alias="type", max_length=64)], plugins: PluginsDep) -> PluginSchemaView:
    """The JSON Schema ``config`` is validated against when a connector of this type is created or replaced."""
    cls = _plugin_class(plugins, type_, status=404)
    return PluginSchemaView(name=type_, config_schema=cls.config_model.model_json_schema())


# -- connectors -----------------------------------------------------------------------------------------------------


@router.post(
    PREFIX,
    status_code=201,
    summary="Create a connector",
    response_model=ConnectorView,
    responses=_errors((409, "A connector of that name exists.")),
)
def create_connector(
    tc: TenantAdmin,
    body: ConnectorCreate,
    store: ConnectorStoreDep,
    plugins: PluginsDep,
    ctx: ContextDep,
    response: Response,
) -> ConnectorView:
    """Create a connector (RUNNING). Webhook connectors accept deliveries once a signing secret is added."""
    if store.get_connector(tc.tenant, body.name) is not None:
        raise Problem(409, "connector-exists", "a connector of that name exists; PUT replaces it", field="name")
    record, created = _put(store, plugins, tc.tenant, body.name, body)
    if not created:  # a concurrent create won between the check and the write: ours replaced it
        response.status_code = 200
    response.headers["Location"] = f"/v1/tenants/{tc.tenant}/connectors/{body.name}"
    _audit(ctx, tc, "connector.create", body.name)
    return _view(store, plugins, record)


@router.get(
    PREFIX,
    summary="List connectors",
    response_model=Page[ConnectorView],
    responses=_errors((400, "Bad cursor (problem+json naming `cursor`).")),
)
def list_connectors(
    tc: TenantReader,
    store: ConnectorStoreDep,
    plugins: PluginsDep,
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
) -> Page[ConnectorView]:
    """The tenant's connectors by name."""
    resume = decode_cursor("connectors", cursor, 1)
    records = [r for r in store.list_connectors(tc.tenant) if resume is None or r.name > resume[0]]
    page = records[:limit]
    more = len(records) > limit
    return Page[ConnectorView](
        items=[_view(store, plugins, r) for r in page],
        next_cursor=encode_cursor("connectors", [page[-1].name]) if more and page else None,
    )


@router.get(
    "/v1/connectors",
    summary="Connectors of every tenant (platform administrators)",
    response_model=Page[ConnectorView],
    responses=_errors((400, "Bad cursor (problem+json naming `cursor`).")),
)
def list_all_connectors(
    _: PlatformAdmin,
    store: ConnectorStoreDep,
    plugins: PluginsDep,
    tenant: Annotated[str | None, Query(max_length=40, description="Only this tenant's.")] = None,
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
) -> Page[ConnectorView]:
    """Every tenant's connectors (or one tenant's) by tenant and name, for operators."""
    resume = decode_cursor("all-connectors", cursor, 2)
    records = sorted(store.list_connectors(tenant), key=lambda r: (r.tenant, r.name))
    if resume is not None:
        records = [r for r in records if (r.tenant, r.name) > (resume[0], resume[1])]
    page = records[:limit]
    more = len(records) > limit
    return Page[ConnectorView](
        items=[_view(store, plugins, r) for r in page],
        next_cursor=encode_cursor("all-connectors", [page[-1].tenant, page[-1].name]) if more and page else None,
    )


@router.get(PREFIX + "/{name}", summary="Get a connector", response_model=ConnectorView, responses=_errors())
def get_connector(
    tc: TenantReader, name: ConnectorName, store: ConnectorStoreDep, plugins: PluginsDep
) -> ConnectorView:
    """The configuration (secret fields masked) and the active signing secrets by id."""
    return _view(store, plugins, _record(store, tc.tenant, name))


@router.put(
    PREFIX + "/{name}", summary="Replace a connector's configuration", response_model=ConnectorView, responses=_errors()
)
def replace_connector(
    tc: TenantAdmin,
    name: ConnectorName,
    body: ConnectorSpec,
    store: ConnectorStoreDep,
    plugins: PluginsDep,
    ctx: ContextDep,
) -> ConnectorView:
    """Replace the configuration of an existing connector; its state and signing secrets are kept."""
    _record(store, tc.tenant, name)
    record, _ = _put(store, plugins, tc.tenant, name, body)
    _audit(ctx, tc, "connector.update", name)
    return _view(store, plugins, record)


@router.delete(PREFIX + "/{name}", status_code=204, summary="Delete a connector", responses=_errors())
def delete_connector(tc: TenantAdmin, name: ConnectorName, store: ConnectorStoreDep, ctx: ContextDep) -> Response:
    """Remove the connector, its tasks and its secrets. Its source offsets stay in Kafka (reset them first to
    forget them)."""
    if not store.delete_connector(tc.tenant, name):
        raise Problem(404, "not-found", "no such connector", field="name")
    _audit(ctx, tc, "connector.delete", name)
    return Response(status_code=204)


@router.get(PREFIX + "/{name}/status", summary="Connector status", response_model=StatusView, responses=_errors())
def connector_status(
    tc: TenantReader, name: ConnectorName, store: ConnectorStoreDep, plugins: PluginsDep
) -> StatusView:
    """The connector's state (with the error when FAILED) and each task's (source connectors)."""
    return _status(store, plugins, _record(store, tc.tenant, name))


@router.post(PREFIX + "/{name}/pause", summary="Pause a connector", response_model=StatusView, responses=_errors())
def pause(
    tc: TenantAdmin, name: ConnectorName, store: ConnectorStoreDep, plugins: PluginsDep, ctx: ContextDep
) -> StatusView:
    """Stop accepting work: webhooks answer 503 with Retry-After (senders keep and resend), crawls refuse to start."""
    return _transition(ctx, tc, store, plugins, name, "pause")


@router.post(
    PREFIX + "/{name}/resume",
    summary="Resume a paused connector",
    response_model=StatusView,
    responses=_errors((409, "The connector FAILED: activate it instead.")),
)
def resume(
    tc: TenantAdmin, name: ConnectorName, store: ConnectorStoreDep, plugins: PluginsDep, ctx: ContextDep
) -> StatusView:
    """Accept work again. A FAILED connector is not resumed (its error needs a look): ``activate`` restarts it."""
    if _record(store, tc.tenant, name).state is ConnectorState.FAILED:
        raise Problem(409, "connector-failed", "state: the connector FAILED; activate restarts it", field="state")
    return _transition(ctx, tc, store, plugins, name, "resume")


@router.post(
    PREFIX + "/{name}/activate", summary="Activate a connector", response_model=StatusView, responses=_errors()
)
def activate(
    tc: TenantAdmin,
    name: ConnectorName,
    store: ConnectorStoreDep,
    plugins: PluginsDep,
    ctx: ContextDep,
    include_tasks: Annotated[bool, Query(description="Restart the source connector's tasks too.")] = False,
    only_failed: Annotated[bool, Query(description="With include_tasks: only the FAILED tasks.")] = False,
) -> StatusView:
    """Put the connector in service from any state, clearing its error (Connect's restart). As Connect's
    ``includeTasks``/``onlyFailed``, ``include_tasks`` restarts its tasks too, ``only_failed`` only the FAILED ones."""
    if include_tasks:
        record = _record(store, tc.tenant, name)
        for task in store.get_tasks(record.tenant, record.name):
            if not only_failed or task.state is ConnectorState.FAILED:
                store.set_task_state(record.tenant, record.name, task.id, ConnectorState.RUNNING)
    return _transition(ctx, tc, store, plugins, name, "activate")


@router.post(
    PREFIX + "/{name}/deactivate", summary="Deactivate a connector", response_model=StatusView, responses=_errors()
)
def deactivate(
    tc: TenantAdmin, name: ConnectorName, store: ConnectorStoreDep, plugins: PluginsDep, ctx: ContextDep
) -> StatusView:
    """Take the connector out of service until it is activated (the runtime's PAUSED state)."""
    return _transition(ctx, tc, store, plugins, name, "deactivate")


@router.get(PREFIX + "/{name}/tasks", summary="A connector's tasks", response_model=TasksView, responses=_errors())
def list_tasks(tc: TenantReader, name: ConnectorName, store: ConnectorStoreDep) -> TasksView:
    """Each task of a source connector's last split with its configuration (Connect's ``GET .../tasks``)."""
    record = _record(store, tc.tenant, name)
    return TasksView(
        tasks=[TaskConfigView(id=t.id, config=dict(t.config)) for t in store.get_tasks(record.tenant, record.name)]
    )


@router.get(
    PREFIX + "/{name}/tasks/{task_id}/status",
    summary="A task's status",
    response_model=TaskStatusView,
    responses=_errors(),
)
def task_status(
    tc: TenantReader, name: ConnectorName, task_id: Annotated[int, Path(ge=0)], store: ConnectorStoreDep
) -> TaskStatusView:
    """One task of a source connector (its trace when FAILED); the tasks are those of its last split."""
    record = _record(store, tc.tenant, name)
    return _task_view(record, _task(store, record, task_id))


@router.post(
    PREFIX + "/{name}/tasks/{task_id}/restart",
    summary="Restart a task",
    response_model=TaskStatusView,
    responses=_errors(),
)
def restart_task(
    tc: TenantAdmin, name: ConnectorName, task_id: Annotated[int, Path(ge=0)], store: ConnectorStoreDep, ctx: ContextDep
) -> TaskStatusView:
    """Clear a task's failure: the next crawl runs it again. The connector's own state is left as it is."""
    record = _record(store, tc.tenant, name)
    task = _task(store, record, task_id)
    store.set_task_state(record.tenant, record.name, task.id, ConnectorState.RUNNING)
    _audit(ctx, tc, "connector.task.restart", f"{name}/{task.id}")
    return _task_view(record, _task(store, record, task_id))


@router.get(
    PREFIX + "/{name}/offsets",
    summary="Source offsets",
    response_model=OffsetsView,
    responses=_errors((503, "The offsets topic could not be read in time.")),
)
def get_offsets(tc: TenantReader, name: ConnectorName, store: ConnectorStoreDep, ctx: ContextDep) -> OffsetsView:
    """The stored offset of each source partition (read from the compacted offsets topic to its end)."""
    record = _record(store, tc.tenant, name)
    try:
        offsets = OffsetStore(ctx.settings).load(record.tenant, record.name)
    except OffsetsUnavailable as exc:
        raise _unavailable(exc) from None
    return OffsetsView(offsets=[OffsetView(partition=p, offset=o) for p, o in sorted(offsets.items())])


@router.delete(
    PREFIX + "/{name}/offsets",
    summary="Reset source offsets",
    response_model=OffsetsReset,
    responses=_errors((409, "The connector is not PAUSED."), (503, "Kafka unavailable; nothing was reset.")),
)
def reset_offsets(
    tc: TenantAdmin, name: ConnectorName, store: ConnectorStoreDep, ctx: ContextDep, publisher: PublisherDep
) -> OffsetsReset:
    """Forget every stored offset (tombstones), so the next crawl starts over. Pause the connector first."""
    record = _record(store, tc.tenant, name)
    if record.state is not ConnectorState.PAUSED:
        raise Problem(409, "connector-not-paused", "state: pause the connector before resetting offsets", field="state")
    offsets_store = OffsetStore(ctx.settings, producer=publisher.producer)
    try:
        offsets = offsets_store.load(record.tenant, record.name)
        offsets_store.store(record.tenant, record.name, dict.fromkeys(offsets))
    except (OffsetsUnavailable, PublishError) as exc:
        raise _unavailable(exc) from None
    _audit(ctx, tc, "connector.offsets.reset", name)
    return OffsetsReset(reset=sorted(offsets))


@router.get(
    PREFIX + "/{name}/secrets",
    summary="Active webhook signing secrets",
    response_model=SecretsView,
    responses=_errors(),
)
def list_secrets(tc: TenantReader, name: ConnectorName, store: ConnectorStoreDep) -> SecretsView:
    """Ids and ages of the active signing secrets, newest first. Values are never returned."""
    return SecretsView(active=_secret_infos(store, _record(store, tc.tenant, name)))


@router.post(
    PREFIX + "/{name}/secrets",
    status_code=201,
    summary="Rotate the webhook signing secret",
    response_model=SecretsView,
    response_model_exclude_none=True,
    responses=_errors((409, "Not a webhook connector.")),
)
def rotate_secret(
    tc: TenantAdmin,
    name: ConnectorName,
    body: SecretCreate,
    store: ConnectorStoreDep,
    plugins: PluginsDep,
    ctx: ContextDep,
) -> SecretsView:
    """Activate a new signing secret next to the previous one: during the overlap deliveries signed with either
    verify; the one before is retired. A generated secret is in this answer only; a supplied one is never echoed."""
    record = _record(store, tc.tenant, name)
    cls = _plugin_class(plugins, record.type)
    if not issubclass(cls, WebhookConnector):
        raise Problem(409, "not-a-webhook", "name: only webhook connectors have signing secrets", field="name")
    generated = body.secret is None
    secret = body.secret or SecretStr(secrets.token_urlsafe(42))
    active = store.add_webhook_secret(record.tenant, record.name, secret)
    _audit(ctx, tc, "connector.secret.rotate", name)
    return SecretsView(
        id=active[0].id,
        active=[SecretInfoView(id=s.id, created_at=s.created_at) for s in active],
        secret=secret.get_secret_value() if generated else None,
    )
