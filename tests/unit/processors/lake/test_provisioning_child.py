"""A provisioning step's subprocess as the lake worker runs it (``run_step_child``), with real child processes: its
exit code and stderr tail; its whole process group killed past the timeout (the step fails) or when the worker stops
(the step is interrupted, nothing recorded)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from control.provisioning.steps import StepFailed, StepInterrupted
from processors.lake.provisioning import run_step_child


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_the_exit_code_and_the_tail_of_stderr() -> None:
    argv = [sys.executable, "-c", "import sys; sys.stderr.write('x' * 5000 + 'the end'); sys.exit(3)"]
    code, tail = run_step_child(argv, 30.0, threading.Event())
    assert code == 3
    assert tail.endswith("the end") and len(tail) == 2000


def _grandchild_script(pid_file: Path) -> str:
    # A child that starts a grandchild (as lake init starts a JVM) and waits.
    return (
        "import subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(g.pid))\n"
        "time.sleep(60)\n"
    )


def test_a_step_past_its_timeout_fails_and_its_whole_group_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild"
    argv = [sys.executable, "-c", _grandchild_script(pid_file), "init"]
    started = time.monotonic()
    with pytest.raises(StepFailed, match=r"longer than provisioning\.step_timeout_s"):
        run_step_child(argv, 2.0, threading.Event())
    assert time.monotonic() - started < 10
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)


def test_a_stopping_worker_interrupts_the_step(tmp_path: Path) -> None:
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    argv = [sys.executable, "-c", "import time; time.sleep(60)", "drop"]
    started = time.monotonic()
    with pytest.raises(StepInterrupted):
        run_step_child(argv, 600.0, stop)
    assert time.monotonic() - started < 10
