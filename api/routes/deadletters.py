"""A tenant's dead letters: list and inspect what the connector worker and the outbound runtime could not process,
and replay a letter once its cause is fixed. See docs/dead-letters.md.

Every route needs ``tenant:admin``: a letter's payload is the tenant's data as a sender sent it (redacted, but more
than ``tenant:read`` shows elsewhere), and a replay publishes into the tenant's pipeline. Another tenant's letter
answers 404, like a missing one, and so does a letter of an earlier registration of the tenant id or one naming an
asset the tenant erased (``api.services.dead_letters.scope``). Each replay request is audited (``dead_letter.replay``:
the letter id as target, the outcome as result: ``done``, ``refused`` or ``duplicate``), including the refused and
the repeated ones.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query

from api.context import ApiContext, ContextDep
from api.deps import ConnectorStoreDep, TenantAdmin
from api.paging import DEFAULT_LIMIT, CursorParam, Limit, decode_cursor, encode_cursor
from api.problems import Problem
from api.schemas.deadletters import DeadLetterPage, DeadLetterView, ReplayResult
from api.security import TenantContext
from api.services import audit
from api.services.dead_letters.letters import DeadLetterTopics
from api.services.dead_letters.replay import Refused, ReplayLog
from api.services.dead_letters.scope import LetterScopes
from api.services.dead_letters.service import DeadLetters, Filters, Stage
from api.services.events import PublisherDep, TenantPublisher
from api.workpool import DEAD_LETTERS
from control.connectors import registry
from control.subscriptions.store import SubscriptionStore
from metalake.sealing import sealer_for
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantDirectory, TenantRegistry

router = APIRouter(tags=["dead-letters"])
PREFIX = "/v1/tenants/{tenant}/dead-letters"
_CURSOR_KIND = "dead-letters"

LetterId = Annotated[
    str,
    Path(
        pattern=r"^(connectors-|outbound-|stream-priority-|stream-bulk-)\d{1,6}-\d{1,19}$",
        description="The letter's id: `<medium>-<partition>-<offset>` (`connectors-0-42`, `outbound-1-7`) or "
        "`stream-<priority|bulk>-<partition>-<offset>` for a streaming job's `_dlq` row.",
    ),
]
_NAME = r"^[a-z0-9][a-z0-9_-]{0,62}$"
_ERROR_CLASS = r"^[A-Za-z_][A-Za-z0-9_.]{0,99}$"

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid access token."},
    403: {"description": "The token lacks `tenant:admin`."},
    404: {"description": "No such tenant or dead letter (another tenant's letters answer 404 too)."},
    503: {"description": "Kafka did not answer in time (problem+json with Retry-After)."},
}


def dead_letters(ctx: ContextDep, connectors: ConnectorStoreDep) -> DeadLetters:
    database = ctx.mongo[CONTROL_DATABASE]
    tenants = TenantRegistry(database)
    return DeadLetters(
        ctx.settings,
        DeadLetterTopics(ctx.settings),
        ReplayLog(database, ctx.settings.dead_letters.replay_claim_s),
        connectors,
        SubscriptionStore(database, sealer_for(ctx.settings)),
        registry.plugins(),
        TenantDirectory(tenants, ctx.settings.lake_root).names,
        LetterScopes(database, ctx.settings, tenants),
    )


DeadLettersDep = Annotated[DeadLetters, Depends(dead_letters)]


@router.get(PREFIX, summary="List dead letters", response_model=DeadLetterPage, responses=_ERRORS)
async def list_dead_letters(  # noqa: PLR0913
    tc: TenantAdmin,
    letters: DeadLettersDep,
    ctx: ContextDep,
    stage: Annotated[
        Stage | None,
        Query(description="`connectors` (both worker stages), `mapping`, `transform`, `outbound` or `stream`."),
    ] = None,
    connector: Annotated[str | None, Query(pattern=_NAME, description="Only this connector's letters.")] = None,
    error_class: Annotated[
        str | None, Query(pattern=_ERROR_CLASS, description="Only letters of this error class, e.g. `InvalidPayload`.")
    ] = None,
    since: Annotated[datetime | None, Query(description="Dead-lettered at or after (ISO 8601 with offset).")] = None,
    until: Annotated[datetime | None, Query(description="Dead-lettered before (ISO 8601 with offset).")] = None,
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
) -> DeadLetterPage:
    """The tenant's dead letters, newest first: why each failed (error class, reason, field), where it came from and
    its replay if any. No payloads here: inspect a letter for its record. `truncated` says older letters were not
    read (each DLQ topic is read back `dead_letters.scan_max_records` records at most)."""
    for name, value in (("since", since), ("until", until)):
        if value is not None and value.tzinfo is None:
            raise Problem(422, "invalid-time", f"{name}: give a time zone offset", field=name)
    after = decode_cursor(_CURSOR_KIND, cursor, 2)
    filters = Filters(stage, connector, error_class, since, until)
    # A Kafka scan: on the dead letters' own pool, within the tenant's share of it (429/503 at once beyond).
    listed = await ctx.pools.run(
        DEAD_LETTERS, tc.tenant, letters.page, tc.tenant, filters, limit, (after[0], after[1]) if after else None
    )
    return DeadLetterPage.of(listed, encode_cursor(_CURSOR_KIND, listed.resume) if listed.resume else None)


@router.get(PREFIX + "/{letter_id}", summary="Inspect a dead letter", response_model=DeadLetterView, responses=_ERRORS)
async def get_dead_letter(
    tc: TenantAdmin, letter_id: LetterId, letters: DeadLettersDep, ctx: ContextDep
) -> DeadLetterView:
    """One letter: its context, the original record's key and allow-listed headers, and its payload as parsed JSON
    with every secret-named key and credential-like string redacted (a body that is not JSON, or too large, is
    shown by size and SHA-256 only). Signature headers, tokens and webhook secrets are never shown."""
    stored, replay = await ctx.pools.run(DEAD_LETTERS, tc.tenant, letters.inspect, tc.tenant, letter_id)
    return DeadLetterView.of(stored, replay, letters.settings.dead_letters.payload_max_bytes)


@router.post(
    PREFIX + "/{letter_id}/replay",
    summary="Replay a dead letter",
    response_model=ReplayResult,
    responses={
        **_ERRORS,
        409: {"description": "The letter cannot be replayed now: problem+json naming the field at fault."},
    },
)
async def replay_dead_letter(
    tc: TenantAdmin, letter_id: LetterId, letters: DeadLettersDep, publisher: PublisherDep, ctx: ContextDep
) -> ReplayResult:
    """Send the letter back through the stage that refused it, with that stage's current configuration: a
    connector's letter is mapped and transformed again (e.g. after a Monte Carlo warehouse was added to the
    connector's map) and its events published; an outbound letter is handed to the outbound runtime for one more
    delivery to its subscription as it is now. Idempotent: a replayed letter answers `already_replayed` and publishes
    nothing. A letter that still fails answers 409 with the reason and field, and may be replayed again later."""
    return await ctx.pools.run(DEAD_LETTERS, tc.tenant, _replay, tc, letter_id, letters, publisher, ctx)


def _replay(
    tc: TenantContext, letter_id: str, letters: DeadLetters, publisher: TenantPublisher, ctx: ApiContext
) -> ReplayResult:
    try:
        result = letters.replay(tc.tenant, letter_id, tc.principal.subject, publisher)
    except Refused as exc:
        audit.record(ctx, tc.tenant, tc.principal, "dead_letter.replay", letter_id, audit.REFUSED)
        raise Problem(409, "replay-refused", exc.reason, field=exc.field) from None
    if result.outcome == "replayed":
        counts = {"published": result.published, "dropped": result.dropped}
        audit.record(ctx, tc.tenant, tc.principal, "dead_letter.replay", letter_id, audit.DONE, counts=counts)
    else:
        audit.record(ctx, tc.tenant, tc.principal, "dead_letter.replay", letter_id, "duplicate")
    return ReplayResult.of(result)
