"""Jaeger v2 (an OpenTelemetry Collector distribution with Jaeger's storage and query service), built from the Go
module proxy (deploy/local/fetch/jaeger.sh): the local stack's trace backend.

One pipeline: an OTLP/HTTP receiver (``stack.ports.jaeger_otlp``) into in-memory storage (the newest
:data:`MAX_TRACES` traces; nothing on disk, a restart forgets them), read by the query service's HTTP API
(``stack.ports.jaeger_query``: ``/api/traces/<trace id>``; no UI: the module's source has only a placeholder page)
and its gRPC API (``stack.ports.jaeger_query_grpc``). Every port is bound to the stack's loopback host and asks for
no credentials, like Prometheus' (traces hold event ids, tenants and subscription names, never payloads or secrets);
no other receiver, extension or telemetry port is opened. With ``stack.tracing`` on (the default), ``stack.env``
points every process at the receiver (``trace_env``), and ``up`` starts Jaeger by default once its build is cached:
a first build takes minutes, so ``up`` does not wait for one (``metalake stack up jaeger`` does).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ops.settings import Settings
from ops.stack.services.base import Service, StackContext

MAX_TRACES = 100_000
STORAGE = "memstore"


def otlp_endpoint(settings: Settings) -> str:
    return f"http://{settings.stack.host}:{settings.stack.ports.jaeger_otlp}"


def query_url(settings: Settings) -> str:
    return f"http://{settings.stack.host}:{settings.stack.ports.jaeger_query}"


def trace_env(settings: Settings) -> list[str]:
    """The ``stack.env`` lines that send every process's spans to the stack's Jaeger (none with tracing off)."""
    if not settings.stack.tracing:
        return []
    return ["METALAKE_TELEMETRY__TRACES_EXPORTER=otlp", f"METALAKE_TELEMETRY__OTLP_ENDPOINT={otlp_endpoint(settings)}"]


def config(ctx: StackContext) -> dict[str, Any]:
    """The collector's configuration (JSON is YAML)."""
    host, ports = ctx.host, ctx.settings.stack.ports
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query"],
            "pipelines": {
                "traces": {"receivers": ["otlp"], "processors": ["batch"], "exporters": ["jaeger_storage_exporter"]}
            },
            # The collector's own metrics would listen on :8888 of every address: off.
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "info"}},
        },
        "extensions": {
            "jaeger_storage": {"backends": {STORAGE: {"memory": {"max_traces": MAX_TRACES}}}},
            "jaeger_query": {
                "storage": {"traces": STORAGE},
                # Jaeger would trace its own queries into itself.
                "enable_tracing": False,
                "http": {"endpoint": f"{host}:{ports.jaeger_query}"},
                "grpc": {"endpoint": f"{host}:{ports.jaeger_query_grpc}"},
            },
        },
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"{host}:{ports.jaeger_otlp}"}}}},
        "processors": {"batch": {}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": STORAGE}},
    }


class Jaeger(Service):
    name = "jaeger"

    def binary(self, ctx: StackContext) -> Path:
        return ctx.cache_dir("jaeger") / "bin" / "jaeger"

    def built(self, ctx: StackContext) -> bool:
        return (ctx.cache_dir("jaeger") / ".ready").is_file() and self.binary(ctx).is_file()

    def started_by_default(self, ctx: StackContext) -> bool:
        return ctx.settings.stack.tracing and self.built(ctx)

    def ports(self, ctx: StackContext) -> list[int]:
        p = ctx.settings.stack.ports
        return [p.jaeger_otlp, p.jaeger_query, p.jaeger_query_grpc]

    def port_variable(self) -> str:
        return "METALAKE_STACK__PORTS__JAEGER_OTLP (and __JAEGER_QUERY, __JAEGER_QUERY_GRPC)"

    def fetch(self, ctx: StackContext) -> None:
        # A first build on a busy machine (two cores shared with the tests) can take most of an hour.
        ctx.run_fetch_script("jaeger", self.name, timeout_s=3600)

    def config_file(self, ctx: StackContext) -> Path:
        return ctx.run_dir(self.name) / "jaeger.json"

    def prepare(self, ctx: StackContext) -> None:
        ctx.run_dir(self.name).mkdir(parents=True, exist_ok=True)
        self.config_file(ctx).write_text(json.dumps(config(ctx), indent=2) + "\n")

    def argv(self, ctx: StackContext) -> list[str]:
        return [str(self.binary(ctx)), "--config", f"file:{self.config_file(ctx)}"]

    def probe(self, ctx: StackContext) -> str | None:
        try:
            # The URL is built from settings (loopback by default), not from user input.
            with urllib.request.urlopen(f"{query_url(ctx.settings)}/api/services", timeout=5) as resp:  # noqa: S310
                return None if resp.status == 200 else f"/api/services answered {resp.status}"
        except urllib.error.HTTPError as exc:
            return f"/api/services answered {exc.code}"
        except OSError as exc:
            return f"/api/services unreachable ({type(exc).__name__})"
