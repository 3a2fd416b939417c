"""``metalake lake erase --urn -`` reads the URN from stdin: the lake worker passes it so, off the command line
(which ``ps`` shows every local user)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from ops.cli import app
from processors.lake import main

URN = "urn:metalake:postgres:prod/shop/public/customers"


def test_the_urn_is_read_from_stdin_when_given_as_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def report(_settings: Any, tenant: str, urn: str, *_: Any) -> dict[str, Any]:
        seen.append(urn)
        return {"tenant": tenant}

    monkeypatch.setattr(main, "erase_report", report)
    argv = ["lake", "erase", "--yes", "--tenant", "acme", "--urn", "-", "--actor", "dpo"]
    result = CliRunner().invoke(app, argv, input=URN + "\n")
    assert result.exit_code == 0, result.output
    assert seen == [URN]
