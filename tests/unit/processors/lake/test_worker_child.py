"""The lake worker's child process: an erase that runs past the timeout, or is still running when the worker stops,
is killed with its whole process group (the JVM an erase starts is a grandchild), and one that ends says how."""

from __future__ import annotations

import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from control.erasures import ErasureRecord, ErasureState, announcement_id
from processors.lake.worker import Ending, erase_argv, run_in_group


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers signal 0 until its parent (here: init or nobody) reaps it.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def _family(tmp_path: Path) -> list[str]:
    """A child that starts a grandchild (as the erase starts its JVM) and writes the grandchild's pid."""
    script = (
        "import subprocess, sys, time\n"
        "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"open({str(tmp_path / 'pid')!r}, 'w').write(str(grandchild.pid))\n"
        "time.sleep(120)\n"
    )
    return [sys.executable, "-c", script]


def _grandchild(tmp_path: Path) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (tmp_path / "pid").exists() and (tmp_path / "pid").read_text():
            return int((tmp_path / "pid").read_text())
        time.sleep(0.05)
    raise AssertionError("the child did not start its grandchild")


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


def test_an_erase_past_its_timeout_is_killed_with_its_grandchildren(tmp_path: Path) -> None:
    started = time.monotonic()
    outcome = run_in_group(_family(tmp_path), 2.0, threading.Event())
    assert outcome.ending is Ending.TIMED_OUT
    assert time.monotonic() - started < 10
    assert _wait_gone(_grandchild(tmp_path)), "the grandchild (the erase's JVM) outlived the timeout"


def test_a_stopping_worker_kills_the_running_erase(tmp_path: Path) -> None:
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    outcome = run_in_group(_family(tmp_path), 600.0, stop)
    assert outcome.ending is Ending.STOPPED
    assert _wait_gone(_grandchild(tmp_path))


def test_an_erase_that_ends_gives_its_code_and_report() -> None:
    script = "import sys; print('{\"delta_rows\": {}}'); sys.stderr.write('urn:metalake:x in clear'); sys.exit(0)"
    outcome = run_in_group([sys.executable, "-c", script], 30.0, threading.Event())
    assert (outcome.ending, outcome.code, outcome.stdout.strip()) == (Ending.EXITED, 0, '{"delta_rows": {}}')
    failed = run_in_group([sys.executable, "-c", "import sys; sys.exit(2)"], 30.0, threading.Event())
    assert (failed.ending, failed.code) == (Ending.EXITED, 2)


def test_the_erase_command_line_names_the_requester_and_a_stable_announcement_id() -> None:
    now = datetime.now(UTC)
    record = ErasureRecord("acme", "era_1", "h" * 64, True, ErasureState.ACCEPTED, "dpo", now, now)
    argv = erase_argv(record)
    assert argv[1:] == [
        "-m",
        "processors.lake",
        "erase",
        "--yes",
        "--tenant",
        "acme",
        "--urn",
        "-",  # on stdin: a command line is readable by every local user (ps)
        "--actor",
        "dpo",
        "--erasure-id",
        announcement_id("acme", "era_1"),
        "--include-children",
    ]
    assert announcement_id("acme", "era_1") == announcement_id("acme", "era_1") != announcement_id("acme", "era_2")


def test_the_child_reads_what_it_is_given_on_stdin() -> None:
    script = "import sys; print(sys.stdin.readline().strip()[::-1])"
    outcome = run_in_group([sys.executable, "-c", script], 30.0, threading.Event(), "urn:metalake:x\n")
    assert (outcome.ending, outcome.stdout.strip()) == (Ending.EXITED, "x:ekalatem:nru")
    # A child that never reads its stdin is not held up by it.
    quiet = run_in_group([sys.executable, "-c", "import sys; sys.exit(3)"], 30.0, threading.Event(), "u" * 1000)
    assert (quiet.ending, quiet.code) == (Ending.EXITED, 3)


def test_a_child_that_runs_past_a_tick_still_gets_its_stdin_once() -> None:
    # The erase runs for minutes: the worker's wait ticks many times, and only the first may hand over the input
    # (subprocess raises ValueError on a second one; every erase longer than a tick failed so).
    script = "import sys, time; time.sleep(1.5); print(sys.stdin.readline().strip())"
    outcome = run_in_group([sys.executable, "-c", script], 30.0, threading.Event(), "urn:metalake:x\n")
    assert (outcome.ending, outcome.stdout.strip()) == (Ending.EXITED, "urn:metalake:x")
