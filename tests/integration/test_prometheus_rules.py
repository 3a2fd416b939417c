"""The alert rules (deploy/prometheus/rules/) with Debian's promtool: they load (``promtool check rules``), their unit
tests pass (``promtool test rules``), and those tests fail when a rule is broken: each mutation below moves a
threshold, a selector or a window the way a careless edit would, and the tests must catch it. The dashboard's queries
parse too (promtool checks them as recording rules). Seconds: no stack needed, only the fetched package
(deploy/local/fetch/prometheus.sh, cached, and prefetched on a fresh clone)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ops.observability.dashboard import expressions
from ops.stack.paths import find_project_root
from tests._support.prometheus_api import fetched

ROOT = find_project_root(Path(__file__).resolve().parent)
RULES_DIR = ROOT / "deploy" / "prometheus" / "rules"
RULES = RULES_DIR / "metalake.yml"
TESTS = sorted((RULES_DIR / "tests").glob("*.test.yml"))

# (the alert whose test must fail, the rule's text, the broken text): each must make `promtool test rules` fail.
MUTATIONS = [
    ("MetalakeFreshnessObjectiveBreached", "freshness_seconds:p99_5m > 30", "freshness_seconds:p99_5m > 60"),
    ("MetalakeFreshnessBudgetBurnFast", "ratio_rate1h > (14.4 * 0.01)", "ratio_rate1h > (24 * 0.01)"),
    ("MetalakeFreshnessBudgetBurnSlow", "ratio_rate6h > (6 * 0.01)", "ratio_rate6h > (30 * 0.01)"),
    # An exporter that writes the bucket's bound "30" (not "30.0") must count too.
    ("MetalakeFreshnessBudgetBurnFast", 'bucket{le=~"30|30\\\\.0"}[5m]', 'bucket{le="30.0"}[5m]'),
    ("MetalakeConsumerLagGrowing", "lag_records[10m])) > 0", "lag_records[10m])) >= 0"),
    ("MetalakeConsumerLagGrowing", "(metalake_consumer_lag_records) > 1000", "(metalake_consumer_lag_records) > 9000"),
    ("MetalakeDeadLettersRising", 'outcome="dead_lettered"}[10m]', 'outcome!="accepted"}[10m]'),
    ("MetalakeDeliveriesFailing", "\n          > 0.1\n", "\n          > 0.5\n"),
    ("MetalakeErasureQueueStuck", "oldest_seconds) > 7200", "oldest_seconds) > 72000"),
    ("MetalakeProvisioningQueueStuck", "provisioning_oldest_seconds) > 1800", "provisioning_oldest_seconds) > 18000"),
    ("MetalakeProcessDown", 'up{job=~"api|connect|stream|lake-worker|propagation|outbound|access"}', "up"),
    ("MetalakeProcessDown", "== 0\n        for: 2m", "== 0\n        for: 20m"),
    ("MetalakeProcessNotReady", "metalake_ready == 0", "metalake_ready < 0"),
]


@pytest.fixture(scope="module")
def promtool() -> Path:
    return fetched(ROOT, Path(os.environ.get("METALAKE_STACK__DIR") or ROOT / ".stack")) / "promtool"


def run(promtool: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *map(str, args)], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT
    )


def test_the_rules_load(promtool: Path) -> None:
    done = run(promtool, "check", "rules", RULES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 16 rules found" in done.stdout


def test_the_rules_pass_their_unit_tests(promtool: Path) -> None:
    assert TESTS
    done = run(promtool, "test", "rules", *TESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@pytest.mark.parametrize(("alert", "good", "broken"), MUTATIONS, ids=[f"{m[0]}:{m[2]}" for m in MUTATIONS])
def test_a_broken_rule_fails_the_unit_tests(promtool: Path, tmp_path: Path, alert: str, good: str, broken: str) -> None:
    text = RULES.read_text()
    assert text.count(good) == 1, f"{alert}: the rule changed; update this mutation"
    copy = tmp_path / "rules"
    shutil.copytree(RULES_DIR, copy)
    (copy / "metalake.yml").write_text(text.replace(good, broken))
    assert run(promtool, "check", "rules", copy / "metalake.yml").returncode == 0, alert  # still valid rules
    done = run(promtool, "test", "rules", *sorted((copy / "tests").glob("*.test.yml")))
    assert done.returncode != 0, f"{alert}: the tests did not notice {broken!r}"
    # promtool names each failing case: the broken rule's own, not only some other one.
    assert f"alertname: {alert}," in done.stderr, done.stderr


def test_every_dashboard_query_parses(promtool: Path, tmp_path: Path) -> None:
    exprs = expressions()
    rules = {
        "groups": [
            {"name": "dashboard", "rules": [{"record": f"dashboard:q{i}", "expr": e} for i, e in enumerate(exprs)]}
        ]
    }
    path = tmp_path / "dashboard.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    done = run(promtool, "check", "rules", path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in done.stdout
    # And the check itself refuses a query that does not parse.
    path.write_text(json.dumps({"groups": [{"name": "d", "rules": [{"record": "d:q", "expr": "sum by (store (x)"}]}]}))
    assert run(promtool, "check", "rules", path).returncode != 0
