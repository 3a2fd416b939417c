"""The lake worker (``python -m processors.lake worker``) run as a stack service, started with the streaming job: it
runs the GDPR erasures and the tenant provisioning and deletion the admin API queues, so the API never starts a Spark
driver nor any subprocess (see docs/lake.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from ops.stack.scrape_targets import health_env, health_port, health_port_variable
from ops.stack.services.base import Service, StackContext
from ops.stack.services.processors import local_env


class LakeWorker(Service):
    name = "lake-worker"
    # Started on request with the streaming job (``up --with-job``): where Spark work runs.
    infrastructure = False

    def ports(self, ctx: StackContext) -> list[int]:
        return [health_port(ctx.settings, self.name)]

    def port_variable(self) -> str:
        return health_port_variable(self.name)

    def fetch(self, ctx: StackContext) -> None:
        """Nothing of its own: the erases it starts use the streaming job's Spark jars."""

    def prepare(self, ctx: StackContext) -> None:
        ctx.run_dir(self.name).mkdir(parents=True, exist_ok=True)
        self.ready_file(ctx).unlink(missing_ok=True)

    def ready_file(self, ctx: StackContext) -> Path:
        return ctx.run_dir(self.name) / "ready"

    def argv(self, ctx: StackContext) -> list[str]:
        return [sys.executable, "-m", "processors.lake", "worker", "--ready-file", str(self.ready_file(ctx))]

    def env(self, ctx: StackContext) -> dict[str, str]:
        return local_env(health_env(ctx.settings, self.name))

    def probe(self, ctx: StackContext) -> str | None:
        return None if self.ready_file(ctx).exists() else "lake worker not polling yet"
