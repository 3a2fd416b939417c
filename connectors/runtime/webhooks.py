"""``POST /webhooks/{slug}/{tenant_id}``: push deliveries for any :class:`WebhookConnector` plugin.

The URL slug names the plugin (``monte-carlo`` -> ``montecarlo``: hyphens dropped). The tenant must have a connector
of that type configured (``/webhooks/{slug}/{tenant_id}/{name}`` picks one when it has several). Order of checks,
each answered as RFC 9457 problem+json:

1. unknown plugin, invalid or unknown tenant, no such connector -> 404;
2. no active signing secret -> 403 (the connector cannot authenticate anything: refuse rather than accept unsigned);
3. body over the limit (counted on the bytes read, before parsing) -> 413;
4. connector PAUSED or FAILED -> 503 with Retry-After (the sender keeps the delivery and resends);
5. signature not valid for any active secret -> 401 (a verifier that finds the body unusable raises
   ``InvalidPayload``: 400, not dead-lettered, since nothing authenticated it);
6. the tenant suspended or being deleted -> 403 ``tenant-suspended`` (after the signature: an anonymous caller
   learns nothing of the tenant's state), as the ingest API answers its write keys and tokens;
7. body not JSON -> 400;
8. the plugin reads the body into its payload, once (``read``), and keys it (``dedup_key``; a body ``read`` refuses
   is keyed by its *parsed* content, :func:`~control.connectors.plugin.parsed_key`, so variants of one body that the
   signature does not tell apart, spacing or escapes, are one delivery); a delivery already handled under that key
   -> 200 ``{"status": "duplicate"}``, nothing published;
9. verified but unreadable or unmappable (``InvalidPayload`` from ``read`` or ``to_events``) -> raw bytes to the DLQ
   topic, 202 ``{"status": "dead_lettered"}`` (under ``errors.tolerance=none`` the connector is marked FAILED
   instead and the answer is 503); once the connector reached ``connect.dead_letter_cap`` in the window, 202
   ``{"status": "dead_letter_dropped"}``, counted and logged, nothing published;
10. events transformed, published and confirmed by Kafka (:func:`~connectors.runtime.accept.publish_confirmed`,
   the path of every HTTP source) -> 202 ``{"status": "accepted"}``; Kafka unavailable -> 503 with Retry-After, and
   the delivery is not recorded as seen, so the resend publishes it exactly once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pymongo.errors import PyMongoError

from connectors.runtime.accept import Batch, publish_confirmed
from connectors.runtime.bodies import read_limited
from connectors.runtime.context import PluginUnavailable, Runtime, RuntimeDep, instantiate
from connectors.runtime.errors import ErrorPolicy, TaskFailed
from connectors.runtime.pipeline import Prepared, prepare
from connectors.runtime.tracing import answer_traceparent, intake_span
from control.auth.gate import tenant_usable
from control.auth.problems import tenant_refused
from control.connectors.plugin import (
    AuthenticationFailed,
    InboundRequest,
    InvalidPayload,
    WebhookConnector,
    parsed_key,
)
from control.connectors.records import ConnectorRecord, ConnectorState
from metalake.events import CloudEvent
from metalake.http.json_body import NotJson
from metalake.http.problems import Problem
from metalake.sealing import SealingError
from metalake.telemetry import bind_tenant
from metalake.tenancy import InvalidTenantId, validate_tenant_id

log = logging.getLogger(__name__)

router = APIRouter(tags=["webhooks"])


def plugin_name(slug: str) -> str:
    """The plugin a URL slug names: ``monte-carlo`` -> ``montecarlo``."""
    return slug.replace("-", "").lower()


def _not_found(detail: str, field: str) -> Problem:
    return Problem(404, "not-found", detail, field=field)


def _resolve(runtime: Runtime, slug: str, tenant_id: str, name: str | None) -> tuple[ConnectorRecord, Any]:
    try:
        validate_tenant_id(tenant_id)
    except InvalidTenantId:
        raise _not_found("no such tenant", "tenant_id") from None
    type_ = plugin_name(slug)
    try:
        cls = runtime.plugin_class(type_)
    except PluginUnavailable:
        raise _not_found(f"no webhook connector type for {slug!r}", "slug") from None
    if not issubclass(cls, WebhookConnector):
        raise _not_found(f"no webhook connector type for {slug!r}", "slug")
    if name is not None:
        record = runtime.store.get_connector(tenant_id, name)
        candidates = [record] if record is not None and record.type == type_ else []
    else:
        candidates = runtime.store.connectors_of_type(tenant_id, type_)
    if not candidates:
        raise _not_found("no such tenant or no such connector configured for it", "tenant_id")
    if len(candidates) > 1:
        raise _not_found("the tenant has several connectors of this type: name one in the URL", "name")
    return candidates[0], cls


@dataclass(frozen=True)
class _Delivery:
    record: ConnectorRecord
    cls: Any
    webhook_secrets: list[bytes]
    config_secrets: dict[str, Any]


def _load_delivery(runtime: Runtime, slug: str, tenant_id: str, name: str | None) -> _Delivery:
    record, cls = _resolve(runtime, slug, tenant_id, name)
    try:
        webhook_secrets, config_secrets = runtime.store.secrets.of(record.tenant, record.name)
    except SealingError as exc:
        # The worker's key configuration is at fault, not the sender: a 503 it retries, the reason in the log only.
        log.error("connect.secrets_unusable", extra={"connector": record.name, "reason": str(exc)})
        raise runtime.unavailable("the connector's secrets cannot be opened", "secrets-unavailable") from None
    return _Delivery(record, cls, [s.get_secret_value().encode() for s in webhook_secrets], config_secrets)


def _prepare_delivery(runtime: Runtime, slug: str, tenant_id: str, name: str | None) -> _Delivery:
    """The connector and its secrets, through the short-lived lookup cache (a 404 is never cached)."""
    delivery: _Delivery = runtime.lookups.get(
        (plugin_name(slug), tenant_id, name), lambda: _load_delivery(runtime, slug, tenant_id, name)
    )
    if not delivery.webhook_secrets:
        raise Problem(403, "no-signing-secret", "no webhook signing secret is configured for this connector")
    return delivery


def _fail(runtime: Runtime, record: ConnectorRecord, error: str) -> None:
    runtime.store.set_state(record.tenant, record.name, ConnectorState.FAILED, error)
    runtime.lookups.invalidate(record.tenant)


def _refuse_unusable_tenant(runtime: Runtime, tenant: str) -> None:
    # The gate's cached tenant lookup, as for tokens: a suspension is seen within api.client_cache_ttl_s.
    try:
        usable = tenant_usable(runtime.gate.tenants, tenant)
    except PyMongoError:
        raise runtime.unavailable("the tenant's state cannot be read now") from None
    if not usable:
        log.info("connect.webhook_tenant_refused", extra={"tenant": tenant})
        raise tenant_refused("the tenant is suspended or being deleted")


@dataclass(frozen=True)
class _Read:
    """A delivery as its plugin read it: the ``payload``, or the ``fault`` ``read`` raised; remembered by ``key``."""

    key: str
    payload: Any = None
    fault: InvalidPayload | None = None


def _read(connector: WebhookConnector[Any, Any], request: InboundRequest) -> _Read:
    """The plugin's one ``read`` of the delivery and its dedup key; a body it cannot read is keyed by its content."""
    try:
        payload = connector.read(request)
    except InvalidPayload as exc:
        return _Read(parsed_key(request), fault=exc)
    # "k:" keeps a plugin's key apart from the content key of a body it could not read (and is how keys were stored).
    return _Read(f"k:{connector.dedup_key(payload, request)}", payload)


