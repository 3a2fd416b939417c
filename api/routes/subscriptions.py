"""A tenant's outbound subscriptions: destinations (``metalake.outbound`` kinds) with filters, and a test send.

Stored in the control plane (``control.subscriptions``), where the outbound runtime reads them (cached for
``outbound.subscriptions_ttl_s``); validated with the destinations' specs, so the API loads no vendor SDK. A test send
is a request the outbound runtime delivers (``control.subscriptions.testsend``). Reads need ``tenant:read`` (or
``tenant:admin``), changes ``tenant:admin``. Secrets (Slack token, Jira API token, webhook signing keys) are
write-only: answers name the stored secret fields, never their values. Writing a webhook key with a new ``key_id``
starts a rotation: the previous key keeps signing next to it until the current key is written again. The rules and
the test send are ``api.services.subscriptions``, the bodies ``api.schemas.subscriptions``. See docs/outbound.md.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Response
from fastapi.responses import JSONResponse

from api import quotas
from api.context import ApiContext, ContextDep
from api.deps import TenantAdmin, TenantReader
from api.paging import DEFAULT_LIMIT, CursorParam, Limit, decode_cursor, encode_cursor
from api.problems import Problem
from api.schemas.common import Page
from api.schemas.subscriptions import (
    SubscriptionCreate,
    SubscriptionUpdate,
    SubscriptionView,
    TestSendView,
    TestStatusView,
)
from api.security import TenantContext
from api.services import audit, subscriptions
from api.services.events import PublisherDep, TenantPublisher
from api.workpool import SUBSCRIPTION_TEST
from control.subscriptions.destinations import DestinationSpec, destination_specs
from control.subscriptions.store import NAME_PATTERN, Subscription, SubscriptionStore
from control.subscriptions.testsend import TestOutcome, TestOutcomes
from metalake.sealing import sealer_for
from tenants.naming import CONTROL_DATABASE

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
    return SubscriptionStore(ctx.mongo[CONTROL_DATABASE], sealer_for(ctx.settings))


def test_outcomes(ctx: ContextDep) -> TestOutcomes:
    # Test outcomes live beside the delivery ledger and expire with it.
    retention = timedelta(seconds=ctx.settings.outbound.ledger_retention_s)
    return TestOutcomes(ctx.mongo[CONTROL_DATABASE], retention)


DestinationsDep = Annotated[dict[str, type[DestinationSpec]], Depends(destinations)]
StoreDep = Annotated[SubscriptionStore, Depends(subscription_store)]
OutcomesDep = Annotated[TestOutcomes, Depends(test_outcomes)]

router = APIRouter(tags=["subscriptions"])

# -- views ----------------------------------------------------------------------------------------------------------


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


# -- routes -----------------------------------------------------------------------------------------------------------


@router.post(
    PREFIX,
    status_code=201,
    summary="Create a subscription",
    response_model=SubscriptionView,
    responses=_errors((409, "A subscription of that name exists, or the tenant holds its cap (`quota-exceeded`).")),
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
    with quotas.claim(ctx, tc.tenant, quotas.SUBSCRIPTIONS_KIND):
        sub = subscriptions.create(
            store,
            specs,
            tc.tenant,
            body.name,
            body.destination,
            config=body.config,
            secrets=body.secrets,
            filters=body.filters,
            enabled=body.enabled,
        )
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
    return _view(subscriptions.get(store, tc.tenant, name))


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
    updated = subscriptions.update(
        store,
        specs,
        tc.tenant,
        name,
        config=body.config,
        secrets=body.secrets,
        filters=body.filters,
        enabled=body.enabled,
    )
    audit.record(ctx, tc.tenant, tc.principal, "subscription.update", name, audit.DONE)
    return _view(updated)


@router.delete(PREFIX + "/{name}", status_code=204, summary="Delete a subscription", responses=_errors())
def delete_subscription(tc: TenantAdmin, name: SubscriptionName, store: StoreDep, ctx: ContextDep) -> Response:
    """Delete the subscription and its secrets; pending retries for it are dropped by the runtime."""
    subscriptions.delete(store, tc.tenant, name)
    audit.record(ctx, tc.tenant, tc.principal, "subscription.delete", name, audit.DONE)
    return Response(status_code=204)


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
async def test_subscription(  # noqa: PLR0913
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
    # Waits seconds for the outcome: on the test sends' own pool, within the tenant's share (429/503 at once beyond).
    test = partial(_test_send, tc, name, store, specs, outcomes, publisher)
    return await ctx.pools.run(SUBSCRIPTION_TEST, tc.tenant, test, ctx)


def _test_send(  # noqa: PLR0913
    tc: TenantContext,
    name: str,
    store: SubscriptionStore,
    specs: dict[str, type[DestinationSpec]],
    outcomes: TestOutcomes,
    publisher: TenantPublisher,
    ctx: ApiContext,
) -> TestSendView | JSONResponse:
    sub = subscriptions.get(store, tc.tenant, name)
    requested = subscriptions.request_test(specs, outcomes, publisher, sub, tc.principal.subject)
    outcome = subscriptions.wait(outcomes, tc.tenant, requested.id, ctx.settings.api.subscription_test_wait_s)
    if outcome is None:
        audit.record(ctx, tc.tenant, tc.principal, "subscription.test", name, audit.ACCEPTED)
        location = f"{PREFIX.format(tenant=tc.tenant)}/{name}/tests/{requested.id}"
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
    return _status_view(subscriptions.find_test(outcomes, tc.tenant, name, test_id))
