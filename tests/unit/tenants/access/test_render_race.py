"""Several access processors render the same rules file: a render that read the stored masks before another
instance stored a tenant's must not be the stale last word."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ops.settings import Settings
from tenants.access.sync import AccessSync


class _Access:
    """``trino_access``: the other instance stores acme's masks right after this instance read the documents."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {
            "acme": {"_id": "acme", "masked": [], "updated_at": datetime(2026, 1, 1, tzinfo=UTC)}
        }
        self.reads = 0

    def find(self, *args: Any) -> list[dict[str, Any]]:
        out = [dict(d) for d in self.docs.values()]
        self.reads += 1
        if self.reads == 1:
            self.docs["acme"] = {
                "_id": "acme",
                "masked": [{"table": "users", "column": "email", "type": "varchar"}],
                "updated_at": datetime(2026, 1, 2, tzinfo=UTC),
            }
        return out


def _masked_columns(path: Path) -> list[str]:
    rules = json.loads(path.read_text())
    return sorted(c["name"] for rule in rules["tables"] for c in rule.get("columns", ()) if c.get("mask"))


def test_a_render_that_read_before_another_instance_stored_renders_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(access_rules_file=tmp_path / "rules.json")
    sync = object.__new__(AccessSync)
    access = _Access()
    sync._settings, sync._access = settings, access  # type: ignore[assignment]
    monkeypatch.setattr(AccessSync, "tenants", lambda self: ["acme"])
    assert sync.render()
    # The first write lacked the mask stored meanwhile; the render looked again and wrote it.
    assert access.reads == 4  # read, stamps (changed), read again, stamps (stable)
    assert _masked_columns(settings.access_rules_file) == ["email"]
