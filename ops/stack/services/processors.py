"""The processors (propagation, outbound, access) run as stack services, started by ``up --with-processors``.

Each consumes ``metalake.changes`` with the default consumer group of its settings; tests run their own instances
under their own groups, so these services never take records from a test (see docs/local-stack.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ops.stack.scrape_targets import health_env, health_port, health_port_variable
from ops.stack.services.base import Service, StackContext

#: What the local stack lets the outbound runtime (test sends included) deliver to: loopback only, so
#: ``metalake demo`` can receive its signed webhooks. Explicit local configuration, never a default of the settings;
#: an environment that sets METALAKE_OUTBOUND__SSRF_ALLOW itself keeps its own value.
LOCAL_SSRF_ALLOW = '["127.0.0.1/32"]'


def local_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a stack-run Python service: unbuffered output and the loopback SSRF allowance."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(extra or {})}
    env.setdefault("METALAKE_OUTBOUND__SSRF_ALLOW", LOCAL_SSRF_ALLOW)
    return env


class ProcessorService(Service):
    """A processor of ``metalake.changes``: healthy once its start marker is seen (a ready file it writes itself,
    or its ``<name>.started`` log event since this start)."""

    infrastructure = False
    processor = True
    command: tuple[str, ...] = ()

    def ports(self, ctx: StackContext) -> list[int]:
        return [health_port(ctx.settings, self.name)]

    def port_variable(self) -> str:
        return health_port_variable(self.name)

    def fetch(self, ctx: StackContext) -> None:
        """Nothing to download: the processors are this package."""

    def ready_file(self, ctx: StackContext) -> Path:
        return ctx.run_dir(self.name) / "ready"

    def _offset_file(self, ctx: StackContext) -> Path:
        return ctx.run_dir(self.name) / "log-offset"

    def prepare(self, ctx: StackContext) -> None:
        ctx.run_dir(self.name).mkdir(parents=True, exist_ok=True)
        self.ready_file(ctx).unlink(missing_ok=True)
        # The log is appended to across starts: only what this start writes may count as its marker.
        log = ctx.log_file(self.name)
        self._offset_file(ctx).write_text(str(log.stat().st_size if log.exists() else 0))

    def argv(self, ctx: StackContext) -> list[str]:
        return [sys.executable, "-m", "ops", *self.command]

    def env(self, ctx: StackContext) -> dict[str, str]:
        return local_env(health_env(ctx.settings, self.name))

    @property
    def marker(self) -> bytes:
        return f"{self.name}.started".encode()

    def probe(self, ctx: StackContext) -> str | None:
        ready = self.ready_file(ctx)
        if ready.exists():
            return None
        if self._marker_logged(ctx):
            ready.write_text("started\n")  # later probes need not read the log again
            return None
        return f"{self.name}.started not logged yet"

    def _marker_logged(self, ctx: StackContext) -> bool:
        try:
            offset = int(self._offset_file(ctx).read_text())
            with ctx.log_file(self.name).open("rb") as log:
                log.seek(offset)
                return self.marker in log.read()
        except (OSError, ValueError):
            return False


class Propagation(ProcessorService):
    name = "propagation"

    def argv(self, ctx: StackContext) -> list[str]:
        # It writes the ready file itself once its loop runs.
        return [*super().argv(ctx), "propagation", "run", "--ready-file", str(self.ready_file(ctx))]


class Outbound(ProcessorService):
    name = "outbound"
    command = ("outbound", "run")


class Access(ProcessorService):
    name = "access"
    command = ("access", "run")

    def ports(self, ctx: StackContext) -> list[int]:
        # With access.mode=opa it also serves the lake Trino's decisions (processors/access/decisions.py).
        decisions = [ctx.settings.stack.ports.access_decisions] if ctx.settings.access.mode == "opa" else []
        return [*super().ports(ctx), *decisions]
