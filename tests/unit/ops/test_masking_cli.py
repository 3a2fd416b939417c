"""``metalake masking snowflake-policies``: the script to stdout or a file, the options passed through, and readable
errors (one ``error:`` line, exit 2 for bad input, 1 when MongoDB cannot be reached)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pymongo.errors import ServerSelectionTimeoutError
from typer.testing import CliRunner

from control.snowflake.inventory import TooManyColumns
from control.snowflake.masking import Options, Script, SeveralAccounts, SnowflakeColumn, build_script
from ops.cli import masking
from ops.settings import Settings

COLUMN = SnowflakeColumn("xy12345", "SHOP", "PUBLIC", "CUSTOMERS", "EMAIL", "VARCHAR", "urn:...")


class Calls:
    def __init__(self, outcome: Exception | None = None) -> None:
        self.outcome = outcome
        self.seen: list[tuple[str, Options, str | None]] = []
        self.closed = False


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    recorded = Calls()

    class Client:
        def close(self) -> None:
            recorded.closed = True

    def script(settings: Settings, client: Any, tenant: str, options: Options, *, account: str | None) -> Script:
        recorded.seen.append((tenant, options, account))
        if recorded.outcome is not None:
            raise recorded.outcome
        return build_script(tenant, [COLUMN], [], options, account=account)

    settings = Settings()
    settings.snowflake.pii_roles = ["CONFIGURED"]
    monkeypatch.setattr(masking, "get_settings", lambda: settings)
    monkeypatch.setattr(masking, "mongo_client", lambda s: Client())
    monkeypatch.setattr(masking, "snowflake_script", script)
    return recorded


def run(*args: str) -> Any:
    return CliRunner().invoke(masking.app, ["snowflake-policies", *args])


def test_the_script_goes_to_stdout_with_the_configured_roles(calls: Calls) -> None:
    result = run("--tenant", "acme")
    assert result.exit_code == 0, result.output
    assert "IS_ROLE_IN_SESSION('CONFIGURED')" in result.stdout
    assert "\"EMAIL\" SET MASKING POLICY ' || chosen_policy || ' FORCE';" in result.stdout
    assert "1 column(s) masked, 0 unset, 0 not masked" in result.stderr
    assert calls.closed


def test_options_override_the_settings_and_output_goes_to_the_file(calls: Calls, tmp_path: Path) -> None:
    out = tmp_path / "masks.sql"
    args = ["--tenant", "acme", "--role", "A", "--role", "B", "--mask", "hash", "--scope", "database"]
    result = run(*args, "--account", "xy12345", "--output", str(out))
    assert result.exit_code == 0, result.output
    [(tenant, options, account)] = calls.seen
    assert (tenant, tuple(options.roles), options.mask_style, options.scope, account) == (
        "acme",
        ("A", "B"),
        "hash",
        "database",
        "xy12345",
    )
    assert "SHA2(val, 256)" in out.read_text()
    assert result.stdout == ""
    assert f"-> {out}" in result.stderr


@pytest.mark.parametrize(
    ("outcome", "args", "code", "message"),
    [
        (None, ["--tenant", "Not A Tenant"], 2, "error: --tenant: invalid tenant id"),
        (SeveralAccounts(["a1", "b2"]), ["--tenant", "acme"], 2, "pass --account with one of: a1, b2"),
        (TooManyColumns(10), ["--tenant", "acme"], 2, "more than 10 Snowflake columns"),
        (ServerSelectionTimeoutError("x:27017 refused"), ["--tenant", "acme"], 1, "MongoDB is not reachable"),
    ],
)
def test_errors_are_one_readable_line(
    calls: Calls, outcome: Exception | None, args: list[str], code: int, message: str
) -> None:
    calls.outcome = outcome
    result = run(*args)
    assert result.exit_code == code
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert "27017" not in result.stderr  # the exception's text (addresses) is not echoed


def test_a_role_snowflake_cannot_hold_is_refused(calls: Calls) -> None:
    calls.outcome = None
    result = run("--tenant", "acme", "--role", "bad\nrole")
    assert result.exit_code == 2
    assert "error: --role: a role must be" in result.stderr
