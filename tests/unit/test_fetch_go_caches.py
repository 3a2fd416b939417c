"""The Go builds of deploy/local/fetch/common.sh use the go command's own module and build caches, shared by every
checkout on the machine (a fresh clone compiles only what changed), never a copy under the stack's folder, and they
leave them in place."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

COMMON = Path(__file__).resolve().parents[2] / "deploy" / "local" / "fetch" / "common.sh"
SHOW = 'source "$COMMON"; go_caches; echo "$GOMODCACHE"; echo "$GOCACHE"; echo "$GOFLAGS"'


def _go_caches(stack: Path, **env: str) -> list[str]:
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is missing: the fetch scripts build with it")
    base = {
        "PATH": f"{Path(go).parent}:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "COMMON": str(COMMON),
        "STACK_DIR": str(stack),
        "REPO_DIR": str(stack),
    }
    result = subprocess.run(["bash", "-c", SHOW], env={**base, **env}, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_the_builds_use_the_go_commands_own_caches_not_the_stacks(tmp_path: Path) -> None:
    modules, builds, flags = _go_caches(tmp_path)

    own = subprocess.run(["go", "env", "GOMODCACHE", "GOCACHE"], capture_output=True, text=True, check=True)
    assert [modules, builds] == own.stdout.splitlines()
    assert not modules.startswith(str(tmp_path)) and not builds.startswith(str(tmp_path))
    assert flags == "-modcacherw"  # the module cache stays removable (go clean -modcache)


def test_an_operators_own_go_caches_are_kept(tmp_path: Path) -> None:
    mine = {"GOMODCACHE": str(tmp_path / "mod"), "GOCACHE": str(tmp_path / "build")}

    assert _go_caches(tmp_path / "stack", **mine)[:2] == [mine["GOMODCACHE"], mine["GOCACHE"]]
