"""The connector worker: an app factory wiring what receives data (webhooks, ingest) and health.

The app's lifespan also keeps the webhook delivery log bounded (:class:`~metalake.expiry.ExpiryJanitor`).

``metalake connect run`` serves :func:`create_app` with uvicorn on loopback. Webhooks authenticate by signature, the
ingest API by write key or OAuth access token; ``GET /healthz`` is public. Connectors and write keys are managed
through the admin API (``api.routes.connectors``, ``api.routes.write_keys``), which writes the control plane this
worker reads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from connectors.ingest import router as ingest_router
from connectors.runtime.context import Runtime, plugins_from
from connectors.runtime.dedup import DeliveryLog
from connectors.runtime.errors import Counter
from connectors.runtime.lookups import LookupCache
from connectors.runtime.publisher import Publisher
from connectors.runtime.webhooks import router as webhook_router
from control.audit import TenantAuditLog
from control.auth.gate import build_gate
from control.connectors import registry
from control.connectors.offsets import OffsetStore
from control.connectors.registry import ConnectorClass
from control.connectors.store import ControlStore
from metalake.expiry import ExpiryJanitor
from metalake.http.bodies import BodyLimit
from metalake.http.problems import install_problem_handlers
from metalake.lease import LeaseStore
from metalake.mongo import mongo_client
from metalake.sealing import sealer_for
from metalake.settings import Settings
from tenants.access.columns import PropagatedPaths
from tenants.naming import CONTROL_DATABASE


def build_runtime(
    settings: Settings,
    *,
    plugins: Mapping[str, ConnectorClass] | None = None,
    dlq_counter: Counter | None = None,
) -> Runtime:
    """The worker's collaborators. ``plugins`` replaces the entry-point registry (tests, embedding)."""
    client = mongo_client(settings)
    database = client[CONTROL_DATABASE]
    return Runtime(
        settings=settings,
        store=ControlStore(database, sealer_for(settings)),
        deliveries=DeliveryLog(database, timedelta(seconds=settings.connect.webhook_delivery_retention_s)),
        publisher=Publisher(settings),
        offsets=OffsetStore(settings),
        plugins=plugins_from(plugins) if plugins is not None else registry.plugins(),
        gate=build_gate(settings, database),
        dlq_counter=dlq_counter,
        lookups=LookupCache(settings.connect.lookup_cache_ttl_s),
        leases=LeaseStore.in_database(database),
        audit=TenantAuditLog(database, lambda: settings.lake_root),
        propagated=PropagatedPaths(client, lambda: settings.lake_root),
    )


def create_app(
    settings: Settings,
    *,
    runtime: Runtime | None = None,
    plugins: Mapping[str, ConnectorClass] | None = None,
) -> FastAPI:
    """The worker app; ``runtime`` replaces the one built from ``settings`` (tests)."""
    built = runtime or build_runtime(settings, plugins=plugins)
    janitor = ExpiryJanitor(
        built.deliveries, settings.connect.webhook_delivery_prune_interval_s, name="connect.webhook_deliveries"
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # A round trip to MongoDB (the TTL index): off the event loop.
        await run_in_threadpool(janitor.start)
        yield
        await run_in_threadpool(janitor.stop)
        built.publisher.close()
        built.offsets.close()

    app = FastAPI(title="metalake connector worker", version="1", lifespan=lifespan)
    app.state.runtime = built
    install_problem_handlers(app)
    # Every route's body is bounded while it is read; the webhook and ingest routes tighten it to their own limit.
    limits = settings.connect
    app.add_middleware(BodyLimit, max_bytes=max(limits.webhook_max_body_bytes, limits.ingest_max_body_bytes))
    app.include_router(webhook_router)
    app.include_router(ingest_router)

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """Liveness: the process serves requests (it does not probe Kafka or MongoDB)."""
        return {"status": "ok"}

    return app
