"""Connect-like management routes, internal to the worker (bound to loopback) and guarded by its admin token.

``Authorization: Bearer <METALAKE_CONNECT__ADMIN_TOKEN>`` is compared in constant time. Without a configured token
(dev mode only) every management route answers 503. Secrets are write-only: no route returns a stored secret.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from connectors.runtime.context import PluginUnavailable, Runtime, RuntimeDep
from connectors.runtime.tasks import worker_id
from control.connectors.offsets import OffsetsUnavailable
from control.connectors.plugin import SourceConnector
from control.connectors.reasons import safe_reason
from control.connectors.status import task_state
from control.connectors.store import ConnectorRecord, ConnectorState, TaskRecord
from control.connectors.validation import MASK, ConnectorFields, InvalidConfig, put_validated
from metalake.http.problems import Problem
from metalake.tenancy import InvalidTenantId, validate_tenant_id


def require_admin(request: Request, runtime: RuntimeDep) -> None:
    """Let the request through only with the worker's admin token (constant-time compare)."""
    token = runtime.settings.connect.admin_token
    if token is None:
        raise Problem(503, "management-disabled", "no admin token is configured (dev mode): management is off")
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    ok = scheme.lower() == "bearer" and hmac.compare_digest(
        presented.strip().encode(), token.get_secret_value().encode()
    )
    if not ok:
        raise Problem(
            401, "unauthorized", "the worker's admin token is required", headers={"WWW-Authenticate": "Bearer"}
        )


router = APIRouter(tags=["management"], dependencies=[Depends(require_admin)])


# -- schemas --------------------------------------------------------------------------------------------------------


class ConnectorPut(ConnectorFields):
    """Create or replace a connector. ``config`` is checked against the type's config model (its JSON Schema is at
    ``GET /connector-plugins/{type}``); secret fields may be left out (or sent as ``**********``) to keep them."""


class SecretPost(BaseModel):
    """A webhook signing secret to activate; omitted: one is generated and shown once in the answer."""

    model_config = ConfigDict(extra="forbid")

    secret: SecretStr | None = Field(default=None, min_length=16, max_length=512)


def _tenant(tenant: str) -> str:
    try:
        return validate_tenant_id(tenant)
    except InvalidTenantId:
        raise Problem(404, "not-found", "no such tenant", field="tenant") from None


def _record_or_404(runtime: Runtime, tenant: str, name: str) -> ConnectorRecord:
    record = runtime.store.get_connector(_tenant(tenant), name)
    if record is None:
        raise Problem(404, "not-found", "no such connector", field="name")
    return record


def _view(record: ConnectorRecord, runtime: Runtime) -> dict[str, Any]:
    return {
        "tenant": record.tenant,
        "name": record.name,
        "type": record.type,
        "config": {**record.config, **dict.fromkeys(record.secret_fields, MASK)},
        "transforms": [t.model_dump(mode="json", by_alias=True) for t in record.transforms],
        "errors_tolerance": record.errors_tolerance.value,
        "tasks_max": record.tasks_max,
        "webhook_secrets": [
            {"id": s.id, "created_at": s.created_at.isoformat()}
            for s in runtime.store.webhook_secret_info(record.tenant, record.name)
        ],
    }


def _status(record: ConnectorRecord) -> dict[str, Any]:
    return {
        "tenant": record.tenant,
        "name": record.name,
        "type": record.type,
        "state": record.state.value,
        "error": record.error,
        "tasks_max": record.tasks_max,
        "updated_at": record.updated_at.isoformat() if record.updated_at else None,
    }


def _kind(runtime: Runtime, record: ConnectorRecord) -> str | None:
    try:
        cls = runtime.plugin_class(record.type)
    except PluginUnavailable:
        return None
    return "source" if issubclass(cls, SourceConnector) else "webhook"


