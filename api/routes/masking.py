"""The tenant's PII masks for its own warehouses, generated from its PII tags: ``GET .../masking/snowflake``.

Answers a SQL script (``application/sql``) for one Snowflake account: masking policies by column type and their
assignment to every column tagged PII, directly or along lineage, and UNSET for columns whose tag was withdrawn
(docs/snowflake.md). Needs ``tenant:read`` (or ``tenant:admin``); it reads only, so nothing is audited.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response

from api.context import ContextDep
from api.deps import TenantReader
from api.problems import Problem
from api.workpool import SNOWFLAKE
from control.snowflake.inventory import TooManyColumns
from control.snowflake.masking import SeveralAccounts
from control.snowflake.policies import options_from, snowflake_script
from control.snowflake.sql import UnsafeName

SQL_MEDIA_TYPE = "application/sql"
# A role or account name: what Snowflake can hold, without control characters (they could end a SQL comment).
_NAME = r"^[^\x00-\x1f\x7f]{1,255}$"

_ERRORS: dict[int | str, dict[str, Any]] = {
    200: {"content": {SQL_MEDIA_TYPE: {}}, "description": "The script (UTF-8)."},
    401: {"description": "No valid access token."},
    403: {"description": "The token lacks the scope."},
    404: {"description": "No such tenant (another tenant's answers 404 too)."},
    422: {
        "description": "Invalid query (problem+json naming the field: `role`, `account`, `mask`, `scope`); "
        "`several-accounts`: columns in more than one account and no `account` (the accounts are listed); "
        "`too-many-columns`: more tagged columns than `snowflake.max_columns` (field `account`)."
    },
}

router = APIRouter(prefix="/v1/tenants/{tenant}/masking", tags=["masking"])


@router.get(
    "/snowflake",
    summary="Snowflake masking policies for the tenant's PII columns",
    response_class=Response,
    responses=_ERRORS,
)
async def snowflake_policies(
    tc: TenantReader,
    ctx: ContextDep,
    account: Annotated[
        str | None, Query(pattern=_NAME, description="The Snowflake account (the URN instance); needed if several.")
    ] = None,
    role: Annotated[
        list[str] | None,
        Query(description="Roles that see PII (repeat it); default: `snowflake.pii_roles`."),
    ] = None,
    mask: Annotated[Literal["redact", "hash", "null"] | None, Query(description="How text is masked.")] = None,
    scope: Annotated[Literal["schema", "database"] | None, Query(description="Where policies live.")] = None,
) -> Response:
    """An idempotent Snowflake script: run it as a role with APPLY MASKING POLICY (and CREATE MASKING POLICY in the
    schemas) after each tagging change, or on a schedule; a re-run converges on the tags metalake holds now."""
    roles = role or []
    for name in roles:
        if len(name) > 255 or not name or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
            raise Problem(422, "invalid-role", "a role is 1 to 255 characters without control characters", field="role")
    options = options_from(ctx.settings.snowflake, roles=roles, mask_style=mask, scope=scope)
    try:
        # Reads every tagged column: on the scripts' own pool, within the tenant's share (429/503 at once beyond).
        build = partial(snowflake_script, ctx.settings, ctx.mongo, tc.tenant, options, account=account)
        script = await ctx.pools.run(SNOWFLAKE, tc.tenant, build)
    except SeveralAccounts as exc:
        raise Problem(
            422, "several-accounts", str(exc), field="account", extra={"accounts": list(exc.accounts)}
        ) from None
    except TooManyColumns as exc:
        raise Problem(422, "too-many-columns", str(exc), field="account") from None
    except UnsafeName as exc:
        raise Problem(422, "unsafe-name", str(exc), field="role") from None
    headers = {
        "X-Metalake-Masked-Columns": str(script.masked),
        "X-Metalake-Unset-Columns": str(script.unset),
        "X-Metalake-Unmasked-Columns": str(len(script.skipped)),
    }
    return Response(script.sql, media_type=SQL_MEDIA_TYPE, headers=headers)
