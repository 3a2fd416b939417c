"""Pipeline pieces an end-to-end test runs for itself: a registered dedicated tenant, the propagation processor as a
child process, and the access runner in a thread, each with its own consumer group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pymongo import MongoClient

from metalake.kafka import ensure_topics
from ops.settings import Settings
from processors.access.processor import run as run_access
from tenants.model import Tier
from tenants.naming import CHANGES_TOPIC, TenantNames
from tenants.registry import TenantDirectory, TenantRegistry, TenantState
from tests._support.itest import wait_for
from tests._support.outbound_runtime import start_groups_at_end


@contextmanager
def dedicated_tenant(settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str) -> Iterator[TenantNames]:
    """``tenant`` registered as an active dedicated tenant with its topics; deleted (and its database dropped) after."""
    registry = TenantRegistry.connect(settings)
    registry.create(tenant, Tier.DEDICATED)
    registry.set_state(tenant, TenantState.ACTIVE)
    names = TenantDirectory(registry, settings.lake_root, ttl_s=0).names(tenant)
    assert names.dedicated
    ensure_topics(settings, [names.priority_topic, names.bulk_topic])
    try:
        yield names
    finally:
        registry.delete(tenant)
        mongo.drop_database(names.mongo_database)


class PropagationProcess:
    """``metalake propagation run --tenant <t> --group <g>`` as a child process with its log in a file."""

    def __init__(self, tenant: str, log: Path, group: str, env: dict[str, str] | None = None) -> None:
        self.log = log
        self.ready = log.with_suffix(".ready")
        self.ready.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "ops", "propagation", "run", "--tenant", tenant, "--group", group]
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [*cmd, "--ready-file", str(self.ready), "--progress-s", "5"],
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def wait_ready(self, timeout_s: float = 60) -> None:
        def probe() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"propagation processor exited with {self.proc.returncode}:\n{self.tail()}")
            return self.ready.exists()

        wait_for("the propagation processor to be ready", probe, timeout_s=timeout_s)

    def kill(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(timeout=30)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                return self.kill()
        return self.proc.returncode


@contextmanager
def access_runner(settings: Settings, group: str, timeout_s: float = 300) -> Iterator[Callable[[], None]]:
    """``metalake access run`` in a thread with consumer group ``group`` positioned at the end of the changes topic
    (a fresh group would otherwise read the whole shared topic). Yields a check that fails the test at once if the
    runner died; returns once its start-up sync is done (it saw the schemas made before it)."""
    start_groups_at_end(settings, {group: CHANGES_TOPIC})
    stop, ready = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run_access(settings, group_id=group, stop=stop, ready=ready)
        except BaseException as exc:  # noqa: BLE001 - reported through check()
            errors.append(exc)

    def check() -> None:
        assert not errors, f"the access runner died: {errors!r}"

    thread = threading.Thread(target=target, name="access-runner", daemon=True)
    thread.start()

    def started() -> bool:
        check()
        return ready.is_set()

    try:
        wait_for("the access runner's start-up sync", started, timeout_s=timeout_s)
        yield check
    finally:
        stop.set()
        thread.join(timeout=60)
    check()
    assert not thread.is_alive()
