"""A tenant's outbound subscriptions: Slack, Jira and signed-webhook destinations with filters, and a test send.

Stored in the control plane (``control.subscriptions``), where the outbound runtime reads them (cached for
``outbound.subscriptions_ttl_s``); validated with the destinations' specs, so the API loads no vendor SDK. A test send
is a request the outbound runtime delivers (``control.subscriptions.testsend``). Reads need ``tenant:read`` (or
``tenant:admin``), changes ``tenant:admin``. Secrets (Slack token, Jira API token, webhook signing keys) are
write-only: answers name the stored secret fields, never their values. Writing a webhook key with a new ``key_id``
starts a rotation: the previous key keeps signing next to it until the current key is written again. See
docs/outbound.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from api.context import ContextDep
from api.deps import TenantAdmin, TenantReader
from api.paging import DEFAULT_LIMIT, CursorParam, Limit, Page, decode_cursor, encode_cursor
from api.problems import Problem
from api.services import audit
from api.services.events import PublisherDep
from control.subscriptions.destinations import DestinationSpec, destination_specs
from control.subscriptions.filters import Filters
from control.subscriptions.store import NAME_PATTERN, Subscription, SubscriptionStore
from control.subscriptions.testsend import SubscriptionTest, TestOutcome, TestOutcomes
from metalake.events.validation import InvalidData
from tenants.naming import CONTROL_DATABASE, OUTBOUND_TESTS_TOPIC

SubscriptionName = Annotated[
    str, Path(pattern=NAME_PATTERN.pattern, description="The subscription's name within the tenant.")
]
TestId = Annotated[str, Path(min_length=1, max_length=64, description="The test's id (from the test send's answer).")]
PREFIX = "/v1/tenants/{tenant}/subscriptions"

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid access token."},
    403: {"description": "The token lacks the scope."},
    404: {"description": "No such tenant or subscription (another tenant's objects answer 404 too)."},
    422: {"description": "Invalid request, configuration or secrets (problem+json naming the field)."},
}


def _errors(*extra: tuple[int, str]) -> dict[int | str, dict[str, Any]]:
    return {**_ERRORS, **{status: {"description": text} for status, text in extra}}


def destinations() -> dict[str, type[DestinationSpec]]:
    """The installed destination kinds (specs of the ``metalake.outbound`` entry points, no vendor SDK). A
    dependency, so tests may swap it."""
    return destination_specs()


def subscription_store(ctx: ContextDep) -> SubscriptionStore:
    return SubscriptionStore(ctx.mongo[CONTROL_DATABASE])


def test_outcomes(ctx: ContextDep) -> TestOutcomes:
    # Test outcomes live beside the delivery ledger and expire with it.
    retention = timedelta(seconds=ctx.settings.outbound.ledger_retention_s)
    return TestOutcomes(ctx.mongo[CONTROL_DATABASE], retention)


DestinationsDep = Annotated[dict[str, type[DestinationSpec]], Depends(destinations)]
StoreDep = Annotated[SubscriptionStore, Depends(subscription_store)]
OutcomesDep = Annotated[TestOutcomes, Depends(test_outcomes)]

router = APIRouter(tags=["subscriptions"])

_SLACK_EXAMPLE: dict[str, Any] = {
    "name": "pii-alerts",
    "destination": "slack",
    "config": {"channel": "C0123"},
    "secrets": {"token": "xoxb-…"},
    "filters": {"event_types": ["classification.*", "propagation.completed"], "tags": ["PII", "GDPR"]},
}

# -- models -----------------------------------------------------------------------------------------------------------


class SubscriptionCreate(BaseModel):
    """A destination and what it wants. ``config`` and ``secrets`` follow the destination type: slack
    (``channel``; secret ``token``), jira (``server``, ``email``, ``project``, ``issue_type``, ``tags``; secret
    ``api_token``), webhook (``url``; secrets ``key_id``, ``secret``)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"example": _SLACK_EXAMPLE})

    name: str = Field(pattern=NAME_PATTERN.pattern)
    destination: str = Field(min_length=1, max_length=64)
    config: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, SecretStr | None] = Field(default_factory=dict, description="Write-only.")
    filters: Filters = Field(default_factory=Filters)
    enabled: bool = True


