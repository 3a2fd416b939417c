"""The streaming job's queries: one lake query over both topics, one projection query per topic class."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ops.settings import Settings
from processors.enrichment.main import JobOptions, _plan, app


def _settings(tmp_path: Path) -> Settings:
    return Settings.model_validate({"lake": {"root": tmp_path / "lake", "checkpoint_root": tmp_path / "ck"}})


def test_pooled_plan_is_a_lake_query_over_both_topics_and_a_projection_query_per_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The product's defaults: the test session sets its own projection trigger (tests/conftest.py).
    monkeypatch.delenv("METALAKE_SPARK__PROJECTION_TRIGGER_INTERVAL", raising=False)
    lake, priority, bulk = _plan(_settings(tmp_path), JobOptions())
    assert lake.topics == ["metalake.events.priority", "metalake.events.bulk"] and lake.name.endswith("-lake")
    assert (priority.topics, bulk.topics) == (["metalake.events.priority"], ["metalake.events.bulk"])
    assert len({lake.checkpoint, priority.checkpoint, bulk.checkpoint}) == 3
    assert len({lake.pool, priority.pool, bulk.pool}) == 3
    assert (lake.trigger, priority.trigger) == ("1 second", "100 milliseconds")  # the projection's own, shorter


def test_a_dedicated_plan_reads_the_tenants_topics_into_its_checkpoints(tmp_path: Path) -> None:
    lake, priority, _ = _plan(_settings(tmp_path), JobOptions(tenant="acme"))
    assert lake.name == "metalake-dedicated-acme-lake"
    assert priority.topics == ["metalake.tenant.acme.events.priority"]
    assert lake.checkpoint == tmp_path / "ck" / "acme" / "metalake-dedicated-acme-lake"


def test_topics_of_a_benchmark_replace_the_pooled_ones(tmp_path: Path) -> None:
    lake, priority, bulk = _plan(_settings(tmp_path), JobOptions(topics=("b.p", "b.b"), query_name="bench"))
    assert (lake.topics, priority.topics, bulk.topics) == (["b.p", "b.b"], ["b.p"], ["b.b"])
    assert lake.name == "bench-lake"


def test_the_lake_only_fault_point_holds_the_projection_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_FAULTS__LAKE_ONLY", "1")
    assert [p.name for p in _plan(_settings(tmp_path), JobOptions())] == ["metalake-pooled-lake"]


@pytest.mark.parametrize("argv", [["--topics", "a,b", "--tenant", "acme"], ["--topics", "only-one"]])
def test_bad_topic_options_are_refused(argv: list[str]) -> None:
    refused = CliRunner().invoke(app, argv)
    assert refused.exit_code == 2 and "--topics" in refused.output
