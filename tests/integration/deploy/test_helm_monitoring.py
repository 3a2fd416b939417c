"""The Helm chart's Prometheus pieces (values `metrics.*`), offline: off by default; with a token Secret, every pod
has scrape annotations on its health port and the token as a mounted file, an optional PodMonitor scrapes them with
the token, Prometheus' namespace may reach those ports, and the PrometheusRule or ConfigMap carries exactly the
repository's rules file (deploy/prometheus/rules/metalake.yml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ops.stack.scrape_targets import JOBS
from tests._support.deploy_tools import CHART, ROOT, checks_venv, containers, env_of, helm, load_yaml, of_kind, run

RULES = ROOT / "deploy" / "prometheus" / "rules" / "metalake.yml"
POOLED = CHART / "examples" / "pooled.yaml"
KUBERNETES = "1.33.0"  # as tests/integration/deploy/test_helm_chart.py
TEMPLATE = (
    "template",
    "metalake-pooled",
    str(CHART),
    "-n",
    "metalake",
    "--kube-version",
    KUBERNETES,
    "-f",
    str(POOLED),
)
ON = ("--set", "metrics.tokenSecret=metalake-metrics")
ALL = (*ON, "--set", "metrics.podMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true")


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    return helm()


def render(helm_bin: Path, *values: str) -> list[dict[str, Any]]:
    done = run([str(helm_bin), *TEMPLATE, *values])
    assert done.returncode == 0, done.stderr
    return [d for d in load_yaml(done.stdout) if d]


@pytest.fixture(scope="module")
def monitored(helm_bin: Path) -> list[dict[str, Any]]:
    return render(helm_bin, *ALL, "--set", "metrics.rulesConfigMap.enabled=true")


def _annotations(objects: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {n: d["spec"]["template"]["metadata"]["annotations"] for n, d in of_kind(objects, "Deployment").items()}


def test_metrics_are_off_by_default(helm_bin: Path) -> None:
    pooled = render(helm_bin)
    assert not of_kind(pooled, "PodMonitor") and not of_kind(pooled, "PrometheusRule")
    assert not any("prometheus.io/scrape" in a for a in _annotations(pooled).values())
    assert not any("METALAKE_TELEMETRY__METRICS_TOKEN_FILE" in env_of(c) for _, _, c in containers(pooled))


def test_every_pod_is_annotated_on_its_health_port_and_reads_the_token_file(monitored: list[dict[str, Any]]) -> None:
    annotations = _annotations(monitored)
    for name, spec, c in containers(monitored):
        port = next(p["containerPort"] for p in c["ports"] if p["name"] == "health")
        assert annotations[name]["prometheus.io/scrape"] == "true"
        assert annotations[name]["prometheus.io/port"] == str(port)
        assert annotations[name]["prometheus.io/path"] == "/metrics"
        token = env_of(c)["METALAKE_TELEMETRY__METRICS_TOKEN_FILE"]
        mount = next(m for m in c["volumeMounts"] if m["name"] == "metrics-token")
        assert token == mount["mountPath"] + "/token" and mount["readOnly"] is True
        volume = next(v for v in spec["volumes"] if v["name"] == "metrics-token")
        assert volume["secret"]["secretName"] == "metalake-metrics"
        assert volume["secret"]["items"] == [{"key": "token", "path": "token"}]


def test_the_pod_monitor_scrapes_every_process_with_the_token(monitored: list[dict[str, Any]]) -> None:
    (monitor,) = of_kind(monitored, "PodMonitor").values()
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "metalake",
        "app.kubernetes.io/instance": "metalake-pooled",
    }
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "health" and endpoint["path"] == "/metrics"
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "metalake-metrics", "key": "token"},
    }
    # Its jobs are the pods' components: the names the alert rules' `up` selector and the local stack use.
    assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/component"
    components = {
        d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] for d in _deployments(monitored)
    }
    assert components == set(JOBS)


def _deployments(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(of_kind(objects, "Deployment").values())


def test_the_rules_are_the_repositorys_file(monitored: list[dict[str, Any]]) -> None:
    (rule,) = of_kind(monitored, "PrometheusRule").values()
    (expected,) = load_yaml(RULES.read_text())
    assert rule["spec"] == expected
    configmap = of_kind(monitored, "ConfigMap")["metalake-pooled-prometheus-rules"]
    assert configmap["data"]["metalake.yml"] == RULES.read_text()


def test_prometheus_may_reach_the_health_ports(monitored: list[dict[str, Any]]) -> None:
    policy = of_kind(monitored, "NetworkPolicy")["metalake-pooled-metrics"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    health = {p["containerPort"] for _, _, c in containers(monitored) for p in c["ports"] if p["name"] == "health"}
    assert {p["port"] for p in rule["ports"]} == health


def test_a_pod_monitor_without_a_token_is_refused(helm_bin: Path) -> None:
    done = run([str(helm_bin), *TEMPLATE, "--set", "metrics.podMonitor.enabled=true"])
    assert done.returncode != 0 and "metrics.podMonitor needs metrics.tokenSecret" in done.stderr


def test_the_core_objects_with_metrics_on_are_valid_for_kubernetes(helm_bin: Path, tmp_path: Path) -> None:
    # The operator's kinds are custom resources kubernetes-validate has no schema for: the others, with metrics on.
    done = run([str(helm_bin), *TEMPLATE, *ON, "--set", "metrics.rulesConfigMap.enabled=true"])
    assert done.returncode == 0, done.stderr
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(done.stdout)
    done = run([str(checks_venv() / "kubernetes-validate"), "--strict", "-k", KUBERNETES, str(rendered)])
    assert done.returncode == 0, done.stdout + done.stderr
    lint = run([str(helm_bin), "lint", "--strict", str(CHART), "-f", str(POOLED), *ALL])
    assert lint.returncode == 0, lint.stdout + lint.stderr