@dataclass(frozen=True)
class _Outcome:
    """What became of a delivery that was taken (every refusal raises its ``Problem`` instead): ``status`` names its
    answer's code in ``_ANSWER_CODES``; ``event_ids``, the events published, are remembered with its dedup key."""

    status: Literal["duplicate", "accepted", "dead_lettered", "dead_letter_dropped"]
    body: dict[str, Any] = field(default_factory=dict)
    event_ids: list[str] = field(default_factory=list)


_ANSWER_CODES = {"duplicate": 200, "accepted": 202, "dead_lettered": 202, "dead_letter_dropped": 202}


def _handle(runtime: Runtime, delivery: _Delivery, request: InboundRequest, path: str) -> JSONResponse:
    """One delivery through the intake's steps, in the order the module's docstring numbers them."""
    record = delivery.record
    connector = _connector(runtime, delivery)
    _authenticate(connector, request, delivery)
    _refuse_unusable_tenant(runtime, record.tenant)
    _require_json(request)
    read = _read(connector, request)
    if runtime.deliveries.seen(record.tenant, record.name, read.key):
        log.info("connect.webhook_duplicate", extra={"plugin": record.type, "connector": record.name})
        outcome = _Outcome("duplicate")
    else:
        outcome = _take(runtime, connector, record, read, request, f"webhook:{path}")
        runtime.deliveries.record(record.tenant, record.name, read.key, outcome.status, outcome.event_ids)
    return JSONResponse({"status": outcome.status, **outcome.body}, status_code=_ANSWER_CODES[outcome.status])