class SubscriptionUpdate(BaseModel):
    """Fields left out keep their value. ``secrets`` are merged into the stored ones."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"example": {"enabled": False}})

    config: dict[str, Any] | None = None
    secrets: dict[str, SecretStr | None] | None = Field(default=None, description="Write-only.")
    filters: Filters | None = None
    enabled: bool | None = None


class SubscriptionView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "tenant": "acme",
                "name": "pii-alerts",
                "destination": "slack",
                "config": {"channel": "C0123"},
                "filters": {"event_types": ["classification.*"], "tags": ["PII"], "assets": []},
                "enabled": True,
                "secret_fields": ["token"],
                "created_at": "2026-11-22T03:00:00Z",
                "updated_at": "2026-11-22T03:00:00Z",
            }
        }
    )

    tenant: str
    name: str
    destination: str
    config: dict[str, Any]
    filters: Filters
    enabled: bool
    secret_fields: list[str] = Field(description="Names of the stored secrets; values are never returned.")
    created_at: datetime | None = None
    updated_at: datetime | None = None


class TestSendView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"example": {"status": "delivered", "detail": "slack", "refs": {"ts": "1700000001.000100"}}}
    )

    status: str = Field(description="delivered or skipped")
    detail: str
    refs: dict[str, str]


class TestStatusView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "id": "0b6f1c1e-3f4a-4d2b-9a8e-5c7d6e5f4a3b",
                "subscription": "pii-alerts",
                "status": "delivered",
                "detail": "slack",
                "refs": {"channel": "C0123", "ts": "1700000001.000100"},
                "requested_at": "2026-11-22T03:00:00Z",
                "finished_at": "2026-11-22T03:00:01Z",
            }
        }
    )

    id: str
    subscription: str
    status: Literal["pending", "delivered", "skipped", "failed"]
    detail: str = Field(description="The destination's answer (never a secret); empty while pending.")
    refs: dict[str, str]
    requested_at: datetime | None = None
    finished_at: datetime | None = None


# -- helpers ----------------------------------------------------------------------------------------------------------


def _view(sub: Subscription) -> SubscriptionView:
    return SubscriptionView(
        tenant=sub.tenant,
        name=sub.name,
        destination=sub.destination,
        config=dict(sub.config),
        filters=sub.filters,
        enabled=sub.enabled,
        secret_fields=list(sub.secret_fields),
        created_at=sub.created_at,
        updated_at=sub.updated_at,
    )


def _status_view(outcome: TestOutcome) -> TestStatusView:
    return TestStatusView(
        id=outcome.id,
        subscription=outcome.subscription,
        status=outcome.status,
        detail=outcome.detail,
        refs=dict(outcome.refs),
        requested_at=outcome.requested_at,
        finished_at=outcome.finished_at,
    )


def _invalid(prefix: str, exc: ValidationError) -> Problem:
    first = exc.errors()[0]
    field = "/".join([prefix, *(str(p) for p in first["loc"])])
    # pydantic's msg names the rule, never the value (which may be a secret).
    return Problem(422, f"invalid-{prefix}", f"{field}: {first['msg']}", field=field)


def _spec(specs: Mapping[str, type[DestinationSpec]], name: str) -> type[DestinationSpec]:
    if name not in specs:
        raise Problem(
            422, "unknown-destination", f"destination: one of {', '.join(sorted(specs))}", field="destination"
        )
    return specs[name]


def _config(spec: type[DestinationSpec], config: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return spec.config(config).model_dump(mode="json")
    except ValidationError as exc:
        raise _invalid("config", exc) from None


def _plain(values: Mapping[str, SecretStr | None]) -> dict[str, str]:
    return {k: v.get_secret_value() for k, v in values.items() if v is not None}


def _secrets(spec: type[DestinationSpec], stored: Mapping[str, str], update: Mapping[str, str]) -> dict[str, str]:
    try:
        return spec.secrets(stored, update)
    except ValidationError as exc:
        raise _invalid("secrets", exc) from None


def _get(store: SubscriptionStore, tenant: str, name: str) -> Subscription:
    sub = store.get(tenant, name)
    if sub is None:
        raise Problem(404, "not-found", "no such subscription", field="name")
    return sub


# -- routes -----------------------------------------------------------------------------------------------------------


@router.post(
    PREFIX,
    status_code=201,
    summary="Create a subscription",
    response_model=SubscriptionView,
    responses=_errors((409, "A subscription of that name exists.")),
)
def create_subscription(
    tc: TenantAdmin,
    body: SubscriptionCreate,
    store: StoreDep,
    specs: DestinationsDep,
    ctx: ContextDep,
    response: Response,
) -> SubscriptionView:
    """Create a destination; the runtime picks it up within its cache TTL."""
    spec = _spec(specs, body.destination)
    config = _config(spec, body.config)
    secrets = _secrets(spec, {}, _plain(body.secrets))
    sub = store.create(tc.tenant, body.name, body.destination, config, body.filters, secrets, enabled=body.enabled)
    if sub is None:
        raise Problem(409, "subscription-exists", "a subscription of that name exists", field="name")
    response.headers["Location"] = f"/v1/tenants/{tc.tenant}/subscriptions/{body.name}"
    audit.record(ctx, tc.tenant, tc.principal, "subscription.create", body.name, audit.DONE)
    return _view(sub)


@router.get(PREFIX, summary="List subscriptions", response_model=Page[SubscriptionView], responses=_errors())
def list_subscriptions(
    tc: TenantReader, store: StoreDep, limit: Limit = DEFAULT_LIMIT, cursor: CursorParam = None
) -> Page[SubscriptionView]:
    """The tenant's subscriptions by name (secrets by field name only)."""
    resume = decode_cursor("subscriptions", cursor, 1)
    subs = store.page(tc.tenant, after=resume[0] if resume else None, limit=limit + 1)
    page = subs[:limit]
    more = len(subs) > limit
    return Page[SubscriptionView](
        items=[_view(s) for s in page],
        next_cursor=encode_cursor("subscriptions", [page[-1].name]) if more and page else None,
    )


