"""The local Trino with ``access.mode=opa``: its OPA file points at the stack's decisions port with the key in the
path (owner-only), the rules file names no tenant, the plugin folder adds the OPA plugin to the server's, and the
access processor is started with Trino."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from pydantic import SecretStr

from ops.settings import Settings
from ops.stack.manager import StackManager
from ops.stack.paths import with_stack_paths
from ops.stack.services.base import StackContext
from ops.stack.services.trino_opa import access_control_file, opa_access_control_file, plugin_dir
from ops.stack.settings import StackSettings
from tenants.access.rules import TENANT_USERS
from tenants.access.settings import AccessSettings, DecisionSettings


def _settings(tmp_path: Path, mode: str = "opa") -> Settings:
    access = AccessSettings(mode=mode, decisions=DecisionSettings(key=SecretStr("the-key")))
    return with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack"), access=access))


def test_the_opa_file_names_the_decisions_with_the_key_and_the_rules_no_tenant(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    etc = tmp_path / "etc"
    etc.mkdir()
    opa = opa_access_control_file(settings, etc)
    lines = dict(line.split("=", 1) for line in opa.read_text().splitlines())
    base = f"http://127.0.0.1:{settings.stack.ports.access_decisions}/v1/opa/lake/the-key"
    assert lines == {
        "access-control.name": "opa",
        "opa.policy.uri": f"{base}/allow",
        "opa.policy.batched-uri": f"{base}/batch",
        "opa.policy.batch-column-masking-uri": f"{base}/column-masks",
    }
    assert stat.S_IMODE(opa.stat().st_mode) == 0o600
    rules = json.loads(settings.access_rules_file.read_text())
    assert not any(r.get("columns") for r in rules["tables"])
    assert {"user": TENANT_USERS, "catalog": "^(lake)$", "privileges": ["SELECT"]} in rules["tables"]
    assert "security.config-file=" in access_control_file(settings, etc).read_text()


def test_the_plugin_folder_links_the_servers_plugins_and_opa(tmp_path: Path) -> None:
    ctx = StackContext(_settings(tmp_path), tmp_path)
    server = tmp_path / "server"
    for name in ("delta-lake", "password-authenticators"):
        (server / "plugin" / name).mkdir(parents=True)
    (ctx.cache_dir("trino") / "extra-plugins" / "opa").mkdir(parents=True)
    linked = plugin_dir(ctx, server)
    assert sorted(p.name for p in linked.iterdir()) == ["delta-lake", "opa", "password-authenticators"]
    assert plugin_dir(ctx, server) == linked  # a second start keeps the links
    rules_ctx = StackContext(_settings(tmp_path, "rules"), tmp_path)
    assert plugin_dir(rules_ctx, server) == server / "plugin"


def test_the_access_processor_is_started_with_trino_in_opa_mode_only(tmp_path: Path) -> None:
    for mode, expected in (("opa", True), ("rules", False)):
        manager = StackManager(_settings(tmp_path, mode), tmp_path)
        names = [s.name for s in manager._select(["trino"], with_job=False)]
        assert ("access" in names) is expected, mode
