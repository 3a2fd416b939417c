"""The stack fetches its services side by side, shows progress while it waits for one, and reports a failed fetch
when the service that needs it is started."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ops.settings import Settings
from ops.stack.fetching import Fetches
from ops.stack.services.base import Service, ServiceError, StackContext


class Slow(Service):
    """A service whose fetch takes a while and logs a progress line, like the fetch scripts."""

    def __init__(self, name: str, seconds: float, fail: bool = False) -> None:
        self.name, self.seconds, self.fail = name, seconds, fail
        self.running = threading.Event()

    def ports(self, ctx: StackContext) -> list[int]:
        return []

    def fetch(self, ctx: StackContext) -> None:
        log = ctx.fetch_log(self.name)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"{self.name}: 412 of 821 MB (3s)\n")
        self.running.set()
        time.sleep(self.seconds)
        if self.fail:
            raise ServiceError(f"{self.name}: fetch/build failed (exit 1); see {log}")

    def argv(self, ctx: StackContext) -> list[str]:
        return ["true"]

    def probe(self, ctx: StackContext) -> str | None:
        return None


@pytest.fixture
def ctx(tmp_path: Path) -> StackContext:
    return StackContext(Settings(stack={"dir": tmp_path / ".stack"}), tmp_path)


def test_fetches_run_side_by_side(ctx: StackContext) -> None:
    services = [Slow("trino", 1.0), Slow("ferretdb", 1.0), Slow("kafka", 1.0)]
    fetches = Fetches(ctx, echo=lambda _: None)
    t0 = time.monotonic()
    fetches.start(services)
    for service in services:
        fetches.wait(service)
    # One after the other they would take 3 s.
    assert time.monotonic() - t0 < 2.0
    assert all(s.running.is_set() for s in services)


def test_waiting_shows_the_progress_the_script_logged(ctx: StackContext) -> None:
    lines: list[str] = []
    trino = Slow("trino", 0.8)
    fetches = Fetches(ctx, echo=lines.append, progress_every_s=0.2)
    fetches.start([trino])
    fetches.wait(trino)
    assert len(lines) >= 2
    assert all(line.startswith("trino ") and "trino: 412 of 821 MB" in line for line in lines)
    assert "fetching (" in lines[-1]


def test_a_failed_fetch_is_raised_by_the_wait_for_its_service(ctx: StackContext) -> None:
    good, bad = Slow("kafka", 0.1), Slow("ferretdb", 0.1, fail=True)
    fetches = Fetches(ctx, echo=lambda _: None)
    fetches.start([good, bad])
    fetches.wait(good)
    with pytest.raises(ServiceError, match="ferretdb: fetch/build failed"):
        fetches.wait(bad)


def test_a_service_not_started_is_fetched_when_waited_for(ctx: StackContext) -> None:
    kafka = Slow("kafka", 0.0)
    Fetches(ctx, echo=lambda _: None).wait(kafka)
    assert kafka.running.is_set()