@router.get(PREFIX + "/{name}", summary="Get a subscription", response_model=SubscriptionView, responses=_errors())
def get_subscription(tc: TenantReader, name: SubscriptionName, store: StoreDep) -> SubscriptionView:
    """The configuration, filters and the names of the stored secrets."""
    return _view(_get(store, tc.tenant, name))


@router.patch(PREFIX + "/{name}", summary="Change a subscription", response_model=SubscriptionView, responses=_errors())
def update_subscription(
    tc: TenantAdmin,
    name: SubscriptionName,
    body: SubscriptionUpdate,
    store: StoreDep,
    specs: DestinationsDep,
    ctx: ContextDep,
) -> SubscriptionView:
    """Change configuration, filters, secrets (merged; a new webhook ``key_id`` starts a rotation) or ``enabled``."""
    current = _get(store, tc.tenant, name)
    spec = _spec(specs, current.destination)
    config = _config(spec, body.config) if body.config is not None else None
    secrets = None
    if body.secrets is not None:
        secrets = _secrets(spec, store.stored_secrets(tc.tenant, name), _plain(body.secrets))
    updated = store.update(tc.tenant, name, config=config, filters=body.filters, enabled=body.enabled, secrets=secrets)
    if updated is None:
        raise Problem(404, "not-found", "no such subscription", field="name")
    audit.record(ctx, tc.tenant, tc.principal, "subscription.update", name, audit.DONE)
    return _view(updated)


@router.delete(PREFIX + "/{name}", status_code=204, summary="Delete a subscription", responses=_errors())
def delete_subscription(tc: TenantAdmin, name: SubscriptionName, store: StoreDep, ctx: ContextDep) -> Response:
    """Delete the subscription and its secrets; pending retries for it are dropped by the runtime."""
    if not store.delete(tc.tenant, name):
        raise Problem(404, "not-found", "no such subscription", field="name")
    audit.record(ctx, tc.tenant, tc.principal, "subscription.delete", name, audit.DONE)
    return Response(status_code=204)