def _task_status(record: ConnectorRecord, task: TaskRecord) -> dict[str, Any]:
    state = task_state(record, task)
    out: dict[str, Any] = {"id": task.id, "state": state.value, "worker_id": task.worker_id}
    if task.trace is not None and state is ConnectorState.FAILED:
        out["trace"] = task.trace
    if task.last_run is not None:
        out["last_run"] = dict(task.last_run)
    return out


def _connect_status(runtime: Runtime, record: ConnectorRecord) -> dict[str, Any]:
    """Connect's ``GET /connectors/{name}/status`` shape. A webhook connector has one task, the worker's handler of
    its deliveries, whose state is the connector's; a source connector's tasks are those of its last split (none
    before its first crawl)."""
    me = worker_id()
    connector: dict[str, Any] = {"state": record.state.value, "worker_id": me}
    if record.error is not None:
        connector["trace"] = record.error
    kind = _kind(runtime, record)
    if kind == "source":
        tasks = [_task_status(record, t) for t in runtime.store.get_tasks(record.tenant, record.name)]
    else:
        tasks = [{"id": 0, **connector}]
    return {
        "name": record.name,
        "tenant": record.tenant,
        "connector": connector,
        "tasks": tasks,
        "type": kind,
        "plugin": record.type,
    }


def _put(runtime: Runtime, tenant: str, name: str, body: ConnectorPut) -> tuple[ConnectorRecord, bool]:
    """Validate ``config`` by the plugin's model (stored secrets fill the gaps), then store it."""
    try:
        cls = runtime.plugin_class(body.type)
    except PluginUnavailable as exc:
        raise Problem(422, "unknown-connector-type", str(exc), field="type") from None
    try:
        return put_validated(runtime.store, cls, tenant, name, body)
    except InvalidConfig as exc:
        raise Problem(422, "invalid-config", exc.detail, field=exc.field) from None


# -- plugins --------------------------------------------------------------------------------------------------------


