"""The local Trino's access-control files, and its plugin folder: with ``access.mode=opa`` Trino asks the access
processor's lake decisions (``processors.access.decisions``) beside the rules file, which then names no tenant
(``tenants.access.rules.build_shared_rules``). Trino needs every configured access control to allow."""

from __future__ import annotations

import os
from pathlib import Path

from ops.settings import Settings
from ops.stack.services.base import ServiceError, StackContext
from tenants.access.rules import build_shared_rules, write_rules


def access_control_file(settings: Settings, etc: Path) -> Path:
    """``etc/access-control.properties``: the file-based rules, reloaded every second."""
    path = etc / "access-control.properties"
    lines = ["access-control.name=file", f"security.config-file={settings.access_rules_file}"]
    path.write_text("\n".join([*lines, "security.refresh-period=1s", ""]))
    return path


def opa_access_control_file(settings: Settings, etc: Path) -> Path:
    """``etc/opa-access-control.properties``, owner-only (its URIs hold the decisions' key), and the rules file
    that names no tenant, written now: it never changes with the tenants."""
    # The stack's own port for the access processor (stack.env hands it the same one), unless a URL is configured.
    local = f"http://{settings.stack.host}:{settings.stack.ports.access_decisions}"
    where = (settings.access.decisions.url or local).rstrip("/")
    base = f"{where}/v1/opa/lake/{settings.decisions_key.get_secret_value()}"
    lines = [
        "access-control.name=opa",
        f"opa.policy.uri={base}/allow",
        f"opa.policy.batched-uri={base}/batch",
        f"opa.policy.batch-column-masking-uri={base}/column-masks",
        "",
    ]
    path = etc / "opa-access-control.properties"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines))
    service_users = [settings.trino.user, *settings.access.service_users]
    rules = build_shared_rules(service_users, catalog=settings.trino.catalog, impersonator=settings.trino.user)
    write_rules(settings.access_rules_file, rules)
    return path


def plugin_dir(ctx: StackContext, server: Path) -> Path:
    """The server's own plugins; with ``access.mode=opa`` a folder of links to them and to the OPA plugin, which
    deploy/local/fetch/trino.sh keeps out of the server's folder (``extra-plugins``)."""
    if ctx.settings.access.mode != "opa":
        return server / "plugin"
    opa = ctx.cache_dir("trino") / "extra-plugins" / "opa"
    if not opa.is_dir():
        raise ServiceError(f"trino: no OPA plugin in {opa.parent}; run deploy/local/fetch/trino.sh again")
    linked = ctx.run_dir("trino") / "plugin"
    linked.mkdir(parents=True, exist_ok=True)
    for source in [*sorted((server / "plugin").iterdir()), opa]:
        link = linked / source.name
        if not link.is_symlink():
            link.symlink_to(source, target_is_directory=True)
    return linked