def _wait(outcomes: TestOutcomes, tenant: str, test_id: str, wait_s: float) -> TestOutcome | None:
    """The test's outcome once the runtime recorded it, or ``None`` after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    pause = 0.05
    while True:
        outcome = outcomes.get(tenant, test_id)
        if outcome is not None and outcome.status != "pending":
            return outcome
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.5)


@router.post(
    PREFIX + "/{name}/test",
    summary="Send a test message",
    response_model=TestSendView,
    responses={
        **_errors(
            (502, "The destination refused or could not be reached (problem+json says why)."),
            (503, "The request was not confirmed by Kafka; nothing was sent."),
        ),
        202: {"description": "Requested; no outcome in time: poll the Location.", "model": TestStatusView},
    },
)
def test_subscription(
    tc: TenantAdmin,
    name: SubscriptionName,
    store: StoreDep,
    specs: DestinationsDep,
    outcomes: OutcomesDep,
    publisher: PublisherDep,
    ctx: ContextDep,
) -> TestSendView | JSONResponse:
    """Have the outbound runtime deliver a synthetic "tag added" change for a test asset to this subscription, once,
    with its configuration and secrets; filters are not applied. The request travels through Kafka
    (``metalake.outbound.tests``); the answer waits up to ``api.subscription_test_wait_s`` for the outcome: 200 with
    it, 502 if the destination failed, else 202 with the test's id and a Location to poll."""
    sub = _get(store, tc.tenant, name)
    _spec(specs, sub.destination)
    tag = (sub.config.get("tags") or sub.filters.tags or ("PII",))[0]
    test = SubscriptionTest(tenant=tc.tenant, subscription=name, tag=str(tag), actor=tc.principal.subject)
    try:
        event = test.event()
        test.change()
    except InvalidData:
        # No change the pipeline publishes could carry this tag: a test with it would prove nothing.
        raise Problem(422, "invalid-tag", "the subscription's first tag is not a tag name", field="tags") from None
    requested = outcomes.pending(test)
    try:
        publisher.publish(event, OUTBOUND_TESTS_TOPIC)
    except Problem:
        outcomes.finish(tc.tenant, test.id, "failed", "not confirmed by Kafka; nothing was sent")
        raise
    outcome = _wait(outcomes, tc.tenant, test.id, ctx.settings.api.subscription_test_wait_s)
    if outcome is None:
        audit.record(ctx, tc.tenant, tc.principal, "subscription.test", name, audit.ACCEPTED)
        location = f"{PREFIX.format(tenant=tc.tenant)}/{name}/tests/{test.id}"
        view = _status_view(requested).model_dump(mode="json")
        return JSONResponse(view, status_code=202, headers={"Location": location})
    if outcome.status == "failed":
        audit.record(ctx, tc.tenant, tc.principal, "subscription.test", name, audit.FAILED)
        raise Problem(502, "delivery-failed", outcome.detail)
    audit.record(ctx, tc.tenant, tc.principal, "subscription.test", name, audit.DONE)
    return TestSendView(status=outcome.status, detail=outcome.detail, refs=dict(outcome.refs))


@router.get(
    PREFIX + "/{name}/tests/{test_id}",
    summary="A test message's outcome",
    response_model=TestStatusView,
    responses=_errors(),
)
def get_subscription_test(
    tc: TenantReader, name: SubscriptionName, test_id: TestId, outcomes: OutcomesDep
) -> TestStatusView:
    """``pending`` until the outbound runtime tried it, then ``delivered``, ``skipped`` or ``failed`` with the
    destination's answer. Kept as long as the delivery ledger (``outbound.ledger_retention_s``)."""
    outcome = outcomes.get(tc.tenant, test_id)
    if outcome is None or outcome.subscription != name:
        raise Problem(404, "not-found", "no such test of this subscription", field="test_id")
    return _status_view(outcome)
