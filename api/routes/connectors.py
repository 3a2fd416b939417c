"""A tenant's connectors: the same control plane the connector worker runs from, behind OAuth and the tenant check.
The one place connectors are managed: the worker serves no management routes.

Configuration, state and secrets live in ``metalake_control`` (``control.connectors.store.ControlStore``); source
offsets in the compacted offsets topic (``control.connectors.offsets.OffsetStore``); ``api.services.connectors``
works them, bodies are in ``api.schemas.connectors``. The worker reads both on every
delivery and crawl, so a change made here takes effect at the next one. Reads need ``tenant:read`` (or
``tenant:admin``), changes ``tenant:admin``. Secrets are write-only: no answer carries a stored secret.

States are the runtime's (RUNNING, PAUSED, FAILED; the worker works only for RUNNING). ``pause``/``resume`` are
Connect's (resuming a FAILED connector is refused: it needs ``activate``); ``activate`` runs the connector from any
state and clears its error (Connect's restart); ``deactivate`` takes it out of service (PAUSED: the runtime has one
"not running" state, so webhooks answer 503 with Retry-After and crawls refuse to start).
"""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response
from fastapi.concurrency import run_in_threadpool

from api import quotas
from api.auth.deps import require
from api.context import ApiContext, ContextDep
from api.deps import ConnectorStoreDep, PlatformAdmin, TenantAdmin, TenantReader
from api.paging import DEFAULT_LIMIT, CursorParam, Limit, decode_cursor, encode_cursor
from api.schemas.common import Page
from api.schemas.connectors import (
    NAME_PATTERN,
    ConnectorCreate,
    ConnectorSpec,
    ConnectorStateView,
    ConnectorView,
    OffsetsReset,
    OffsetsView,
    OffsetView,
    PluginSchemaView,
    PluginView,
    ScheduleStatusView,
    SecretCreate,
    SecretInfoView,
    SecretsView,
    StatusView,
    TaskConfigView,
    TaskStatusView,
    TasksView,
)
from api.security import TenantContext
from api.services import audit, connectors
from api.services.connector_status import task_state
from api.services.connector_validation import MASK
from api.services.events import PublisherDep
from api.workpool import OFFSETS
from control.auth.principal import Scope
from control.connectors import registry
from control.connectors.reasons import shown_error
from control.connectors.records import ConnectorRecord, ConnectorState, SecretInfo, TaskRecord
from control.connectors.registry import Plugin
from control.connectors.schedule import Schedule, ScheduleDoc, ScheduleStore
from control.connectors.store import ControlStore
from tenants.naming import CONTROL_DATABASE

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

# -- views ----------------------------------------------------------------------------------------------------------


def _secret_infos(infos: list[SecretInfo]) -> list[SecretInfoView]:
    return [SecretInfoView(id=s.id, created_at=s.created_at, expires_at=s.expires_at) for s in infos]


def _view(store: ControlStore, plugins: dict[str, Plugin], record: ConnectorRecord) -> ConnectorView:
    return ConnectorView(
        tenant=record.tenant,
        name=record.name,
        type=record.type,
        kind=connectors.kind_of(plugins, record),
        config={**record.config, **dict.fromkeys(record.secret_fields, MASK)},
        transforms=[t.model_dump(mode="json", by_alias=True) for t in record.transforms],
        errors_tolerance=record.errors_tolerance.value,
        tasks_max=record.tasks_max,
        schedule=record.schedule.model_dump() if record.schedule is not None else None,
        state=record.state.value,
        webhook_secrets=_secret_infos(store.secrets.webhook_info(record.tenant, record.name)),
    )


def _task_view(record: ConnectorRecord, task: TaskRecord) -> TaskStatusView:
    # Only a FAILED task shows its trace: an error class and our message (first line: older records held tracebacks).
    state = task_state(record, task)
    return TaskStatusView(
        id=task.id,
        state=state.value,
        worker_id=task.worker_id,
        trace=shown_error(task.trace) if state is ConnectorState.FAILED else None,
        last_run=dict(task.last_run) if task.last_run is not None else None,
        updated_at=task.updated_at,
    )


def _status(store: ControlStore, plugins: dict[str, Plugin], record: ConnectorRecord) -> StatusView:
    """Connect's status shape: the connector and the tasks it shows."""
    return StatusView(
        name=record.name,
        type=connectors.kind_of(plugins, record),
        connector=ConnectorStateView(
            state=record.state.value, error=shown_error(record.error), updated_at=record.updated_at
        ),
        tasks=[_task_view(record, t) for t in connectors.shown_tasks(store, plugins, record)],
    )


