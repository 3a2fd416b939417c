"""Tenant discovery, refusals before Spark starts, and the ``metalake lake`` command's guards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metalake.cli import app
from processors.lake.discover import lake_tenants, selected_tenants, tenant_names
from processors.lake.errors import LakeUsageError
from processors.lake.maintain import check_retention
from processors.lake.sparkio import from_micros


def test_lake_tenants_are_the_folders_named_like_tenant_ids(tmp_path: Path) -> None:
    for name in ("acme", "beta-co", "_unrouted", "_trino_metastore", "X"):
        (tmp_path / name).mkdir()
    (tmp_path / "file-not-dir").write_text("")
    assert lake_tenants(tmp_path) == ["acme", "beta-co"]
    assert [n.tenant_id for n in selected_tenants(None, tmp_path)] == ["acme", "beta-co"]
    assert lake_tenants(tmp_path / "missing") == []


def test_an_unknown_tenant_names_the_folder_looked_at(tmp_path: Path) -> None:
    with pytest.raises(LakeUsageError, match=f"no lake folder at {tmp_path / 'nope'}"):
        tenant_names("nope", tmp_path)
    with pytest.raises(LakeUsageError, match="invalid tenant id"):
        tenant_names("No_Such", tmp_path)


def test_retention_below_the_safety_minimum_is_refused() -> None:
    assert check_retention(168) == 168
    with pytest.raises(LakeUsageError, match="below Delta's safety minimum"):
        check_retention(24)


def test_from_micros_gives_aware_utc() -> None:
    stamp = from_micros(1_000_000)
    assert stamp is not None and stamp.isoformat() == "1970-01-01T00:00:01+00:00"
    assert from_micros(None) is None


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    from metalake.settings import get_settings

    monkeypatch.setenv("METALAKE_LAKE__ROOT", str(tmp_path))
    get_settings.cache_clear()
    (tmp_path / "acme").mkdir()
    yield tmp_path
    get_settings.cache_clear()


def test_erase_refuses_an_invalid_urn_unknown_tenant_and_no_tty(lake: Path) -> None:
    runner = CliRunner()
    base = ["lake", "erase", "--actor", "dpo"]
    bad_urn = runner.invoke(app, [*base, "--tenant", "acme", "--urn", "customers"])
    assert bad_urn.exit_code == 2 and "invalid URN" in bad_urn.output
    unknown = runner.invoke(app, [*base, "--tenant", "ghost", "--urn", "urn:metalake:pg:x/db"])
    assert unknown.exit_code == 2 and f"no lake folder at {lake / 'ghost'}" in unknown.output
    no_tty = runner.invoke(app, [*base, "--tenant", "acme", "--urn", "urn:metalake:pg:x/db"])
    assert no_tty.exit_code == 2 and "pass --yes" in no_tty.output


def test_lake_help_lists_the_commands() -> None:
    result = CliRunner().invoke(app, ["lake", "--help"])
    assert result.exit_code == 0
    assert all(c in result.output for c in ("maintain", "erase", "reconcile", "prune"))
