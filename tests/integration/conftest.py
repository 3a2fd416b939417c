"""Integration fixtures: the real local stack (Kafka, FerretDB, Trino, the Spark job), started if it is down.

A test that needs a service starts it or fails loudly: nothing here skips. Services this session started are
stopped at the end; ones that were already running are left as they were.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import spark_jvm
from pymongo import MongoClient

from metalake.settings import Settings, get_settings, load_settings
from metalake.trino_connect import connect
from ops.stack import StackManager
from ops.stack.paths import find_project_root

# Every app these tests start (in process or as `metalake api`) shares one control plane with the other tests. The
# API's resumer would pick up another test's tenant left in `provisioning` on purpose and provision it meanwhile:
# off here, on in the tests of the resumer (tests/integration/api/test_tenant_resume.py).
os.environ["METALAKE_API__RESUME"] = "false"
# These tests read audit tables directly (control.audit.read) right after an in-process app answered: its rows are
# committed before the answer here. The batching itself (api.audit_flush_s) is covered by
# tests/unit/api/services/test_auditbatch.py, on a real delta-rs table too.
os.environ.setdefault("METALAKE_API__AUDIT_FLUSH_S", "0")


@pytest.fixture(scope="session")
def stack() -> Iterator[StackManager]:
    # Straight to the real stderr: a cold start fetches and builds for minutes, and pytest would hold the lines back.
    manager = StackManager(
        load_settings(),
        find_project_root(),
        echo=lambda line: print(f"[stack] {line}", file=sys.__stderr__, flush=True),
    )
    running_before = {s.name for s in manager.status() if s.state == "running"}
    manager.up(with_job=True)
    # Settings read earlier in this process (the unit tests run first in `make test`; on a fresh clone before the
    # stack's first start wrote its key-encryption key to stack.env) must not outlive that start: the tenants'
    # Trino schema names are keyed by that key.
    get_settings.cache_clear()
    yield manager
    started_here = [s.name for s in manager.status() if s.name not in running_before]
    manager.down(started_here)


@pytest.fixture(scope="session")
def spark_archive(stack: StackManager) -> Path:
    """The Spark drivers' class-data archive, built in the background from the stack's jars if it is not cached."""
    settings = load_settings()
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
    return load_settings()


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
