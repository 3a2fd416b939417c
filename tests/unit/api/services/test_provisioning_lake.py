"""The lake step without a stack: a pooled tenant runs no subprocess and waits (retried by the resumer) while the
shared tables are not registered; a dedicated tenant's tables come from the lake CLI with ``--dedicated``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from control.provisioning import provisioner as provisioner_mod
from control.provisioning import steps
from control.provisioning.provisioner import waiting
from control.provisioning.steps import LakeStep, StepContext, StepFailed, StepWaiting
from ops.settings import Settings
from tenants.model import Tier
from tenants.registry import TenantRecord, TenantState


def _record(tier: Tier) -> TenantRecord:
    now = datetime.now(UTC)
    return TenantRecord("acme", tier, TenantState.PROVISIONING, None, now, now)


class Runner:
    def __init__(self, code: int = 0, tail: str = "") -> None:
        self.calls: list[list[str]] = []
        self.result = (code, tail)

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        return self.result


def _ctx(tmp_path: Path, runner: Runner) -> StepContext:
    settings = Settings(lake={"root": tmp_path / "lake", "checkpoint_root": tmp_path / "cp"})
    return StepContext(settings, cast(Any, None), cast(Any, None), runner)


def test_a_pooled_tenant_gets_views_and_its_audit_table_without_a_subprocess(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[tuple[str, tuple[str, ...]]] = []

    def views(settings: Settings, names: Any) -> list[str]:
        made.append(("views", ()))
        return []

    def tables(settings: Settings, names: Any, which: Sequence[str]) -> list[str]:
        made.append(("tables", tuple(which)))
        return []

    monkeypatch.setattr(steps, "register_tenant", views)
    monkeypatch.setattr(steps, "register_tables", tables)
    runner = Runner()
    ctx = _ctx(tmp_path, runner)
    record = _record(Tier.POOLED)
    names = record.names(ctx.settings.lake_root)
    LakeStep().provision(ctx, record, names)
    assert runner.calls == []
    assert made == [("views", ()), ("tables", ("audit",))]
    assert (names.delta_path("audit") / "_delta_log").is_dir()
    LakeStep().provision(ctx, record, names)  # idempotent: the audit table is left as it is


def test_a_pooled_tenant_waits_for_the_shared_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def not_yet(*_: Any) -> list[str]:
        raise LookupError("shared tables not registered in Trino yet: events")

    monkeypatch.setattr(steps, "register_tenant", not_yet)
    ctx = _ctx(tmp_path, Runner())
    record = _record(Tier.POOLED)
    with pytest.raises(StepWaiting, match="streaming job registers them"):
        LakeStep().provision(ctx, record, record.names(ctx.settings.lake_root))


def test_a_dedicated_tenant_runs_the_lake_cli(tmp_path: Path) -> None:
    runner = Runner(code=3, tail="boom\nlast line\n")
    ctx = _ctx(tmp_path, runner)
    record = _record(Tier.DEDICATED)
    with pytest.raises(StepFailed, match="lake init exited with 3: last line"):
        LakeStep().provision(ctx, record, record.names(ctx.settings.lake_root))
    assert runner.calls == [[sys.executable, "-m", "processors.lake", "init", "--tenant", "acme", "--dedicated"]]


def test_only_waiting_errors_are_retried_by_the_resumer() -> None:
    lake = LakeStep()
    waiting_error = provisioner_mod._error(lake, StepWaiting("shared tables not registered"))
    assert waiting_error == "step lake waiting: shared tables not registered"
    assert waiting(waiting_error)
    assert not waiting(provisioner_mod._error(lake, StepFailed("lake init exited with 1")))
    assert not waiting(provisioner_mod._error(lake, RuntimeError("secret in a message")))
    assert provisioner_mod._error(lake, RuntimeError("secret")) == "step lake: RuntimeError"
    assert not waiting(None)


@pytest.mark.parametrize("tier", [Tier.POOLED, Tier.DEDICATED])
def test_deprovisioning_runs_the_lake_drop_and_checks_the_folder_is_gone(tmp_path: Path, tier: Tier) -> None:
    runner = Runner()
    ctx = _ctx(tmp_path, runner)
    record = _record(tier)
    names = record.names(ctx.settings.lake_root)
    LakeStep().deprovision(ctx, record, names)
    assert runner.calls == [[sys.executable, "-m", "processors.lake", "drop", "--yes", "--tenant", "acme"]]
    names.delta_path("audit").mkdir(parents=True)  # a drop that said it succeeded but left the folder
    with pytest.raises(StepFailed, match="still there"):
        LakeStep().deprovision(ctx, record, names)


def test_deprovisioning_on_s3_checks_no_object_is_left_under_the_tenants_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = Runner()
    settings = Settings(lake={"root": "s3a://bkt/lake", "checkpoint_root": tmp_path / "cp"})
    ctx = StepContext(settings, cast(Any, None), cast(Any, None), runner)
    record = _record(Tier.DEDICATED)
    names = record.names(settings.lake_root)
    asked: list[tuple[str, str]] = []
    left = [False]

    class Store:
        def has_objects(self, bucket: str, prefix: str) -> bool:
            asked.append((bucket, prefix))
            return left[0]

    monkeypatch.setattr(steps, "lake_s3_client", lambda s: Store())
    LakeStep().deprovision(ctx, record, names)
    assert runner.calls == [[sys.executable, "-m", "processors.lake", "drop", "--yes", "--tenant", "acme"]]
    assert asked == [("bkt", "lake/acme/")]
    left[0] = True  # a drop that said it succeeded but left objects
    with pytest.raises(StepFailed, match="still holds objects"):
        LakeStep().deprovision(ctx, record, names)
