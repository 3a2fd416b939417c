"""Integration fixtures: the real local stack (Kafka, FerretDB, Trino, the Spark job), started if it is down.

A test that needs a service starts it or fails loudly: nothing here skips. Services this session started are
stopped at the end; ones that were already running are left as they were.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from metalake.settings import load_settings
from metalake.trino_connect import connect
from ops.settings import Settings, get_settings
from ops.stack.manager import StackManager
from ops.stack.paths import find_project_root
from tests._support import spark_jvm

# Every app these tests start (in process or as `metalake api`) shares one control plane with the other tests. The
# API's background sweep (the urn_keys backfill, api.services.resume) would touch other tests' tenants: off here.
os.environ["METALAKE_API__RESUME"] = "false"
# Likewise the stack's lake worker (started by this session, so with this environment) runs erasures only: it would
# provision every queued tenant, those other tests leave queued on purpose too. The tests of provisioning run the
# worker's provisioning in their own process, scoped to their tenants (tests/_support/provisioning.py).
os.environ["METALAKE_PROVISIONING__ENABLED"] = "false"
# These tests read audit tables directly (control.audit.read) right after an in-process app answered: its rows are
# committed before the answer here. The batching itself (api.audit_flush_s) is covered by
# tests/unit/api/services/test_auditbatch.py, on a real delta-rs table too.
os.environ.setdefault("METALAKE_API__AUDIT_FLUSH_S", "0")


def _manager() -> StackManager:
    # Straight to the real stderr: a cold start fetches and builds for minutes, and pytest would hold the lines back.
    return StackManager(
        load_settings(Settings),
        find_project_root(),
        echo=lambda line: print(f"[stack] {line}", file=sys.__stderr__, flush=True),
    )


def _running(manager: StackManager) -> set[str]:
    return {s.name for s in manager.status() if s.state == "running"}


class _EarlyStart:
    """``metalake stack up --with-job`` in a child process while the tests before the integration ones run
    (``make test`` runs the unit tests first, in this process: two minutes, as long as the stack's start). A child,
    not a thread: the unit tests change this process's environment, which the services would inherit."""

    def __init__(self) -> None:
        self.running_before = _running(_manager())
        self.used = False
        self._child = subprocess.Popen(  # stdout and stderr: the session's own, progress as it comes
            [str(Path(sys.executable).with_name("metalake")), "stack", "up", "--with-job"],
            stdin=subprocess.DEVNULL,
        )

    def wait(self) -> None:
        if self._child.wait() != 0:
            pytest.fail(f"the stack did not start (`metalake stack up --with-job` exited {self._child.returncode})")


_EARLY_START = pytest.StashKey[_EarlyStart]()
_HERE = Path(__file__).resolve().parent


# Seconds each integration file took in a whole `make test` (summed over its tests; 2026-11-30, docs/benchmarks.md):
# the order below needs only their ranking, so a stale figure costs balance, not correctness. A file not listed
# counts as 0 (it runs among the light ones).
FILE_COSTS: dict[str, int] = json.loads((_HERE / "file_costs.json").read_text())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The unit tests first (the lanes' stacks start meanwhile), then the integration files heaviest first, each
    file's tests together and in their order. With `make test`'s `--dist loadfile --no-loadscope-reorder`, xdist
    hands out files in this order as its workers free up, so the session ends on light files on both workers; its
    default order (most tests first) ran the heavy one-test files last, one worker busy for the last 13 minutes while
    the other idled (2026-11-30)."""

    def cost(item: pytest.Item) -> tuple[bool, int]:
        path = item.nodeid.split("::", 1)[0]
        return path.startswith("tests/integration/"), -FILE_COSTS.get(path, 0)  # the table lists integration files

    items.sort(key=cost)  # stable: a file's tests keep their collection order, next to each other


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the stack at once when other tests come before the first one that needs it (not for --collect-only)."""
    needs = [i for i, item in enumerate(session.items) if "stack" in getattr(item, "fixturenames", ())]
    if needs and needs[0] > 0 and not session.config.option.collectonly:
        session.config.stash[_EARLY_START] = _EarlyStart()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A stack started early for tests that never ran (a failure with -x, an interrupt) is stopped all the same."""
    early = session.config.stash.get(_EARLY_START, None)
    if early is not None and not early.used:
        early.wait()
        manager = _manager()
        manager.down([name for name in _running(manager) if name not in early.running_before])


@pytest.fixture(scope="session")
def stack(request: pytest.FixtureRequest) -> Iterator[StackManager]:
    early = request.config.stash.get(_EARLY_START, None)
    if early is not None:
        early.used = True
        early.wait()
    manager = _manager()
    running_before = early.running_before if early is not None else _running(manager)
    manager.up(with_job=True)
    # Settings read earlier in this process (the unit tests run first in `make test`; on a fresh clone before the
    # stack's first start wrote its key-encryption key to stack.env) must not outlive that start: the tenants'
    # Trino schema names are keyed by that key.
    get_settings.cache_clear()
    yield manager
    manager.down([s.name for s in manager.status() if s.name not in running_before])


@pytest.fixture(scope="session")
def spark_archive(stack: StackManager) -> Path:
    """The Spark drivers' class-data archive, built in the background from the stack's jars if it is not cached."""
    settings = load_settings(Settings)
    archive = spark_jvm.archive_path(settings.local_stack_dir / "cache")
    spark_jvm.start_archive_build(archive, settings.local_stack_dir / "data" / "spark")
    return archive


@pytest.fixture(autouse=True)
def _spark_driver_options(request: pytest.FixtureRequest) -> None:
    """The Spark drivers tests start from here on (they inherit the environment) map the class-data archive once it
    is built (tests/_support/spark_jvm.py says why). An operator's own options win."""
    if "stack" in request.fixturenames and spark_jvm.VARIABLE not in os.environ:
        options = spark_jvm.archive_options(request.getfixturevalue("spark_archive"))
        if options:
            os.environ[spark_jvm.VARIABLE] = options


@pytest.fixture(scope="session")
def settings(stack: StackManager) -> Settings:
    # Loaded once the stack is up: its first start writes stack.env (generated secrets such as the key-encryption
    # key), and the tests must seal and open with the key the stack's processes read, also on a fresh machine.
    return load_settings(Settings)


@pytest.fixture
def tenant() -> str:
    """A fresh tenant per test: tests never see each other's data."""
    return f"it-{secrets.token_hex(4)}"


@pytest.fixture(scope="session")
def mongo(settings: Settings, stack: StackManager) -> Iterator[MongoClient[dict[str, Any]]]:
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, serverSelectionTimeoutMS=10_000)
    yield client
    client.close()


@pytest.fixture(scope="session")
def trino_cursor(settings: Settings, stack: StackManager) -> Iterator[Any]:
    # Authenticated as the tests' service user (its password comes from stack.env), over TLS.
    conn = connect(settings, user="metalake-tests")
    yield conn.cursor()
    conn.close()
