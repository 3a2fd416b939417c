"""The Helm chart (deploy/helm/metalake), offline: helm lint, helm template of both example values files, every
rendered object validated against the Kubernetes schemas kubernetes-validate ships, and what metalake's processes
need of the objects: probes on each process's own health port, secrets as files that are mounted, settings that
exist, the streaming driver's fixed ports behind a headless service. No cluster and no stack needed."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from ops.settings import Settings
from tests._support.deploy_tools import CHART, ROOT, checks_venv, containers, env_of, helm, load_yaml, of_kind, run

EXAMPLES = {"pooled": CHART / "examples" / "pooled.yaml", "dedicated": CHART / "examples" / "dedicated-tenant.yaml"}
KUBERNETES = "1.33.0"  # infra/terraform/modules/eks's kubernetes_version
# helm built with `go install` says Kubernetes 1.20 unless told (its release build stamps its own): the target is EKS's.
TARGET = ("-n", "metalake", "--kube-version", KUBERNETES)
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    return helm()


def render(helm_bin: Path, example: str, *extra: str) -> list[dict[str, Any]]:
    done = run(
        [
            str(helm_bin),
            "template",
            f"metalake-{example}",
            str(CHART),
            *TARGET,
            "-f",
            str(EXAMPLES[example]),
            *extra,
        ]
    )
    assert done.returncode == 0, done.stderr
    return [d for d in load_yaml(done.stdout) if d]


@pytest.fixture(scope="module")
def pooled(helm_bin: Path) -> list[dict[str, Any]]:
    return render(helm_bin, "pooled")


@pytest.fixture(scope="module")
def dedicated(helm_bin: Path) -> list[dict[str, Any]]:
    return render(helm_bin, "dedicated")


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_helm_lint_passes_strict(helm_bin: Path, example: str) -> None:
    done = run([str(helm_bin), "lint", "--strict", str(CHART), "-f", str(EXAMPLES[example])])
    assert done.returncode == 0, done.stdout + done.stderr


def test_required_values_are_refused_when_missing(helm_bin: Path) -> None:
    done = run([str(helm_bin), "template", "x", str(CHART), *TARGET])
    assert done.returncode != 0 and "kafka.bootstrapServers is required" in done.stderr


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_every_object_is_valid_for_kubernetes(helm_bin: Path, example: str, tmp_path: Path) -> None:
    rendered = tmp_path / "rendered.yaml"
    done = run([str(helm_bin), "template", "m", str(CHART), *TARGET, "-f", str(EXAMPLES[example])])
    rendered.write_text(done.stdout)
    done = run([str(checks_venv() / "kubernetes-validate"), "--strict", "-k", KUBERNETES, str(rendered)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(" passed for resource ") == len(render(helm_bin, example))  # each object, not a few


def test_each_process_is_probed_on_its_own_health_port_with_requests_and_limits(pooled: list[dict[str, Any]]) -> None:
    names = set()
    for name, _, c in containers(pooled):
        names.add(name.removeprefix("metalake-pooled-"))
        assert c["resources"]["requests"] and c["resources"]["limits"], name
        assert c["image"] == f"localhost/metalake-{name.removeprefix('metalake-pooled-')}:{VERSION}"
        port = next(p["containerPort"] for p in c["ports"] if p["name"] == "health")
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
        assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
        env = env_of(c)
        served = [
            v
            for k, v in env.items()
            if k.startswith("METALAKE_HEALTH__PORTS__") or k in ("METALAKE_API__PORT", "METALAKE_CONNECT__PORT")
        ]
        assert served == [str(port)], (name, env)
    assert names == {"api", "connect", "propagation", "outbound", "access", "lake-worker", "stream"}
    pdbs = {
        p["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"]
        for p in of_kind(pooled, "PodDisruptionBudget").values()
    }
    assert pdbs == names
    assert of_kind(pooled, "NetworkPolicy")


def test_secrets_are_files_that_are_mounted_and_settings_exist(pooled: list[dict[str, Any]]) -> None:
    for key in of_kind(pooled, "ConfigMap")["metalake-pooled-settings"]["data"]:
        assert is_setting(key), key
    for name, spec, c in containers(pooled):
        mounts = [m["mountPath"] for m in c["volumeMounts"]]
        for key, value in env_of(c).items():
            if not key.startswith("METALAKE_"):
                continue
            if is_setting(key):
                assert not is_setting(key, secret=True), f"{key}: a secret in the environment"
                # From a Secret, not secrets: the MongoDB URI (mongo.uri is no SecretStr) and the SCRAM user's name.
                assert isinstance(value, str) or key in ("METALAKE_MONGO__URI", "METALAKE_KAFKA__SASL_USERNAME"), key
            else:  # a secret setting's file (METALAKE_<SETTING>_FILE: only secret settings take one), mounted
                assert key.endswith("_FILE") and is_setting(key.removesuffix("_FILE"), secret=True), key
                assert any(value.startswith(m + "/") for m in mounts), (name, key)
        kafka_items = {v["name"]: v for v in spec["volumes"]}["kafka"]["secret"]["items"]
        principal = "lake" if name.endswith("lake-worker") else name.removeprefix("metalake-pooled-")
        assert [i["key"] for i in kafka_items] == [f"{principal}-password"]
        assert env_of(c)["METALAKE_KAFKA__SASL_USERNAME"]["secretKeyRef"]["key"] == f"{principal}-username"


def test_every_process_that_names_trino_schemas_reads_the_same_schema_key(pooled: list[dict[str, Any]]) -> None:
    # Tenants' schema names are keyed (tenants/trino_schemas.py): a process naming them under another key (or none)
    # renders rules or writes tables for schemas nobody else knows. The stream job and access get that key alone.
    namers = {"api", "connect", "outbound", "lake-worker", "stream", "access"}
    for name, spec, c in containers(pooled):
        process = name.removeprefix("metalake-pooled-")
        if process not in namers:
            continue
        assert env_of(c).get("METALAKE_SECRETS__SCHEMA_KEY_FILE") == "/var/run/metalake/keys/schema-key", process
        keys = {v["name"]: v for v in spec["volumes"]}["keys"]["secret"]
        if process in ("stream", "access"):
            assert keys["items"] == [{"key": "schema-key", "path": "schema-key"}], process
            assert "METALAKE_SECRETS__KEY_ENCRYPTION_KEY_FILE" not in env_of(c), process
    assert {n.removeprefix("metalake-pooled-") for n, _, _ in containers(pooled)} >= namers


def _model_of(annotation: Any) -> type[BaseModel] | None:
    candidates = (annotation, *getattr(annotation, "__args__", ()))
    return next((a for a in candidates if isinstance(a, type) and issubclass(a, BaseModel)), None)


def _holds_secret(annotation: Any) -> bool:
    return annotation is SecretStr or any(_holds_secret(a) for a in getattr(annotation, "__args__", ()))


def is_setting(variable: str, *, secret: bool = False) -> bool:
    """Whether METALAKE_A__B__C names a setting (pydantic would ignore a misspelt variable silently); with ``secret``,
    a secret one (``SecretStr``, alone or in a list or dict)."""
    model: type[BaseModel] = Settings
    parts = variable.removeprefix("METALAKE_").lower().split("__")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        nested = _model_of(field.annotation)
        if nested is None:
            return i == len(parts) - 1 and (not secret or _holds_secret(field.annotation))
        model = nested
    return False  # a section, not a setting


def test_the_driver_listens_on_the_fixed_ports_of_its_headless_service(pooled: list[dict[str, Any]]) -> None:
    service = of_kind(pooled, "Service")["metalake-pooled-stream-driver"]
    assert service["spec"]["clusterIP"] == "None"
    ((_, spec, driver),) = [c for c in containers(pooled) if c[0].endswith("-stream")]
    env = env_of(driver)
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports == {
        "driver": int(env["METALAKE_SPARK__DRIVER_PORT"]),
        "block-manager": int(env["METALAKE_SPARK__BLOCK_MANAGER_PORT"]),
    }
    assert env["METALAKE_SPARK__DRIVER_HOST"] == "metalake-pooled-stream-driver.metalake.svc"
    conf = json.loads(env["METALAKE_SPARK__CONF"])
    assert conf["spark.kubernetes.driver.pod.name"] == "$(POD_NAME)"  # Kubernetes substitutes it: POD_NAME comes first
    assert list(env).index("POD_NAME") < list(env).index("METALAKE_SPARK__CONF")
    assert conf["spark.kubernetes.container.image"] == f"localhost/metalake-stream:{VERSION}"
    (executor,) = load_yaml(of_kind(pooled, "ConfigMap")["metalake-pooled-stream-executor"]["data"]["executor.yaml"])
    assert executor["spec"]["securityContext"]["runAsNonRoot"] is True
    deployment = of_kind(pooled, "Deployment")["metalake-pooled-stream"]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"} and deployment["spec"]["replicas"] == 1
    assert spec["serviceAccountName"] == "metalake-pooled-stream"


def test_the_dedicated_release_runs_only_the_tenants_job(dedicated: list[dict[str, Any]]) -> None:
    deployments = of_kind(dedicated, "Deployment")
    assert list(deployments) == ["metalake-dedicated-stream"]
    ((_, _, driver),) = containers(dedicated)
    assert driver["args"] == ["--tenant", "globex"]
    assert "readinessProbe" not in driver  # a dedicated tenant's job serves no health server
    assert "METALAKE_HEALTH__PORTS__ENRICHMENT" not in env_of(driver)
    assert "metalake-dedicated-trino-config" not in of_kind(dedicated, "ConfigMap")
    account = of_kind(dedicated, "ServiceAccount")["metalake-dedicated-stream"]
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith("-stream-globex")


def test_every_pod_runs_as_non_root_with_a_read_only_root(pooled: list[dict[str, Any]]) -> None:
    for name, spec, c in containers(pooled):
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert c["securityContext"]["readOnlyRootFilesystem"] is True, name
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}, name


def _terraform_lines(local: str) -> list[str]:
    """The quoted lines of a list in infra/terraform/modules/trino/main.tf's locals, AWS values of the example in."""
    text = (ROOT / "infra" / "terraform" / "modules" / "trino" / "main.tf").read_text()
    block = re.search(local + r' = (?:join\("\\n", )?\[\n(.*?)\n  \]', text, re.S)
    assert block, local
    lines = re.findall(r'^\s+"(.*)",$', block.group(1), re.M)
    example = {"${var.bucket}": "acme-metalake-lake", "${local.root}": "lake", "${var.region}": "eu-west-1"}
    example['${trimsuffix(var.api_issuer, "/")}'] = example["${var.api_issuer}"] = "https://metalake.example.com"
    for name, value in example.items():
        lines = [line.replace(name, value) for line in lines]
    return lines


def test_the_trino_module_configures_trino_as_the_chart_renders_it(pooled: list[dict[str, Any]]) -> None:
    data = of_kind(pooled, "ConfigMap")["metalake-pooled-trino-config"]["data"]
    assert _terraform_lines("lake_catalog") == data["lake.properties"].splitlines()
    assert _terraform_lines("coordinator_properties") == data["jwt.properties"].splitlines()
    assert _terraform_lines("access_control") == data["access-control.properties"].splitlines()
