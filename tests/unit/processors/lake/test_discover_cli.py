"""Tenant discovery, refusals before Spark starts, and the ``metalake lake`` command's guards."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from typer.testing import CliRunner

from ops.cli import app
from processors.lake import discover
from processors.lake.discover import Directory, lake_tenants, places, projection_tenants
from processors.lake.errors import LakeUsageError
from processors.lake.maintain import OWN_TABLES, Target, check_retention, targets
from processors.lake.sparkio import from_micros
from tenants.model import Tier
from tenants.naming import names_for, pooled_table_path, tenant_bucket
from tenants.registry import TenantRecord, TenantState


@dataclass
class _Registry:
    records: dict[str, TenantRecord] = field(default_factory=dict)

    def get(self, tenant_id: str) -> TenantRecord | None:
        return self.records.get(tenant_id)

    def list(self) -> list[TenantRecord]:
        return sorted(self.records.values(), key=lambda r: r.id)

    def add(self, tenant_id: str, tier: Tier) -> None:
        now = datetime.now(UTC)
        self.records[tenant_id] = TenantRecord(tenant_id, tier, TenantState.ACTIVE, None, now, now)


def _directory(root: Path, registry: _Registry | None = None, databases: Iterable[str] = ()) -> Directory:
    return Directory(root, registry or _Registry(), lambda: list(databases))


def _own_tables(root: Path, tenant: str) -> None:
    (root / tenant / "assets" / "_delta_log").mkdir(parents=True)


def _shared_rows(root: Path, table: str, tenants: list[str]) -> None:
    """A shared table holding one row per tenant (the tenant columns and one more)."""
    rows = pa.table(
        {
            "tenant_id": tenants,
            "tenant_bucket": pa.array([tenant_bucket(t) for t in tenants], pa.int32()),
            "event_id": [f"e-{t}" for t in tenants],
        }
    )
    write_deltalake(str(pooled_table_path(root, table)), rows, partition_by=["tenant_bucket"], mode="append")


def test_lake_tenants_are_the_folders_named_like_tenant_ids(tmp_path: Path) -> None:
    for name in ("acme", "beta-co", "_unrouted", "_pooled", "_trino_metastore", "X"):
        (tmp_path / name).mkdir()
    (tmp_path / "file-not-dir").write_text("")
    assert lake_tenants(tmp_path) == ["acme", "beta-co"]
    assert lake_tenants(tmp_path / "missing") == []


def test_projection_databases_name_tenants_but_not_the_control_plane() -> None:
    names = ["admin", "metalake_control", "metalake_acme", "metalake_Bad_Id", "metalake_beta-co", "other"]
    assert projection_tenants(names) == ["acme", "beta-co"]


def test_the_tier_comes_from_the_registry_else_from_own_table_folders(tmp_path: Path) -> None:
    registry = _Registry()
    registry.add("reg-dedicated", Tier.DEDICATED)
    registry.add("reg-pooled", Tier.POOLED)
    _own_tables(tmp_path, "reg-pooled")  # an old-layout folder does not override the registry
    _own_tables(tmp_path, "old-layout")
    (tmp_path / "audit-only" / "audit" / "_delta_log").mkdir(parents=True)
    directory = _directory(tmp_path, registry)
    tiers = {t: directory.resolve(t).dedicated for t in ("reg-dedicated", "reg-pooled", "old-layout", "audit-only")}
    assert tiers == {"reg-dedicated": True, "reg-pooled": False, "old-layout": True, "audit-only": False}
    assert not directory.resolve("never-seen").dedicated
    with pytest.raises(LakeUsageError, match="invalid tenant id"):
        directory.resolve("No_Such")


def test_every_tenant_includes_pooled_tenants_known_only_by_their_rows(tmp_path: Path) -> None:
    registry = _Registry()
    registry.add("registered", Tier.POOLED)
    (tmp_path / "with-folder").mkdir()
    _shared_rows(tmp_path, "events", ["rows-only", "registered"])
    _shared_rows(tmp_path, "_dlq", ["dead-letters-only"])
    directory = _directory(tmp_path, registry, ["metalake_control", "metalake_projected"])
    found = [n.tenant_id for n in directory.selected(None)]
    assert found == ["dead-letters-only", "projected", "registered", "rows-only", "with-folder"]


def test_a_named_tenant_exists_by_any_evidence_and_an_unknown_one_names_where_it_looked(tmp_path: Path) -> None:
    registry = _Registry()
    registry.add("registered", Tier.POOLED)
    (tmp_path / "with-folder").mkdir()
    _shared_rows(tmp_path, "events", ["rows-only"])
    directory = _directory(tmp_path, registry, ["metalake_projected"])
    for tenant in ("registered", "with-folder", "rows-only", "projected"):
        assert directory.named(tenant).tenant_id == tenant
    with pytest.raises(LakeUsageError, match=f"no lake folder at {tmp_path / 'nope'}") as refused:
        directory.named("nope")
    assert "no MongoDB database metalake_nope" in str(refused.value)


def test_erase_and_drop_look_in_both_layouts_of_a_pooled_table_and_audit_is_always_own(tmp_path: Path) -> None:
    pooled = names_for("acme", tmp_path)
    assert [(p.path, p.shared) for p in places(pooled, "assets")] == [
        (tmp_path / "_pooled" / "assets", True),
        (tmp_path / "acme" / "assets", False),
    ]
    dedicated = names_for("acme", tmp_path, dedicated=True)
    assert [p.shared for p in places(dedicated, "events")] == [False, True]
    assert [p.path for p in places(pooled, "audit")] == [tmp_path / "acme" / "audit"]


def _same_bucket_pair() -> tuple[str, str]:
    ids = [f"t-{i:04d}" for i in range(64)]
    first = ids[0]
    return first, next(t for t in ids[1:] if tenant_bucket(t) == tenant_bucket(first))


def test_maintain_targets_the_shared_tables_once_and_each_tenants_own(tmp_path: Path) -> None:
    a, b = _same_bucket_pair()
    tenants = [names_for(a, tmp_path), names_for(b, tmp_path), names_for("ded", tmp_path, dedicated=True)]
    every = targets(tenants, every_tenant=True)
    shared = [t for t in every if t.owner == "_pooled"]
    assert len(shared) == 8 and all(t.where is None for t in shared)
    assert Target("_unrouted", "_dlq", tmp_path / "_unrouted" / "_dlq") in every
    assert {t.table for t in every if t.owner == "ded"} == {*(t.table for t in shared), "audit"}
    assert [t.table for t in every if t.owner == a] == ["audit"]

    named = targets([names_for(a, tmp_path)], every_tenant=False)
    assert [t.owner for t in named] == ["_pooled"] * 8 + [a]
    assert {t.where for t in named if t.owner == "_pooled"} == {f"tenant_bucket = {tenant_bucket(a)}"}
    assert targets([names_for("ded", tmp_path, dedicated=True)], every_tenant=False) == [
        Target("ded", t, tmp_path / "ded" / t) for t in (*OWN_TABLES, "audit")
    ]


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
    """A lake with one tenant folder, and no MongoDB: the directory reads a registry that knows nobody."""
    from contextlib import contextmanager

    from ops.settings import Settings, get_settings

    @contextmanager
    def offline(settings: Settings) -> Iterator[Directory]:
        yield _directory(settings.lake_root)

    monkeypatch.setenv("METALAKE_LAKE__ROOT", str(tmp_path))
    monkeypatch.setattr(discover, "connect", offline)
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


def test_drop_refuses_without_a_tty_to_confirm(lake: Path) -> None:
    refused = CliRunner().invoke(app, ["lake", "drop", "--tenant", "acme"])
    assert refused.exit_code == 2 and "pass --yes" in refused.output
    assert (lake / "acme").is_dir()


def test_lake_help_lists_the_commands() -> None:
    result = CliRunner().invoke(app, ["lake", "--help"])
    assert result.exit_code == 0
    assert all(c in result.output for c in ("maintain", "erase", "reconcile", "prune", "init", "drop"))


def test_drop_without_spark_reads_rows_with_delta_rs_and_reports_zero_per_shared_table(tmp_path: Path) -> None:
    from processors.lake.drop import drop, needs_spark

    first, neighbour = _same_bucket_pair()
    _shared_rows(tmp_path, "events", [neighbour])
    _shared_rows(tmp_path, "_dlq", [neighbour])
    (tmp_path / first / "audit").mkdir(parents=True)
    names = names_for(first, tmp_path)
    # Its bucket's files hold only the neighbour's rows: no JVM, and the report says so table by table.
    assert not needs_spark(names)
    assert needs_spark(names_for(neighbour, tmp_path))
    report = drop(None, names, echo=lambda _line: None)
    assert report.shared_rows == {"events": 0, "_dlq": 0}
    assert (report.vacuumed, report.removed) == ([], [first])
    assert not (tmp_path / first).exists()


def test_only_untracked_files_of_the_tenants_bucket_make_a_shared_purge_wait(tmp_path: Path) -> None:
    from processors.lake.purge import could_hold

    pooled = names_for("acme", tmp_path)
    shared = pooled.table("events")
    bucket = shared.bucket
    day = "event_date=2026-11-26"
    assert shared.shared and bucket is not None
    assert could_hold(shared, shared.path / day / f"tenant_bucket={bucket}" / "part-0.parquet")
    other = (bucket + 1) % 16
    assert not could_hold(shared, shared.path / day / f"tenant_bucket={other}" / "part-0.parquet")
    # A prefix is not a bucket: tenant_bucket=1 is not tenant_bucket=11.
    assert not could_hold(shared, shared.path / f"tenant_bucket={bucket}1" / "part-0.parquet")
    own = names_for("acme", tmp_path, dedicated=True).table("events")
    assert could_hold(own, own.path / day / "part-0.parquet")


def test_a_named_tenant_is_looked_up_by_its_database_alone_when_the_directory_can(tmp_path: Path) -> None:
    asked: list[str] = []

    def listing() -> list[str]:
        raise AssertionError("every database listed to find one")

    def exists(name: str) -> bool:
        asked.append(name)
        return name == "metalake_projected"

    directory = Directory(tmp_path, _Registry(), listing, database_exists=exists)
    assert directory.named("projected").tenant_id == "projected"
    with pytest.raises(LakeUsageError, match="no MongoDB database metalake_nope"):
        directory.named("nope")
    assert asked == ["metalake_projected", "metalake_nope"]