def schedule_view(schedule: Schedule, runs: ScheduleDoc | None) -> ScheduleStatusView:
    """A scheduled connector's last run (as the worker recorded it) and the next one."""
    last = runs.get("last_started_at") if runs is not None else None
    started = last.replace(tzinfo=UTC) if last is not None and last.tzinfo is None else last
    finished = runs.get("last_finished_at") if runs is not None else None
    return ScheduleStatusView(
        interval_s=schedule.interval_s,
        last_started_at=started,
        next_run_at=started + timedelta(seconds=schedule.interval_s) if started is not None else None,
        last_finished_at=finished.replace(tzinfo=UTC) if finished is not None and finished.tzinfo is None else finished,
        last_outcome=runs.get("last_outcome") if runs is not None else None,
        last_records=runs.get("last_records") if runs is not None else None,
        last_error=shown_error(runs.get("last_error")) if runs is not None else None,
    )


def _audit(ctx: ApiContext, tc: TenantContext, action: str, target: str) -> None:
    audit.record(ctx, tc.tenant, tc.principal, action, target, audit.DONE)


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
        PluginView(name=name, kind=connectors.kind(p.cls), disabled_reason=p.disabled_reason)
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
    cls = connectors.plugin_class(plugins, type_, status=404)
    return PluginSchemaView(name=type_, config_schema=cls.config_model.model_json_schema())


# -- connectors -----------------------------------------------------------------------------------------------------


