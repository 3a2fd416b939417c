"""The Spark streaming job (processors.enrichment) run as a stack service, so ``up``/``down`` manage it too."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ops.stack.scrape_targets import health_env, health_port, health_port_variable
from ops.stack.services.base import Service, StackContext


class StreamJob(Service):
    name = "stream"
    infrastructure = False

    def ports(self, ctx: StackContext) -> list[int]:
        return [health_port(ctx.settings, self.name)]

    def port_variable(self) -> str:
        return health_port_variable(self.name)

    def fetch(self, ctx: StackContext) -> None:
        ctx.run_fetch_script("spark", self.name)
        if ctx.settings.lake_on_s3:
            ctx.run_fetch_script("spark-s3", self.name)

    def prepare(self, ctx: StackContext) -> None:
        ctx.run_dir(self.name).mkdir(parents=True, exist_ok=True)
        self.ready_file(ctx).unlink(missing_ok=True)

    def ready_file(self, ctx: StackContext) -> Path:
        return ctx.run_dir(self.name) / "ready"

    def argv(self, ctx: StackContext) -> list[str]:
        return [sys.executable, "-m", "processors.enrichment", "--ready-file", str(self.ready_file(ctx))]

    def env(self, ctx: StackContext) -> dict[str, str]:
        return {**os.environ, "PYTHONUNBUFFERED": "1", **health_env(ctx.settings, self.name)}

    def probe(self, ctx: StackContext) -> str | None:
        return None if self.ready_file(ctx).exists() else "streaming query not started yet"