@router.get("/connector-plugins")
def list_plugins(runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Installed connector types: name, kind (webhook or source), and why one is disabled."""
    out = []
    for name, plugin in sorted(runtime.plugins.items()):
        kind = None if plugin.cls is None else ("source" if issubclass(plugin.cls, SourceConnector) else "webhook")
        out.append({"name": name, "kind": kind, "disabled_reason": plugin.disabled_reason})
    return out


@router.get("/connector-plugins/{type_}")
def plugin_schema(type_: str, runtime: RuntimeDep) -> dict[str, Any]:
    """The JSON Schema of a connector type's configuration."""
    try:
        cls = runtime.plugin_class(type_)
    except PluginUnavailable as exc:
        raise Problem(404, "not-found", str(exc), field="type") from None
    return {"name": type_, "config_schema": cls.config_model.model_json_schema()}


# -- connectors -----------------------------------------------------------------------------------------------------


@router.get("/connectors")
def list_connectors(runtime: RuntimeDep, tenant: str | None = None) -> list[dict[str, Any]]:
    """Connectors with their state, of one tenant (``?tenant=``) or of all."""
    records = runtime.store.list_connectors(_tenant(tenant) if tenant is not None else None)
    return [_status(r) for r in records]


@router.put("/connectors/{tenant}/{name}")
def put_connector(
    tenant: str, name: str, body: ConnectorPut, runtime: RuntimeDep, response: Response
) -> dict[str, Any]:
    """Create (201) or replace (200) a connector's configuration; its state is kept on replace."""
    tenant = _tenant(tenant)
    if not (1 <= len(name) <= 64) or not name.replace("-", "").replace("_", "").isalnum():
        raise Problem(422, "invalid-name", "name: 1-64 letters, digits, '-' or '_'", field="name")
    record, created = _put(runtime, tenant, name, body)
    runtime.lookups.invalidate(tenant)
    response.status_code = 201 if created else 200
    return _view(record, runtime)


@router.get("/connectors/{tenant}/{name}")
def get_connector(tenant: str, name: str, runtime: RuntimeDep) -> dict[str, Any]:
    """The configuration; secret fields are masked and signing secrets listed by id only."""
    return _view(_record_or_404(runtime, tenant, name), runtime)


@router.delete("/connectors/{tenant}/{name}", status_code=204)
def delete_connector(tenant: str, name: str, runtime: RuntimeDep) -> Response:
    """Remove the connector and its secrets (its offsets stay in Kafka until reset)."""
    if not runtime.store.delete_connector(_tenant(tenant), name):
        raise Problem(404, "not-found", "no such connector", field="name")
    runtime.lookups.invalidate(tenant)
    return Response(status_code=204)


@router.get("/connectors/{tenant}/{name}/status")
def connector_status(tenant: str, name: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Connect's status: the connector's state (RUNNING, PAUSED or FAILED with its ``trace``) and each task's."""
    return _connect_status(runtime, _record_or_404(runtime, tenant, name))


def _task_or_404(runtime: Runtime, record: ConnectorRecord, task_id: int) -> TaskRecord:
    for task in runtime.store.get_tasks(record.tenant, record.name):
        if task.id == task_id:
            return task
    raise Problem(404, "not-found", "no such task", field="task_id")


@router.get("/connectors/{tenant}/{name}/tasks")
def list_tasks(tenant: str, name: str, runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Connect's ``GET /connectors/{name}/tasks``: each task's id and configuration (the partitions it owns)."""
    record = _record_or_404(runtime, tenant, name)
    tasks = runtime.store.get_tasks(record.tenant, record.name)
    return [{"id": {"connector": record.name, "task": t.id}, "config": dict(t.config)} for t in tasks]


@router.get("/connectors/{tenant}/{name}/tasks/{task_id}/status")
def task_status(tenant: str, name: str, task_id: int, runtime: RuntimeDep) -> dict[str, Any]:
    record = _record_or_404(runtime, tenant, name)
    return _task_status(record, _task_or_404(runtime, record, task_id))


@router.post("/connectors/{tenant}/{name}/tasks/{task_id}/restart", status_code=204)
def restart_task(tenant: str, name: str, task_id: int, runtime: RuntimeDep) -> Response:
    """Clear a task's failure: the next crawl runs it again (204). The connector's own state is left as it is."""
    record = _record_or_404(runtime, tenant, name)
    task = _task_or_404(runtime, record, task_id)
    runtime.store.set_task_state(record.tenant, record.name, task.id, ConnectorState.RUNNING)
    return Response(status_code=204)


def _transition(runtime: Runtime, tenant: str, name: str, state: ConnectorState) -> None:
    record = _record_or_404(runtime, tenant, name)
    runtime.store.set_state(record.tenant, record.name, state)
    runtime.lookups.invalidate(record.tenant)


@router.put("/connectors/{tenant}/{name}/pause", status_code=202)
def pause(tenant: str, name: str, runtime: RuntimeDep) -> Response:
    """Stop accepting work: webhooks answer 503 with Retry-After, crawls refuse to start."""
    _transition(runtime, tenant, name, ConnectorState.PAUSED)
    return Response(status_code=202)


@router.put("/connectors/{tenant}/{name}/resume", status_code=202)
def resume(tenant: str, name: str, runtime: RuntimeDep) -> Response:
    """Accept work again (a FAILED connector needs restart)."""
    record = _record_or_404(runtime, tenant, name)
    if record.state is ConnectorState.FAILED:
        raise Problem(409, "connector-failed", "the connector FAILED: restart it", field="state")
    runtime.store.set_state(record.tenant, record.name, ConnectorState.RUNNING)
    runtime.lookups.invalidate(record.tenant)
    return Response(status_code=202)


@router.post("/connectors/{tenant}/{name}/restart", status_code=204)
def restart(
    tenant: str,
    name: str,
    runtime: RuntimeDep,
    include_tasks: Annotated[bool, Query(alias="includeTasks")] = False,
    only_failed: Annotated[bool, Query(alias="onlyFailed")] = False,
) -> Response:
    """Clear the error and run again (from PAUSED or FAILED too). As in Connect, ``includeTasks=true`` restarts the
    tasks too, and ``onlyFailed=true`` limits that to the FAILED ones."""
    record = _record_or_404(runtime, tenant, name)
    runtime.store.set_state(record.tenant, record.name, ConnectorState.RUNNING)
    runtime.lookups.invalidate(record.tenant)
    if include_tasks:
        for task in runtime.store.get_tasks(record.tenant, record.name):
            if not only_failed or task.state is ConnectorState.FAILED:
                runtime.store.set_task_state(record.tenant, record.name, task.id, ConnectorState.RUNNING)
    return Response(status_code=204)


@router.get("/connectors/{tenant}/{name}/offsets")
async def get_offsets(tenant: str, name: str, runtime: RuntimeDep) -> dict[str, Any]:
    """The source offsets stored for each partition of the connector (read from the offsets topic)."""
    record = await run_in_threadpool(_record_or_404, runtime, tenant, name)
    try:
        offsets = await run_in_threadpool(runtime.offsets.load, record.tenant, record.name)
    except OffsetsUnavailable as exc:
        raise Problem(
            503, "unavailable", safe_reason(exc), headers={"Retry-After": str(runtime.settings.connect.retry_after_s)}
        ) from None
    return {"offsets": [{"partition": p, "offset": o} for p, o in sorted(offsets.items())]}


@router.delete("/connectors/{tenant}/{name}/offsets")
async def reset_offsets(tenant: str, name: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Forget every stored offset (tombstones), so the next crawl starts over. The connector must be PAUSED."""
    record = await run_in_threadpool(_record_or_404, runtime, tenant, name)
    if record.state is not ConnectorState.PAUSED:
        raise Problem(409, "connector-not-paused", "pause the connector before resetting its offsets", field="state")
    offsets = await run_in_threadpool(runtime.offsets.load, record.tenant, record.name)
    await run_in_threadpool(runtime.offsets.store, record.tenant, record.name, dict.fromkeys(offsets))
    return {"reset": sorted(offsets)}


@router.post("/connectors/{tenant}/{name}/secrets", status_code=201)
def add_secret(tenant: str, name: str, body: SecretPost, runtime: RuntimeDep) -> dict[str, Any]:
    """Activate a webhook signing secret next to the previous one (rotation: two are active, older are retired).

    A generated secret is in the answer, this once; a supplied one is never echoed.
    """
    record = _record_or_404(runtime, tenant, name)
    generated = body.secret is None
    secret = body.secret or SecretStr(secrets.token_urlsafe(42))
    active = runtime.store.add_webhook_secret(record.tenant, record.name, secret)
    runtime.lookups.invalidate(record.tenant)
    out: dict[str, Any] = {
        "id": active[0].id,
        "active": [{"id": s.id, "created_at": s.created_at.isoformat()} for s in active],
    }
    if generated:
        out["secret"] = secret.get_secret_value()
    return out


@router.post("/tenants/{tenant}/write-keys", status_code=201)
def create_write_key(tenant: str, runtime: RuntimeDep) -> dict[str, Any]:
    """A new ingest write key for the tenant. The key is in this answer only: metalake stores its hash."""
    key_id, key = runtime.store.create_write_key(_tenant(tenant))
    return {"tenant": tenant, "key_id": key_id, "key": key.get_secret_value()}


@router.delete("/tenants/{tenant}/write-keys/{key_id}", status_code=204)
def revoke_write_key(tenant: str, key_id: str, runtime: RuntimeDep) -> Response:
    if not runtime.store.revoke_write_key(_tenant(tenant), key_id):
        raise Problem(404, "not-found", "no such write key", field="key_id")
    return Response(status_code=204)
