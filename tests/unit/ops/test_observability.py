"""The local stack's Prometheus configuration, the health ports it scrapes, the dashboard and the alert rules held to
the metrics contract (ops/observability/contract.py). promtool's own checks of the rules and the dashboard's queries:
tests/integration/test_prometheus_rules.py."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from metalake.settings import HealthPorts, HealthSettings
from ops.observability import dashboard
from ops.observability.contract import METRICS, metric_of, metrics_named
from ops.settings import Settings
from ops.stack.paths import with_stack_paths
from ops.stack.scrape_targets import HEALTH_PROCESS, JOBS, health_env, targets
from ops.stack.services import SERVICES
from ops.stack.services.base import StackContext
from ops.stack.services.prometheus import TOKEN_VARIABLE, Prometheus, scrape_config
from ops.stack.settings import StackSettings

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "prometheus" / "rules" / "metalake.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "metalake.json"


def _ctx(tmp_path: Path, **health: int) -> StackContext:
    settings = Settings(
        stack=StackSettings(dir=tmp_path / ".stack"), health=HealthSettings(ports=HealthPorts(**health))
    )
    return StackContext(with_stack_paths(settings), ROOT)


def test_the_committed_dashboard_is_the_generated_one() -> None:
    # After a change of ops/observability/dashboard.py: make dashboard.
    assert DASHBOARD.read_text() == dashboard.render()
    ids = [p["id"] for p in json.loads(DASHBOARD.read_text())["panels"]]
    assert ids == list(range(1, len(ids) + 1))


def test_the_dashboard_shows_every_metric_of_the_contract_and_no_other() -> None:
    named = set().union(*(metrics_named(e) for e in dashboard.expressions()))
    assert named == set(METRICS)


def test_the_rules_name_only_metrics_of_the_contract() -> None:
    text = RULES.read_text()
    named = metrics_named(text)
    assert named <= set(METRICS), named - set(METRICS)
    # What the alerts watch (issue 23): freshness, lag, dead letters, deliveries, readiness, the erasure queue.
    assert {
        "metalake_freshness_seconds",
        "metalake_consumer_lag_records",
        "metalake_events_total",
        "metalake_deliveries_total",
        "metalake_ready",
        "metalake_erasure_oldest_seconds",
    } <= named
    # The down alert's selector is the jobs the stack (and the chart's PodMonitor) scrape, no more, no fewer.
    (selector,) = re.findall(r'up\{job=~"([^"]+)"\}', text)
    assert sorted(selector.split("|")) == sorted(JOBS)


def test_a_histogram_series_belongs_to_its_metric() -> None:
    assert metric_of("metalake_freshness_seconds_bucket") == "metalake_freshness_seconds"
    assert metric_of("metalake_events_total") == "metalake_events_total"
    # Only a histogram has _count/_sum series; recording rules (colons) are not metrics of the processes.
    assert metrics_named("metalake:freshness_seconds:p99_5m + metalake_ready_count") == {"metalake_ready_count"}


def test_every_process_is_scraped_with_the_token_file(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, outbound=19103)
    config = scrape_config(ctx, tmp_path / "token")
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert list(jobs) == ["prometheus", *JOBS]
    for job in JOBS:
        assert jobs[job]["authorization"] == {"type": "Bearer", "credentials_file": str(tmp_path / "token")}
        assert jobs[job]["metrics_path"] == "/metrics"
    assert "authorization" not in jobs["prometheus"]  # its own /metrics: no token of metalake's
    assert jobs["api"]["static_configs"] == [{"targets": ["127.0.0.1:8000"]}]
    assert jobs["connect"]["static_configs"] == [{"targets": ["127.0.0.1:8083"]}]
    # A port the environment sets wins over the stack's default; the others are the stack's.
    assert targets(ctx.settings)["outbound"] == "127.0.0.1:19103"
    assert targets(ctx.settings)["stream"] == "127.0.0.1:9101"
    assert config["rule_files"] == [str(ROOT / "deploy" / "prometheus" / "rules" / "*.yml")]


def test_each_stack_run_process_gets_its_health_port_in_its_own_environment_only(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    served = {s.name: s for s in SERVICES if s.name in HEALTH_PROCESS}
    assert set(served) == set(HEALTH_PROCESS)
    ports = set()
    for name, service in served.items():
        env = service.env(ctx)
        (port,) = service.ports(ctx)
        assert env[f"METALAKE_HEALTH__PORTS__{HEALTH_PROCESS[name].upper()}"] == str(port)
        assert health_env(ctx.settings, name) == {f"METALAKE_HEALTH__PORTS__{HEALTH_PROCESS[name].upper()}": str(port)}
        assert service.port_variable().startswith("METALAKE_STACK__PORTS__")
        ports.add(port)
    assert len(ports) == len(served)  # a port each


def test_prometheus_gets_the_generated_token_in_an_owner_only_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    monkeypatch.delenv(f"{TOKEN_VARIABLE}_FILE", raising=False)
    ctx = _ctx(tmp_path)
    (tmp_path / ".stack").mkdir()
    (tmp_path / ".stack" / "stack.env").write_text(f"{TOKEN_VARIABLE}=s3cr3t-token\n")
    service = Prometheus()
    service.prepare(ctx)
    token = service.token_file(ctx)
    assert token.read_text() == "s3cr3t-token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    config = json.loads(service.config_file(ctx).read_text())
    assert "s3cr3t-token" not in service.config_file(ctx).read_text()
    assert config["scrape_configs"][1]["authorization"]["credentials_file"] == str(token)
    argv = service.argv(ctx)
    assert "--web.listen-address=127.0.0.1:9090" in argv
    assert f"--web.local-assets={ctx.cache_dir('prometheus')}/root/usr/share/prometheus/web" in argv
    assert not any("enable-admin-api" in a or "enable-lifecycle" in a for a in argv)
    # A token the environment names as a file is read from there, not copied.
    monkeypatch.setenv(f"{TOKEN_VARIABLE}_FILE", str(tmp_path / "mine"))
    assert service.token_file(ctx) == tmp_path / "mine"
