"""The Snowflake script of one tenant from the settings and its projection: what the API route and the CLI serve."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from pymongo import MongoClient

from control.snowflake.inventory import load_inventory
from control.snowflake.masking import MaskStyle, Options, Scope, Script, build_script
from control.snowflake.settings import MaskingSettings, SnowflakeMaskingSettings
from tenants.naming import names_for

log = logging.getLogger(__name__)


def options_from(
    conf: SnowflakeMaskingSettings,
    *,
    roles: Sequence[str] | None = None,
    mask_style: MaskStyle | None = None,
    scope: Scope | None = None,
) -> Options:
    """The configured options (``snowflake.*``), each overridden by the caller's value when given."""
    return Options(
        roles=tuple(roles) if roles else tuple(conf.pii_roles),
        mask_style=mask_style or conf.mask_style,
        scope=scope or conf.policy_scope,
        policy_schema=conf.policy_schema,
        prefix=conf.policy_prefix,
        fold_lowercase=conf.fold_lowercase,
    )


def snowflake_script(
    settings: MaskingSettings,
    client: MongoClient[dict[str, Any]],
    tenant: str,
    options: Options,
    *,
    account: str | None = None,
) -> Script:
    """Read the tenant's tagged Snowflake columns and render the script (raises ``SeveralAccounts``,
    ``TooManyColumns``, ``UnsafeName``)."""
    started = time.perf_counter()
    db = client[names_for(tenant, settings.lake_root).mongo_database]
    patterns = tuple(settings.access.pii_tags)
    inventory = load_inventory(db, patterns=patterns, account=account, max_columns=settings.snowflake.max_columns)
    script = build_script(tenant, inventory.masked, inventory.unmasked, options, account=account, pii_tags=patterns)
    log.info(
        "snowflake masking script generated",
        extra={
            "tenant": tenant,
            "masked": script.masked,
            "unset": script.unset,
            "not_masked": len(script.skipped),
            "policies": script.policies,
            "duration_ms": round((time.perf_counter() - started) * 1000, 1),
        },
    )
    return script
