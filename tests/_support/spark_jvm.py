"""The JVM options of the Spark drivers an integration session starts.

The suite starts dozens of drivers on two cores (dedicated tenants' jobs, ``maintain``, ``erase``, racing drivers...),
each living a minute or two: JVM start-up is a large part of what they cost. A class-data-sharing archive of what a
Spark session loads (the JDK's dynamic CDS) cuts it: made once per JDK and pyspark in the stack's cache, by one
throw-away session started in the background when the test session needs the stack; drivers started before it is
there run without it. Measured 2026-11-29 (a small Delta write and read, JVM CPU time, loaded machine): 35 s without,
29 s with the archive; 21 s with C1 only, 13 s with C1 and the archive.

C1 only (``-XX:TieredStopAtLevel=1``) is for the jobs tests start (``streamjob.Job``): not for the lake commands, whose
OPTIMIZE and DELETE runs are long enough for C2 to pay (with C1 only, erase took 1.6x as long). The product's defaults
are untouched (``spark.driver_java_options`` is empty), and the benchmarks run without these options.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyspark

from metalake.java import find_java

VARIABLE = "METALAKE_SPARK__DRIVER_JAVA_OPTIONS"
C1_ONLY = "-XX:TieredStopAtLevel=1"

_PROBE = """
import sys
from metalake.settings import load_settings
from ops.settings import Settings
from processors.enrichment.session import build_spark
spark = build_spark(load_settings(Settings), "cds-archive")
spark.range(100).selectExpr("id", "id * 2 AS x").write.format("delta").save(sys.argv[1])
spark.read.format("delta").load(sys.argv[1]).count()
spark.stop()
"""


def archive_path(cache: Path) -> Path:
    """The archive for this JDK and this pyspark: another of either needs its own (a stale one is ignored by the JVM,
    but would never be remade)."""
    java = find_java(17, 21, env_var="METALAKE_SPARK_JAVA_HOME").resolve()
    key = hashlib.sha256(f"{java}|{pyspark.__version__}".encode()).hexdigest()[:16]
    return cache / "spark-cds" / f"{key}.jsa"


def archive_options(archive: Path) -> str:
    """The options that map the archive, or nothing before it exists."""
    if not archive.is_file():
        return ""
    # The JVM's warnings (e.g. an archive it cannot map) go to stderr: a lake command's stdout is its JSON report.
    return f"-XX:SharedArchiveFile={archive} -Xlog:disable -Xlog:all=warning:stderr"


def with_c1(options: str) -> str:
    """``options`` with C1 only, unless they choose a compiler level already."""
    return options if "TieredStopAtLevel" in options else f"{C1_ONLY} {options}".strip()


def start_archive_build(archive: Path, scratch: Path) -> threading.Thread | None:
    """Starts the throw-away session that dumps the archive, at the lowest CPU priority, on a thread that moves the
    dump into place once its JVM has exited (no driver reads half a file); None when the archive exists already."""
    if archive.is_file():
        return None
    archive.parent.mkdir(parents=True, exist_ok=True)
    thread = threading.Thread(target=_build_or_log, args=(archive, scratch), name="spark-cds-archive", daemon=True)
    thread.start()
    return thread


def _build_or_log(archive: Path, scratch: Path) -> None:
    # An exception escaping this thread would be a warning, an error in this suite, in whichever test runs then:
    # without the archive the drivers just start as before.
    try:
        _build(archive, scratch)
    except Exception as error:  # noqa: BLE001
        with (archive.parent / "build.log").open("a") as log:
            log.write(f"no archive: {error!r}\n")


def _build(archive: Path, scratch: Path) -> None:
    # One build for the stack's cache: each lane's session starts one, and the second found nothing to do only
    # after paying a whole throw-away Spark session (about two CPU-minutes) at the same time as the first.
    with (archive.parent / ".build.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another session builds it; drivers started after it is in place use it
        if not archive.is_file():
            _dump(archive, scratch)


def _dump(archive: Path, scratch: Path) -> None:
    partial = archive.with_suffix(f".{os.getpid()}.part")
    env = {**os.environ, VARIABLE: f"-XX:ArchiveClassesAtExit={partial}"}
    probe = scratch / f"cds-probe-{os.getpid()}"
    with (archive.parent / "build.log").open("wb") as log:
        child = subprocess.Popen(
            ["nice", "-n", "19", sys.executable, "-c", _PROBE, str(probe)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM outlives the Python process, see below
        )
        code = child.wait()
    # The JVM exits after its Python driver (on the closed pipe) and dumps the archive then: wait for the group.
    _wait_for_group(child.pid, timeout_s=600)
    shutil.rmtree(probe, ignore_errors=True)
    if code == 0 and partial.is_file() and partial.stat().st_size > 0:
        partial.replace(archive)
    else:
        partial.unlink(missing_ok=True)


def _wait_for_group(pgid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(1)
