"""The connector worker (``python -m connectors run``: webhooks, the ingest API, OpenLineage) as a stack service on
``settings.connect.host:port``, started by ``up --with-processors`` and healthy when its /readyz says so.

The integration tests run their own workers in process (``TestClient``), with test plugins, so this service's port
is not theirs and its records are not theirs either (a webhook reaches the worker it is sent to); only the trace test
(tests/integration/test_traces.py) starts this one, a real process exporting its spans as the stack configures it.
"""

from __future__ import annotations

import sys

from ops.stack.services.api import Api
from ops.stack.services.base import StackContext
from ops.stack.services.processors import LOCAL_SSRF_ALLOW, local_env


class ConnectWorker(Api):
    name = "connect"
    infrastructure = False
    processor = True

    def ports(self, ctx: StackContext) -> list[int]:
        return [ctx.settings.connect.port]

    def port_variable(self) -> str:
        return "METALAKE_CONNECT__PORT"

    def needs_at_start(self, ctx: StackContext) -> tuple[str, ...]:
        # It publishes to Kafka and reads its connectors, secrets and leases from the control plane; a webhook or a
        # crawl answered before these are up would only fail.
        return ("kafka", "ferretdb")

    def argv(self, ctx: StackContext) -> list[str]:
        connect = ctx.settings.connect
        return [sys.executable, "-m", "connectors", "run", "--host", connect.host, "--port", str(connect.port)]

    def env(self, ctx: StackContext) -> dict[str, str]:
        # Local configuration, never a default of the settings (an environment that sets them keeps its values): the
        # stack's PostgreSQL listens on loopback with trust authentication, and crawling it (the demo's database, a
        # scheduled crawl) needs both allowances.
        env = local_env()
        env.setdefault("METALAKE_CONNECT__SSRF_ALLOW", LOCAL_SSRF_ALLOW)
        env.setdefault("METALAKE_CONNECT__ALLOW_PASSWORDLESS_SOURCES", "true")
        return env

    def url(self, ctx: StackContext) -> str:
        connect = ctx.settings.connect
        return f"http://{connect.host}:{connect.port}"
