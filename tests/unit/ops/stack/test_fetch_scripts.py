"""The fetch scripts' helpers (deploy/local/fetch/common.sh): progress lines, one fetch of a service at a time, and
downloads checked against Maven Central's SHA-1 (here from file:// URLs)."""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path

import pytest

COMMON = Path(__file__).resolve().parents[4] / "deploy" / "local" / "fetch" / "common.sh"


def bash(tmp_path: Path, script: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {"STACK_DIR": str(tmp_path / "stack"), "REPO_DIR": str(tmp_path), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    return subprocess.run(
        ["bash", "-c", f"source {COMMON}\n{script}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def test_every_prints_progress_and_keeps_the_exit_code(tmp_path: Path) -> None:
    done = bash(tmp_path, 'every 1 "ferretdb: building" sleep 2.5 && echo ok; every 1 quick false || echo "rc=$?"')
    assert done.returncode == 0, done.stderr
    assert "ferretdb: building: still running (" in done.stdout
    assert done.stdout.strip().splitlines()[-2:] == ["ok", "rc=1"]


def test_one_fetch_of_a_service_at_a_time(tmp_path: Path) -> None:
    dest = tmp_path / "stack" / "cache" / "trino"
    first = subprocess.Popen(
        ["bash", "-c", f"source {COMMON}\nfetch_lock {dest}\necho held\nsleep 1.5"],
        stdout=subprocess.PIPE,
        text=True,
        env={"STACK_DIR": str(tmp_path / "stack"), "REPO_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert first.stdout is not None and first.stdout.readline().strip() == "held"
    t0 = time.monotonic()
    second = bash(tmp_path, f"fetch_lock {dest}; echo got it")
    waited = time.monotonic() - t0
    first.wait(timeout=10)
    assert second.returncode == 0, second.stderr
    assert "trino: another fetch is running; waiting for it" in second.stdout
    assert second.stdout.strip().endswith("got it") and waited >= 1.0


@pytest.mark.parametrize("good", [True, False])
def test_a_download_is_checked_against_its_sha1(tmp_path: Path, good: bool) -> None:
    source = tmp_path / "trino-server.tar.gz"
    source.write_bytes(b"x" * 300_000)
    digest = hashlib.sha1(source.read_bytes()).hexdigest() if good else "0" * 40  # noqa: S324 - Maven's checksum
    Path(f"{source}.sha1").write_text(digest + "\n")
    target = tmp_path / "out.tar.gz"
    done = bash(tmp_path, f"download file://{source} {target} trino")
    if good:
        assert done.returncode == 0, done.stderr
        assert target.read_bytes() == source.read_bytes()
        assert "trino: downloaded 0 MB in" in done.stdout
    else:
        assert done.returncode != 0
        assert "trino: checksum mismatch" in done.stderr
        assert not target.exists() and not Path(f"{target}.part").exists()


def _publish(repo: Path, path: str, data: bytes) -> None:
    """A file and its .sha1 in a Maven Central layout."""
    file = repo / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(data)
    Path(f"{file}.sha1").write_text(hashlib.sha1(data).hexdigest())  # noqa: S324 - Maven's checksum


def test_trino_is_fetched_from_maven_central_and_thinned(tmp_path: Path) -> None:
    import io
    import tarfile

    repo = tmp_path / "central"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for member in ("lib/server.jar", "plugin/delta-lake/a.jar", "plugin/opa/b.jar", "plugin/hive/c.jar"):
            data = member.encode()
            info = tarfile.TarInfo(f"trino-server-476/{member}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    _publish(repo, "io/trino/trino-server/476/trino-server-476.tar.gz", buf.getvalue())
    _publish(repo, "io/trino/trino-cli/476/trino-cli-476-executable.jar", b"cli")
    script = Path(__file__).resolve().parents[4] / "deploy" / "local" / "fetch" / "trino.sh"
    env = {
        "STACK_DIR": str(tmp_path / "stack"),
        "REPO_DIR": str(tmp_path),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "METALAKE_MAVEN_CENTRAL": f"file://{repo}",
    }
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    trino = tmp_path / "stack" / "cache" / "trino"
    assert (trino / "trino-cli-476.jar").read_bytes() == b"cli"
    assert sorted(p.name for p in (trino / "server" / "plugin").iterdir()) == ["delta-lake"]
    assert sorted(p.name for p in (trino / "extra-plugins").iterdir()) == ["opa"]
    assert not list(trino.glob("*.tar.gz*")) and (trino / ".ready").is_file()
    again = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert again.stdout.strip() == "trino: cached"
