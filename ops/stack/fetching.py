"""The fetches of the services ``up`` starts, all at once: downloads and builds are independent (Trino's download,
FerretDB's Go build, Kafka's and Spark's jars), so they run side by side in threads while the services start one
after the other. Waiting for one prints a progress line every few seconds: the elapsed time and the last line of its
fetch log (the scripts write "trino: 412 of 821 MB (35s)" or "ferretdb: building: still running (40s)")."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ops.stack.services import Service, StackContext

Echo = Callable[[str], None]


@dataclass
class _Fetch:
    service: Service
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class Fetches:
    def __init__(self, ctx: StackContext, echo: Echo, progress_every_s: float = 5.0) -> None:
        self._ctx, self._echo, self._every = ctx, echo, progress_every_s
        self._fetches: dict[str, _Fetch] = {}

    def start(self, services: Sequence[Service]) -> None:
        """Start the fetch of each service (daemon threads: an ``up`` that fails does not wait for the others; a
        fetch script left running finishes its cache entry or leaves it unmarked, and the next ``up`` runs it)."""
        for service in services:
            fetch = self._fetches[service.name] = _Fetch(service)
            threading.Thread(target=self._run, args=(fetch,), name=f"fetch-{service.name}", daemon=True).start()

    def _run(self, fetch: _Fetch) -> None:
        try:
            fetch.service.fetch(self._ctx)
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that waits for this fetch
            fetch.error = exc
        finally:
            fetch.done.set()

    def wait(self, service: Service) -> None:
        """Block until the service's fetch ended (fetching it now if it was not started); raise its error."""
        fetch = self._fetches.get(service.name)
        if fetch is None:
            service.fetch(self._ctx)
            return
        t0 = time.monotonic()
        while not fetch.done.wait(self._every):
            self._echo(f"{service.name:11} fetching ({time.monotonic() - t0:.0f}s): {self.last_line(service)}")
        if fetch.error is not None:
            raise fetch.error

    def last_line(self, service: Service) -> str:
        """The last line its fetch script logged (a progress line while it downloads or builds)."""
        log = self._ctx.fetch_log(service.name)
        try:
            with log.open("rb") as f:
                f.seek(max(0, log.stat().st_size - 4096))
                lines = f.read().decode("utf-8", "replace").strip().splitlines()
        except OSError:
            return "started"
        return lines[-1][:160] if lines else "started"
