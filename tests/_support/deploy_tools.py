"""The tools of the deployment artifacts' offline checks (tests/integration/deploy): helm and hclfmt, built from the
Go module proxy, and a venv with checkov and kubernetes-validate, all under the stack's cache.
deploy/local/prebuild.sh starts their builds in the background on a fresh clone; here the fetch scripts run again,
which waits on their locks and returns at once once cached. A failed build fails the test with the script's output:
nothing skips."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ops.stack.paths import find_project_root

ROOT = find_project_root(Path(__file__).resolve().parent)
CHART = ROOT / "deploy" / "helm" / "metalake"
TERRAFORM = ROOT / "infra" / "terraform"


def stack_dir() -> Path:
    return Path(os.environ.get("METALAKE_STACK__DIR") or ROOT / ".stack")


def _fetch(script: str) -> None:
    env = {**os.environ, "STACK_DIR": str(stack_dir()), "REPO_DIR": str(ROOT)}
    done = subprocess.run(
        ["bash", str(ROOT / "deploy" / "local" / "fetch" / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, f"deploy/local/fetch/{script} failed:\n{done.stdout}\n{done.stderr}"


def helm() -> Path:
    _fetch("helm.sh")
    return stack_dir() / "cache" / "helm" / "bin" / "helm"


def checks_venv() -> Path:
    """The venv's bin folder (checkov, hcl2tojson, python with kubernetes_validate)."""
    _fetch("deploy-checks.sh")
    return stack_dir() / "cache" / "deploy-checks" / "venv" / "bin"


def run(argv: list[str], cwd: Path = ROOT, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    # helm keeps its cache and configuration out of the home folder (a read-only one in CI would fail it).
    home = stack_dir() / "cache" / "helm" / "home"
    env = {**os.environ, "HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config")}
    env["HELM_DATA_HOME"] = str(home / "data")
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)


def load_yaml(text: str) -> list[Any]:
    """The documents of a YAML stream, parsed by the checks venv's PyYAML (the project's own venv has no YAML
    parser and needs none)."""
    code = "import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d is not None]))"
    done = subprocess.run(  # the checks venv's own interpreter
        [str(checks_venv() / "python"), "-c", code], input=text, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    documents: list[Any] = json.loads(done.stdout)
    return documents


def hclfmt() -> Path:
    _fetch("hclfmt.sh")
    return stack_dir() / "cache" / "hclfmt" / "bin" / "hclfmt"


# The rendered chart's objects, as the chart's tests read them.
def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def containers(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(deployment name, pod spec, container) of every Deployment."""
    for name, deployment in of_kind(objects, "Deployment").items():
        spec = deployment["spec"]["template"]["spec"]
        for container in spec["containers"]:
            yield name, spec, container


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}
