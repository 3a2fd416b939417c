"""The Go module and build caches of deploy/local/fetch/common.sh live only while a build runs.

Left in place they grew to 11 GB over the stack's Go programs and filled the disk of a CI run; builds running side
by side share them, so only the last one out may delete them.
"""

import shutil
import subprocess
import time
from pathlib import Path

import pytest

COMMON = Path(__file__).resolve().parents[2] / "deploy" / "local" / "fetch" / "common.sh"

# A stand-in for a fetch script's build: what `go build` leaves in the two caches.
BUILD = 'source "$COMMON"; go_caches; mkdir -p "$GOMODCACHE/m" "$GOCACHE/b"; touch "$GOMODCACHE/m/f" "$GOCACHE/b/f"'


def _build(stack: Path, *, fail: bool = False) -> subprocess.CompletedProcess[str]:
    script = BUILD + ("; exit 3" if fail else "")
    env = {"PATH": "/usr/bin:/bin", "COMMON": str(COMMON), "STACK_DIR": str(stack), "REPO_DIR": str(stack)}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)


@pytest.fixture
def stack(tmp_path: Path) -> Path:
    if shutil.which("flock") is None:
        pytest.fail("flock (util-linux) is missing: the fetch scripts need it")
    return tmp_path


def test_the_last_build_out_removes_both_caches(stack: Path) -> None:
    result = _build(stack)

    assert result.returncode == 0, result.stderr
    assert not (stack / "cache" / "gomod").exists()
    assert not (stack / "cache" / "gobuild").exists()


def test_a_failed_build_removes_them_too_and_keeps_its_exit_code(stack: Path) -> None:
    result = _build(stack, fail=True)

    assert result.returncode == 3
    assert not (stack / "cache" / "gomod").exists()


def test_caches_stay_while_another_build_holds_them(stack: Path) -> None:
    lock = stack / "cache" / "go-caches.lock"
    lock.parent.mkdir(parents=True)
    with subprocess.Popen(["flock", "-s", str(lock), "sleep", "30"]) as other:
        try:
            _wait_for_holder(lock)
            result = _build(stack)
        finally:
            other.kill()

    assert result.returncode == 0, result.stderr
    assert (stack / "cache" / "gomod" / "m" / "f").exists()
    assert (stack / "cache" / "gobuild" / "b" / "f").exists()


def _wait_for_holder(lock: Path) -> None:
    """Until the other process holds its shared lock (an exclusive try fails)."""
    for _ in range(100):
        probe = subprocess.run(["flock", "-n", "-x", str(lock), "true"], check=False)
        if probe.returncode != 0:
            return
        time.sleep(0.05)
    pytest.fail(f"the other build never took its lock on {lock}")
