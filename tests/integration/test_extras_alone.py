"""Each extra installed alone runs its own deployable: a fresh virtualenv per extra, with only the core dependencies
and that extra's, imports the deployable's entry module and answers ``metalake <group> --help``.

This is what a user who installs ``metalake[connectors]`` on a worker host meets; an import of another extra's library
anywhere on the deployable's import path fails here. pip installs from its cache when it holds the wheels (the
bootstrap's install of ``metalake[all]`` fills it), so the test costs a minute or two, not the downloads.
"""

from __future__ import annotations

import subprocess
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

# extra -> (entry modules of its deployables, `metalake` groups they run). "" is the core alone: the processors of
# metalake.changes that need no extra (propagation, access).
DEPLOYABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "": (("processors.propagation.main", "processors.access.main"), ("propagation", "access")),
    "connectors": (("connectors.runtime.worker",), ("connect",)),
    "api": (("api.app",), ("api",)),
    "outbound": (("processors.outbound.main",), ("outbound",)),
    "spark": (("processors.enrichment", "processors.lake.main"), ("job", "lake")),
}


def _install(extra: str, home: Path) -> Path:
    env_dir = home / (extra or "core")
    # symlinks: a copied interpreter is a file this process wrote, and a subprocess the other thread forks meanwhile
    # holds it open for writing until its exec, so running it fails with ETXTBSY ("Text file busy": CI, 2026-12-01).
    venv.EnvBuilder(with_pip=True, clear=True, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    spec = f"{ROOT}[{extra}]" if extra else str(ROOT)
    done = subprocess.run(
        # --no-compile: pip byte-compiles every module it installs (all of pyspark's for the spark extra); the imports
        # below compile the few they load. Measured 2026-11-30: the spark extra's install 67 s -> 45 s.
        [str(python), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", "-e", spec],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"pip install -e {spec!r} failed:\n{done.stdout}\n{done.stderr}"
    return python


@pytest.fixture(scope="module")
def interpreters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    home = tmp_path_factory.mktemp("extras")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {extra: pool.submit(_install, extra, home) for extra in DEPLOYABLES}
    return {extra: future.result() for extra, future in futures.items()}


@pytest.mark.parametrize("extra", sorted(DEPLOYABLES), ids=lambda e: e or "core")
def test_the_extra_alone_imports_its_deployables_and_runs_their_commands(
    extra: str, interpreters: dict[str, Path]
) -> None:
    python = interpreters[extra]
    modules, groups = DEPLOYABLES[extra]
    for module in modules:
        done = subprocess.run(
            [str(python), "-c", f"import {module}"], capture_output=True, text=True, timeout=120, check=False, cwd="/"
        )
        assert done.returncode == 0, f"metalake[{extra}] cannot import {module}:\n{done.stderr[-2000:]}"
    metalake = python.parent / "metalake"
    for group in groups:
        done = subprocess.run(
            [str(metalake), group, "--help"], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT
        )
        assert done.returncode == 0, f"metalake[{extra}]: `metalake {group} --help` failed:\n{done.stderr[-2000:]}"
        assert f"Usage: metalake {group}" in done.stdout


def test_the_core_alone_does_not_carry_an_extra(interpreters: dict[str, Path]) -> None:
    # The guard above is only as good as the venvs are bare: the core must not pull an extra's library in.
    probe = (
        "import importlib.util as u; print(','.join(m for m in ('fastapi', 'pyspark', 'slack_sdk') if u.find_spec(m)))"
    )
    done = subprocess.run([str(interpreters[""]), "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == ""
