"""The admin API (``metalake api``) as a stack service on ``settings.api.host:port``, healthy when /readyz says so."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

from ops.stack.services.base import Service, StackContext
from ops.stack.services.processors import local_env


class Api(Service):
    name = "api"
    infrastructure = False
    processor = True

    def ports(self, ctx: StackContext) -> list[int]:
        return [ctx.settings.api.port]

    def port_variable(self) -> str:
        return "METALAKE_API__PORT"

    def fetch(self, ctx: StackContext) -> None:
        """Nothing to download: the API is this package."""

    def prepare(self, ctx: StackContext) -> None:
        ctx.run_dir(self.name).mkdir(parents=True, exist_ok=True)

    def argv(self, ctx: StackContext) -> list[str]:
        api = ctx.settings.api
        return [sys.executable, "-m", "ops", "api", "--host", api.host, "--port", str(api.port)]

    def env(self, ctx: StackContext) -> dict[str, str]:
        return local_env()

    def url(self, ctx: StackContext) -> str:
        api = ctx.settings.api
        return f"http://{api.host}:{api.port}"

    def probe(self, ctx: StackContext) -> str | None:
        try:
            # The URL is built from settings (loopback by default), not from user input.
            with urllib.request.urlopen(f"{self.url(ctx)}/readyz", timeout=5) as resp:  # noqa: S310
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return f"/readyz answered {exc.code}"
        except (OSError, ValueError) as exc:
            return f"/readyz unreachable ({type(exc).__name__})"
        return None if body.get("status") == "ready" else f"/readyz says {body.get('status')}"