@router.post(
    PREFIX,
    status_code=201,
    summary="Create a connector",
    response_model=ConnectorView,
    responses=_errors((409, "A connector of that name exists, or the tenant holds its cap (`quota-exceeded`).")),
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
    min_interval_s = ctx.settings.connect.schedule_min_interval_s
    with quotas.claim(ctx, tc.tenant, quotas.CONNECTORS_KIND):
        record, created = connectors.create(store, plugins, tc.tenant, body.name, body, min_interval_s)
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
    records = connectors.page(store, tc.tenant, (tc.tenant, resume[0]) if resume else None, limit)
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
    records = connectors.page(store, tenant, (resume[0], resume[1]) if resume else None, limit)
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
    return _view(store, plugins, connectors.get(store, tc.tenant, name))


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
    record = connectors.replace(store, plugins, tc.tenant, name, body, ctx.settings.connect.schedule_min_interval_s)
    _audit(ctx, tc, "connector.update", name)
    return _view(store, plugins, record)


@router.delete(PREFIX + "/{name}", status_code=204, summary="Delete a connector", responses=_errors())
def delete_connector(tc: TenantAdmin, name: ConnectorName, store: ConnectorStoreDep, ctx: ContextDep) -> Response:
    """Remove the connector, its tasks and its secrets. Its source offsets stay in Kafka (reset them first to
    forget them)."""
    connectors.delete(store, tc.tenant, name)
    _audit(ctx, tc, "connector.delete", name)
    return Response(status_code=204)


@router.get(PREFIX + "/{name}/status", summary="Connector status", response_model=StatusView, responses=_errors())
def connector_status(
    tc: TenantReader, name: ConnectorName, store: ConnectorStoreDep, plugins: PluginsDep, ctx: ContextDep
) -> StatusView:
    """The connector's state (with the error when FAILED) and each task's (source connectors); for a scheduled one,
    its last scheduled run and the next."""
    record = connectors.get(store, tc.tenant, name)
    status = _status(store, plugins, record)
    if record.schedule is not None:
        runs = ScheduleStore(ctx.mongo[CONTROL_DATABASE]).get(record.id)
        status.schedule = schedule_view(record.schedule, runs)
    return status


@router.post(PREFIX + "/{name}/pause", summary="Pause a connector", response_model=StatusView, responses=_errors())
def pause(
    tc: TenantAdmin, name: ConnectorName, store: ConnectorStoreDep, plugins: PluginsDep, ctx: ContextDep
) -> StatusView:
    """Stop accepting work: webhooks answer 503 with Retry-After (senders keep and resend), crawls refuse to start."""
    record = connectors.transition(store, tc.tenant, name, "pause")
    _audit(ctx, tc, "connector.pause", name)
    return _status(store, plugins, record)


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
    record = connectors.transition(store, tc.tenant, name, "resume")
    _audit(ctx, tc, "connector.resume", name)
    return _status(store, plugins, record)


@router.post(
    PREFIX + "/{name}/activate", summary="Activate a connector", response_model=StatusView, responses=_errors()
)
def activate(  # noqa: PLR0913
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
    record = connectors.transition(
        store, tc.tenant, name, "activate", include_tasks=include_tasks, only_failed=only_failed
    )
    _audit(ctx, tc, "connector.activate", name)
    return _status(store, plugins, record)


@router.post(
    PREFIX + "/{name}/deactivate", summary="Deactivate a connector", response_model=StatusView, responses=_errors()
)
def deactivate(
    tc: TenantAdmin, name: ConnectorName, store: ConnectorStoreDep, plugins: PluginsDep, ctx: ContextDep
) -> StatusView:
    """Take the connector out of service until it is activated (the runtime's PAUSED state)."""
    record = connectors.transition(store, tc.tenant, name, "deactivate")
    _audit(ctx, tc, "connector.deactivate", name)
    return _status(store, plugins, record)


@router.get(PREFIX + "/{name}/tasks", summary="A connector's tasks", response_model=TasksView, responses=_errors())
def list_tasks(tc: TenantReader, name: ConnectorName, store: ConnectorStoreDep) -> TasksView:
    """Each task of a source connector's last split with its configuration (Connect's ``GET .../tasks``)."""
    record = connectors.get(store, tc.tenant, name)
    return TasksView(
        tasks=[TaskConfigView(id=t.id, config=dict(t.config)) for t in store.tasks.of(record.tenant, record.name)]
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
    record = connectors.get(store, tc.tenant, name)
    return _task_view(record, connectors.task(store, record, task_id))


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
    record = connectors.get(store, tc.tenant, name)
    task = connectors.restart_task(store, record, task_id)
    _audit(ctx, tc, "connector.task.restart", f"{name}/{task.id}")
    return _task_view(record, task)


@router.get(
    PREFIX + "/{name}/offsets",
    summary="Source offsets",
    response_model=OffsetsView,
    responses=_errors((503, "The offsets topic could not be read in time.")),
)
async def get_offsets(tc: TenantReader, name: ConnectorName, store: ConnectorStoreDep, ctx: ContextDep) -> OffsetsView:
    """The stored offset of each source partition (read from the compacted offsets topic to its end)."""
    record = await run_in_threadpool(connectors.get, store, tc.tenant, name)
    # A read of the offsets topic to its end: on the offsets' own pool, within the tenant's share (429/503 beyond).
    offsets = await ctx.pools.run(OFFSETS, tc.tenant, connectors.offsets, ctx.settings, record)
    return OffsetsView(offsets=[OffsetView(partition=p, offset=o) for p, o in sorted(offsets.items())])


@router.delete(
    PREFIX + "/{name}/offsets",
    summary="Reset source offsets",
    response_model=OffsetsReset,
    responses=_errors((409, "The connector is not PAUSED."), (503, "Kafka unavailable; nothing was reset.")),
)
async def reset_offsets(
    tc: TenantAdmin, name: ConnectorName, store: ConnectorStoreDep, ctx: ContextDep, publisher: PublisherDep
) -> OffsetsReset:
    """Forget every stored offset (tombstones), so the next crawl starts over. Pause the connector first."""
    record = await run_in_threadpool(connectors.get, store, tc.tenant, name)
    reset = await ctx.pools.run(OFFSETS, tc.tenant, connectors.reset_offsets, ctx.settings, publisher.producer, record)
    await run_in_threadpool(_audit, ctx, tc, "connector.offsets.reset", name)
    return OffsetsReset(reset=reset)


@router.get(
    PREFIX + "/{name}/secrets",
    summary="Active webhook signing secrets",
    response_model=SecretsView,
    responses=_errors(),
)
def list_secrets(tc: TenantReader, name: ConnectorName, store: ConnectorStoreDep) -> SecretsView:
    """Ids and ages of the active signing secrets, newest first. Values are never returned."""
    record = connectors.get(store, tc.tenant, name)
    return SecretsView(active=_secret_infos(store.secrets.webhook_info(record.tenant, record.name)))


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
    """Activate a new signing secret: deliveries signed with the previous one still verify for `overlap_seconds`
    (default `connect.webhook_secret_overlap_s`, 24 h; 0 retires it now), the one before is retired. A generated
    secret is in this answer only; a supplied one is never echoed."""
    record = connectors.get(store, tc.tenant, name)
    overlap = body.overlap_seconds
    if overlap is None:
        overlap = ctx.settings.connect.webhook_secret_overlap_s
    active, generated = connectors.rotate_secret(store, plugins, record, body.secret, overlap)
    _audit(ctx, tc, "connector.secret.rotate", name)
    return SecretsView(id=active[0].id, active=_secret_infos(active), secret=generated)


@router.delete(
    PREFIX + "/{name}/secrets/{secret_id}",
    summary="Revoke a webhook signing secret",
    response_model=SecretsView,
    response_model_exclude_none=True,
    responses=_errors((409, "Not a webhook connector.")),
)
def revoke_secret(
    tc: TenantAdmin,
    name: ConnectorName,
    secret_id: Annotated[str, Path(min_length=1, max_length=64, description="The id of an active signing secret.")],
    store: ConnectorStoreDep,
    plugins: PluginsDep,
    ctx: ContextDep,
) -> SecretsView:
    """Retire one signing secret now (e.g. a leaked previous secret, before its overlap ends): deliveries signed
    with it are refused from the next lookup on. Revoking the newest leaves only the previous one until its overlap
    ends, or none (every delivery refused until a rotation). The active secrets left, newest first."""
    record = connectors.get(store, tc.tenant, name)
    active = connectors.revoke_secret(store, plugins, record, secret_id)
    _audit(ctx, tc, "connector.secret.revoke", name)
    return SecretsView(active=_secret_infos(active))