def _connector(runtime: Runtime, delivery: _Delivery) -> WebhookConnector[Any, Any]:
    """The delivery's connector, if it runs: 503 when it is paused or failed, or its configuration no longer loads
    (the connector is marked FAILED)."""
    record = delivery.record
    if record.state is not ConnectorState.RUNNING:
        raise runtime.unavailable(f"connector is {record.state.value}", "connector-not-running")
    try:
        connector = instantiate(delivery.cls, record, delivery.config_secrets)
    except PluginUnavailable as exc:
        _fail(runtime, record, f"plugin-unavailable: {exc}")
        raise runtime.unavailable("connector configuration is invalid", "connector-failed") from exc
    assert isinstance(connector, WebhookConnector)  # noqa: S101 - _resolve admits webhook types only
    return connector


def _authenticate(connector: WebhookConnector[Any, Any], request: InboundRequest, delivery: _Delivery) -> None:
    """The plugin's signature check against the active secrets: 401, or 400 for a body it cannot read at all."""
    try:
        connector.verify(request, delivery.webhook_secrets)
    except AuthenticationFailed as exc:
        log.info("connect.webhook_rejected", extra={"plugin": delivery.record.type, "connector": delivery.record.name})
        raise Problem(401, "invalid-signature", str(exc) or "signature check failed", field="signature") from None
    except InvalidPayload as exc:
        # A verifier may find the body unusable before it can check a signature (e.g. Monte Carlo's BodyNotJson):
        # a malformed request. It is not authenticated, so it is not dead-lettered (anyone could fill the DLQ).
        raise Problem(400, "malformed-body", str(exc), field=exc.field) from None
    except ValueError:
        # A verifier that must parse the body to compute the signature (Monte Carlo signs a re-encoding of the JSON)
        # cannot vouch for a body it cannot parse: that is an authentication failure, not a server error.
        raise Problem(401, "invalid-signature", "the signature could not be checked", field="signature") from None


def _require_json(request: InboundRequest) -> None:
    # Parsed once: the verifier and the plugin's read take the same value.
    parsed = request.parsed
    if parsed.error is not None:
        raise Problem(400, "malformed-json", f"the body is {NotJson(parsed.error, parsed.position)}", field="body")


def _take(
    runtime: Runtime,
    connector: WebhookConnector[Any, Any],
    record: ConnectorRecord,
    read: _Read,
    request: InboundRequest,
    origin: str,
) -> _Outcome:
    """Map, transform and publish an authenticated delivery; under ``errors.tolerance=none`` a record that fails
    marks the connector FAILED and the answer is 503."""
    policy = runtime.policy(record)
    try:
        events = _map(connector, read, request)
        if isinstance(events, InvalidPayload):
            return _dead_letter(runtime, policy, record, request, origin, events)
        prepared = prepare(((e, origin) for e in events), runtime.chain(record), policy)
    except TaskFailed as exc:
        _fail(runtime, record, f"record-failed: {exc}")
        log.warning("connect.task_failed", extra={"plugin": record.type, "connector": record.name, "stage": exc.stage})
        raise runtime.unavailable(
            "the connector failed on this delivery (errors.tolerance=none)", "connector-failed"
        ) from None
    return _accept(runtime, policy, record, prepared)


