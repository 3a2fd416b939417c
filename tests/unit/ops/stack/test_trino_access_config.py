"""The local Trino's access-control files: file-based rules reloaded every second, service users only at first."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import SecretStr

from metalake.trino_settings import TrinoSettings
from ops.settings import Settings
from ops.stack.paths import with_stack_paths
from ops.stack.services.base import StackContext
from ops.stack.services.trino import Trino
from ops.stack.settings import StackSettings

# The secrets the stack generates into stack.env (HTTPS with authentication needs them).
SECRETS = TrinoSettings(
    shared_secret=SecretStr("s"), passwords={u: SecretStr(u) for u in ("metalake", "metalake-tests", "bench")}
)


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line)


def test_prepare_configures_file_based_access_control(tmp_path: Path) -> None:
    settings = with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack"), trino=SECRETS))
    ctx = StackContext(settings, tmp_path)
    Trino().prepare(ctx)
    etc = ctx.run_dir("trino") / "etc"
    config = _properties(etc / "config.properties")
    assert config["access-control.config-files"] == str(etc / "access-control.properties")
    assert _properties(etc / "access-control.properties") == {
        "access-control.name": "file",
        "security.config-file": str(settings.access_rules_file),
        "security.refresh-period": "1s",
    }
    rules = json.loads(settings.access_rules_file.read_text())
    assert rules["tables"] == [
        {"user": "^(bench|metalake|metalake\\-tests)$", "privileges": rules["tables"][0]["privileges"]}
    ]
    assert "OWNERSHIP" in rules["tables"][0]["privileges"]


def test_prepare_keeps_the_rules_the_access_runner_wrote(tmp_path: Path) -> None:
    settings = with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack"), trino=SECRETS))
    settings.access_rules_file.parent.mkdir(parents=True)
    settings.access_rules_file.write_text('{"tables": []}\n')
    Trino().prepare(StackContext(settings, tmp_path))
    assert settings.access_rules_file.read_text() == '{"tables": []}\n'
