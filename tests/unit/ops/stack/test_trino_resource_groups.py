"""The local Trino's resource groups: one group per tenant (its plain and PII users together), with hard concurrency
and queue limits from the settings; every other user in the platform group; the files where Trino reads them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from metalake.trino_settings import TrinoResourceGroupSettings, TrinoSettings
from ops.settings import Settings
from ops.stack.paths import with_stack_paths
from ops.stack.resource_groups import build_resource_groups
from ops.stack.services.base import StackContext
from ops.stack.services.trino import Trino
from ops.stack.settings import StackSettings
from tenants.naming import trino_user


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line)


def _select(groups: dict[str, Any], user: str) -> list[str]:
    """Trino's selection: the first selector whose user regex matches the whole name; ``${name}`` in the group
    template takes the regex's named group (Java ``(?<n>...)``, Python ``(?P<n>...)``)."""
    for selector in groups["selectors"]:
        variables: dict[str, str] = {}
        if "user" in selector:
            match = re.fullmatch(selector["user"].replace("(?<", "(?P<"), user)
            if match is None:
                continue
            variables = {k: v for k, v in match.groupdict().items() if v is not None}
        return [_fill(part, variables) for part in selector["group"].split(".")]
    raise AssertionError(f"no selector for {user}: Trino would refuse the query")


def _fill(template: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: variables[m.group(1)], template)


def _group(groups: dict[str, Any], path: list[str]) -> dict[str, Any]:
    level, found = groups["rootGroups"], {}
    for name in path:
        found = next(g for g in level if g["name"] == name or g["name"].startswith("${"))
        level = found.get("subGroups", [])
    return found


def test_prepare_writes_the_file_resource_group_manager(tmp_path: Path) -> None:
    limits = TrinoResourceGroupSettings(tenant_max_running=3, tenant_max_queued=7)
    settings = with_stack_paths(
        Settings(
            stack=StackSettings(dir=tmp_path / ".stack"),
            trino=TrinoSettings(
                resource_groups=limits,
                shared_secret=SecretStr("s"),
                passwords={u: SecretStr(u) for u in ("metalake", "metalake-tests", "bench")},
            ),
        )
    )
    ctx = StackContext(settings, tmp_path)
    Trino().prepare(ctx)
    etc = ctx.run_dir("trino") / "etc"
    # Trino reads etc/resource-groups.properties relative to its working directory.
    assert Trino().cwd(ctx) / "etc" == etc
    assert _properties(etc / "resource-groups.properties") == {
        "resource-groups.configuration-manager": "file",
        "resource-groups.config-file": str(etc / "resource-groups.json"),
    }
    groups = json.loads((etc / "resource-groups.json").read_text())
    assert groups == build_resource_groups(limits)
    tenant = _group(groups, _select(groups, trino_user("acme")))
    assert (tenant["hardConcurrencyLimit"], tenant["maxQueued"]) == (3, 7)
    # No query executes longer than the cap (tenants may not raise it: tests/unit/tenants/access/test_rules.py).
    assert _properties(etc / "config.properties")["query.max-execution-time"] == "600s"


@pytest.mark.parametrize(
    ("user", "group"),
    [
        (trino_user("acme"), ["tenants", "acme"]),
        (trino_user("acme", pii=True), ["tenants", "acme"]),
        (trino_user("acme-pii"), ["tenants", "acme-pii"]),
        (trino_user("acme-pii", pii=True), ["tenants", "acme-pii"]),
        (trino_user("acme", admin=True), ["tenants", "acme"]),
        (trino_user("acme", pii=True, admin=True), ["tenants", "acme"]),
        ("tenant.acme.pii.admin", ["platform"]),
        ("metalake", ["platform"]),
        ("metalake-tests", ["platform"]),
        ("tenant.x", ["platform"]),  # not a tenant id: not a tenant's user
        ("tenant.acme.pii.more", ["platform"]),
        ("xtenant.acme", ["platform"]),
    ],
)
def test_each_tenant_has_its_own_group_shared_by_its_two_users(user: str, group: list[str]) -> None:
    assert _select(build_resource_groups(TrinoResourceGroupSettings()), user) == group


def test_every_group_has_hard_concurrency_and_queue_limits() -> None:
    defaults = TrinoResourceGroupSettings()
    groups = build_resource_groups(defaults)
    tenants = _group(groups, ["tenants"])
    per_tenant = _group(groups, ["tenants", "acme"])
    assert (tenants["hardConcurrencyLimit"], tenants["maxQueued"]) == (
        defaults.tenants_max_running,
        defaults.tenants_max_queued,
    )
    assert (per_tenant["hardConcurrencyLimit"], per_tenant["maxQueued"]) == (2, 10)
    assert per_tenant["hardConcurrencyLimit"] < tenants["hardConcurrencyLimit"]

    def walk(level: list[dict[str, Any]]) -> None:
        for g in level:
            # The fields Trino's file manager requires of every group.
            assert {"name", "softMemoryLimit", "hardConcurrencyLimit", "maxQueued"} <= set(g)
            assert re.fullmatch(r"\d+%", g["softMemoryLimit"])
            walk(g.get("subGroups", []))

    walk(groups["rootGroups"])
    # The catch-all comes last: a selector after it would never match.
    assert "user" not in groups["selectors"][-1]


def test_the_fetched_server_keeps_the_resource_group_plugin() -> None:
    """Without the plugin, a resource-groups.properties naming the file manager stops Trino from starting."""
    script = Path(__file__).parents[4] / "deploy" / "local" / "fetch" / "trino.sh"
    plugins = re.search(r'^PLUGINS="([^"]*)"', script.read_text(), re.MULTILINE)
    assert plugins is not None and "resource-group-managers" in plugins.group(1).split()