def _map(
    connector: WebhookConnector[Any, Any], read: _Read, request: InboundRequest
) -> Sequence[CloudEvent] | InvalidPayload:
    """The delivery's events, or why it cannot be mapped: its ``read`` refused it, or ``to_events`` did."""
    if read.fault is not None:
        return read.fault
    try:
        return connector.to_events(read.payload, request)
    except InvalidPayload as exc:
        return exc


def _dead_letter(
    runtime: Runtime,
    policy: ErrorPolicy,
    record: ConnectorRecord,
    request: InboundRequest,
    origin: str,
    exc: InvalidPayload,
) -> _Outcome:
    """The raw body of an authenticated but unmappable delivery to the DLQ topic, unless the connector is over its
    dead-letter cap (then dropped, counted). Either way the delivery is remembered, so its resends cost nothing."""
    headers = [(name, request.headers[name].encode()) for name in ("content-type",) if name in request.headers]
    letter = policy.dead_letter(exc, stage="mapping", value=request.body, original_headers=headers, origin=origin)
    letters = policy.admit([letter])
    publish_confirmed(runtime, Batch(record.tenant, dead=letters), source="webhook")
    policy.count(letters)
    status: Literal["dead_lettered", "dead_letter_dropped"] = "dead_lettered" if letters else "dead_letter_dropped"
    log.info(
        "connect.webhook_dead_lettered",
        extra={"plugin": record.type, "connector": record.name, "field": exc.field, "outcome": status},
    )
    return _Outcome(status, {"field": exc.field})


def _accept(runtime: Runtime, policy: ErrorPolicy, record: ConnectorRecord, prepared: Prepared) -> _Outcome:
    """Publish the delivery's events and the dead letters of its records that failed a transform."""
    dead = policy.admit(prepared.dead)
    publish_confirmed(runtime, Batch(record.tenant, prepared.routed, dead=dead), source="webhook")
    policy.count(dead)
    event_ids = [r.event.id for r in prepared.routed]
    log.info(
        "connect.webhook_accepted",
        extra={
            "plugin": record.type,
            "connector": record.name,
            "events": len(prepared.routed),
            "dead_lettered": len(dead),
            "dropped": prepared.dropped,
        },
    )
    body = {"events": event_ids, "dead_lettered": len(dead), "dropped": prepared.dropped}
    return _Outcome("accepted", body, event_ids)


def _process(
    runtime: Runtime, delivery: _Delivery, request: InboundRequest, path: str, traceparent: str | None
) -> JSONResponse:
    attributes = {"metalake.tenant": delivery.record.tenant, "metalake.plugin": delivery.record.type}
    with bind_tenant(delivery.record.tenant), intake_span("connect.webhook", traceparent, attributes) as span:
        return answer_traceparent(_handle(runtime, delivery, request, path), span)


async def _receive(runtime: Runtime, request: Request, slug: str, tenant_id: str, name: str | None) -> JSONResponse:
    delivery = await run_in_threadpool(_prepare_delivery, runtime, slug, tenant_id, name)
    body = await read_limited(request, runtime.settings.connect.webhook_max_body_bytes)
    inbound = InboundRequest(
        headers={k.lower(): v for k, v in request.headers.items()}, body=body, received_at=datetime.now(UTC)
    )
    return await run_in_threadpool(
        _process, runtime, delivery, inbound, request.url.path, request.headers.get("traceparent")
    )


@router.post("/webhooks/{slug}/{tenant_id}", status_code=202)
async def receive(slug: str, tenant_id: str, request: Request, runtime: RuntimeDep) -> JSONResponse:
    """Receive one delivery for the tenant's only connector of the slug's type."""
    return await _receive(runtime, request, slug, tenant_id, None)


@router.post("/webhooks/{slug}/{tenant_id}/{name}", status_code=202)
async def receive_named(slug: str, tenant_id: str, name: str, request: Request, runtime: RuntimeDep) -> JSONResponse:
    """Receive one delivery for a named connector (tenants with several of one type)."""
    return await _receive(runtime, request, slug, tenant_id, name)
