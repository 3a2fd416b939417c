"""``metalake masking``: PII masks for customers' own warehouses, generated from a tenant's PII tags.

Reads the tenant's projection in MongoDB with the operator's settings, like ``metalake access sync``; a tenant's
client gets the same script from the admin API (``GET /v1/tenants/{tenant}/masking/snowflake``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from pymongo.errors import PyMongoError

from control.snowflake.inventory import TooManyColumns
from control.snowflake.masking import SeveralAccounts
from control.snowflake.policies import options_from, snowflake_script
from control.snowflake.sql import UnsafeName
from metalake.console import REFUSED, fail
from metalake.mongo import mongo_client
from ops.settings import get_settings
from tenants.naming import validate_tenant_id

app = typer.Typer(
    help="PII masks enforced in the customer's own query engines, generated from a tenant's PII tags (direct and "
    "propagated along lineage). See docs/snowflake.md.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def masking() -> None:
    """PII masks enforced in the customer's own query engines, generated from a tenant's PII tags."""


@app.command("snowflake-policies")
def snowflake_policies(
    tenant: Annotated[str, typer.Option(help="The tenant whose PII-tagged Snowflake columns to mask.")],
    output: Annotated[
        Path | None, typer.Option(help="Write the script to this file (default: standard output).", dir_okay=False)
    ] = None,
    account: Annotated[
        str | None,
        typer.Option(help="The Snowflake account (the instance of the URNs); needed when the tenant has several."),
    ] = None,
    role: Annotated[
        list[str] | None,
        typer.Option(help="A role that sees PII in clear (repeat it; default: METALAKE_SNOWFLAKE__PII_ROLES)."),
    ] = None,
    mask: Annotated[
        Literal["redact", "hash", "null"] | None,
        typer.Option(help="How masked text reads: '****', its SHA-256, or NULL (other types: NULL)."),
    ] = None,
    scope: Annotated[
        Literal["schema", "database"] | None,
        typer.Option(help="One policy per type in each schema, or in each database's METALAKE schema."),
    ] = None,
) -> None:
    """Write the Snowflake script that masks the tenant's PII columns (idempotent).

    Masking policies by column type (CREATE MASKING POLICY IF NOT EXISTS, then SET BODY), SET MASKING POLICY ...
    FORCE on every column tagged PII, UNSET on columns whose PII tag was withdrawn. Run it with snowsql (or a
    scheduled task) as a role that may apply masking policies:

    \b
        metalake masking snowflake-policies --tenant acme --role PII_READER --output masks.sql
        snowsql -f masks.sql
    """
    try:
        validate_tenant_id(tenant)
    except ValueError as exc:
        raise fail(f"--tenant: {exc}", REFUSED) from None
    settings = get_settings()
    options = options_from(settings.snowflake, roles=role, mask_style=mask, scope=scope)
    client = mongo_client(settings)
    try:
        script = snowflake_script(settings, client, tenant, options, account=account)
    except SeveralAccounts as exc:
        raise fail(f"{exc}; pass --account with one of: {', '.join(exc.accounts)}", REFUSED) from None
    except TooManyColumns as exc:
        raise fail(f"{exc}; pass --account to generate one account's script", REFUSED) from None
    except UnsafeName as exc:
        raise fail(f"--role: {exc}", REFUSED) from None
    except PyMongoError as exc:
        raise fail(f"MongoDB is not reachable at the configured address ({type(exc).__name__})") from None
    finally:
        client.close()
    if output is None:
        typer.echo(script.sql, nl=False)
    else:
        output.write_text(script.sql, encoding="utf-8")
    summary = f"{script.masked} column(s) masked, {script.unset} unset, {len(script.skipped)} not masked"
    typer.echo(summary + (f" -> {output}" if output else ""), err=True)
