"""Background processes: spawn in a new session, pid records that survive pid reuse, stop with a deadline."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ops.stack.process import PidRecord, alive, exit_code, spawn, stop, tail

SLEEP = shutil.which("sleep") or "/bin/sleep"
SH = shutil.which("sh") or "/bin/sh"


def _ticks(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def _spawn_proc(tmp_path: Path, *argv: str) -> tuple[PidRecord, subprocess.Popen[bytes]]:
    return spawn(
        list(argv),
        log_file=tmp_path / "logs" / "svc.log",
        pid_file=tmp_path / "run" / "svc.pid",
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )


def _spawn(tmp_path: Path, *argv: str) -> PidRecord:
    return _spawn_proc(tmp_path, *argv)[0]


def test_spawn_alive_stop(tmp_path: Path) -> None:
    record = _spawn(tmp_path, SLEEP, "30")
    try:
        assert record.start_ticks == _ticks(record.pid)
        assert alive(record)
        assert exit_code(record) is None
        assert os.getpgid(record.pid) == record.pid  # its own process group
        assert os.getsid(record.pid) == record.pid  # and its own session
        assert PidRecord.read(tmp_path / "run" / "svc.pid") == record
        assert "starting: " + SLEEP in (tmp_path / "logs" / "svc.log").read_text()

        started = time.monotonic()
        assert stop(record, timeout_s=5) is True
        assert time.monotonic() - started < 3
        assert not alive(record)
        assert stop(record, timeout_s=5) is False
    finally:
        if alive(record):
            os.killpg(record.pid, 9)


def test_stop_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    record = _spawn(tmp_path, SH, "-c", 'trap "" TERM; echo ready; exec sleep 30')
    try:
        log = tmp_path / "logs" / "svc.log"
        deadline = time.monotonic() + 5
        while "ready" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        started = time.monotonic()
        assert stop(record, timeout_s=0.5) is True
        elapsed = time.monotonic() - started
        assert 0.5 <= elapsed < 3
        assert not alive(record)
    finally:
        if alive(record):
            os.killpg(record.pid, 9)


def _wait_exited(record: PidRecord) -> None:
    """Until the child is a zombie (exited, not yet reaped) or gone."""
    deadline = time.monotonic() + 5
    while alive(record) and time.monotonic() < deadline:
        time.sleep(0.02)


def test_exit_code_of_a_finished_child(tmp_path: Path) -> None:
    # The child outlives spawn() by a moment, so the discarded Popen object cannot reap it on the way out.
    record = _spawn(tmp_path, SH, "-c", "sleep 0.2; exit 3")
    assert exit_code(record) is None
    _wait_exited(record)
    assert exit_code(record) == 3
    assert not alive(record)


def test_exit_code_survives_other_subprocesses(tmp_path: Path) -> None:
    # With the Popen kept by the caller (as the stack manager does), other subprocesses cannot reap our child.
    record, proc = _spawn_proc(tmp_path, SH, "-c", "sleep 0.2; exit 3")
    _wait_exited(record)
    subprocess.run(["true"], check=True)  # any other subprocess, e.g. a health probe
    assert exit_code(record, proc) == 3


def test_output_goes_to_the_log(tmp_path: Path) -> None:
    record = _spawn(tmp_path, SH, "-c", "echo out; echo err >&2")
    _wait_exited(record)
    lines = (tmp_path / "logs" / "svc.log").read_text().splitlines()
    assert lines[-2:] == ["out", "err"]


def test_a_recycled_pid_is_not_alive(tmp_path: Path) -> None:
    record = _spawn(tmp_path, SLEEP, "30")
    try:
        assert not alive(PidRecord(record.pid, record.start_ticks + 1))
        assert stop(PidRecord(record.pid, record.start_ticks + 1), timeout_s=1) is False
        assert alive(record)  # the impostor record did not stop the real process
    finally:
        stop(record, timeout_s=5)


def test_our_own_process_is_alive() -> None:
    assert alive(PidRecord(os.getpid(), _ticks(os.getpid())))


def test_a_pid_that_does_not_exist_is_not_alive() -> None:
    max_pid = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert not alive(PidRecord(max_pid + 1, 0))


def test_pid_record_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "x.pid"
    PidRecord(4242, 987654).write(path)
    assert path.read_text() == "4242 987654\n"
    assert PidRecord.read(path) == PidRecord(4242, 987654)


@pytest.mark.parametrize("content", ["", "4242", "4242 abc", "1 2 3", "not a pid\n"])
def test_pid_record_read_of_garbage(tmp_path: Path, content: str) -> None:
    path = tmp_path / "x.pid"
    path.write_text(content)
    assert PidRecord.read(path) is None


def test_pid_record_read_of_a_missing_file(tmp_path: Path) -> None:
    assert PidRecord.read(tmp_path / "missing.pid") is None


def test_tail(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("one\ntwo\nthree\n")
    assert tail(path, 2) == "two\nthree"
    assert tail(path, 10) == "one\ntwo\nthree"
    assert tail(tmp_path / "missing.log", 5) == ""
