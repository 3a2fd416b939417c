"""The connector worker: an app factory wiring what receives data (webhooks, ingest) and health.

The app's lifespan also keeps the webhook delivery log bounded (:class:`~metalake.expiry.ExpiryJanitor`) and, unless
``connect.scheduler_enabled`` is off, runs the scheduled crawls (:class:`~connectors.runtime.scheduler.CrawlScheduler`).

``metalake connect run`` serves :func:`create_app` with uvicorn on loopback. Webhooks authenticate by signature, the
ingest API by write key or OAuth access token; ``GET /healthz`` and ``GET /readyz`` (MongoDB and Kafka, each named when
down: ``metalake.http.health``) are public. Connectors and write keys are managed
through the admin API (``api.routes.connectors``, ``api.routes.write_keys``), which writes the control plane this
worker reads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connectors.ingest import router as ingest_router
from connectors.openlineage import router as openlineage_router
from connectors.openlineage.routes import PATH as OPENLINEAGE_PATH
from connectors.runtime.context import Runtime, plugins_from
from connectors.runtime.dedup import DeliveryLog
from connectors.runtime.errors import Counter
from connectors.runtime.lookups import LookupCache
from connectors.runtime.publisher import Publisher
from connectors.runtime.scheduler import CrawlScheduler
from connectors.runtime.webhooks import router as webhook_router
from connectors.settings import WorkerSettings
from control.audit import TenantAuditLog
from control.auth.gate import build_gate
from control.auth.protective import ProtectiveTags
from control.connectors import registry
from control.connectors.offsets import OffsetStore
from control.connectors.registry import ConnectorClass
from control.connectors.schedule import ScheduleStore
from control.connectors.store import ControlStore
from metalake.expiry import ExpiryJanitor
from metalake.http.bodies import BodyLimit
from metalake.http.health import Check, run_checks, standard_checks
from metalake.http.metrics import install_metrics
from metalake.http.problems import install_problem_handlers
from metalake.lease import LeaseStore
from metalake.mongo import mongo_client
from metalake.s3 import lake_storage_options
from metalake.sealing import sealer_for
from metalake.telemetry.metrics import readiness
from tenants.access.columns import PropagatedPaths
from tenants.naming import CONTROL_DATABASE

#: The intake routes' templates and the ``source`` their metrics carry (metalake_intake_request_seconds, the refused
#: requests in metalake_events_total); one source per kind of intake, whatever the plugin or tenant.
INTAKE_ROUTES = {
    "/webhooks/{slug}/{tenant_id}": "webhook",
    "/webhooks/{slug}/{tenant_id}/{name}": "webhook",
    "/v1/events": "ingest",
    OPENLINEAGE_PATH: "openlineage",
}


def build_runtime(
    settings: WorkerSettings,
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
        audit=TenantAuditLog(database, lambda: settings.lake_root, lake_storage_options(settings)),
        propagated=PropagatedPaths(client, lambda: settings.lake_root),
        protective=ProtectiveTags(
            database,
            settings.access.pii_tags,
            settings.access.protective_tags,
            ttl_s=settings.enforcement.cache_ttl_s,
        ).patterns,
    )


def create_app(
    settings: WorkerSettings,
    *,
    runtime: Runtime | None = None,
    plugins: Mapping[str, ConnectorClass] | None = None,
    checks: Mapping[str, Check] | None = None,
    schedules: ScheduleStore | None = None,
) -> FastAPI:
    """The worker app; ``runtime`` replaces the one built from ``settings``, ``checks`` the readiness checks (tests).
    Scheduled crawls run (``connect.scheduler_enabled``) over ``schedules``, by default the control plane's when the
    runtime is built here: a given runtime (unit tests' fakes) runs them only with ``schedules`` given too."""
    built = runtime or build_runtime(settings, plugins=plugins)
    # Their clients open at the first probe, on their own: the runtime's may be busy with a crawl.
    ready_checks = dict(checks) if checks is not None else standard_checks(settings, "mongo", "kafka")
    janitor = ExpiryJanitor(
        built.deliveries, settings.connect.webhook_delivery_prune_interval_s, name="connect.webhook_deliveries"
    )
    if schedules is None and runtime is None:
        schedules = ScheduleStore(mongo_client(settings)[CONTROL_DATABASE])
    enabled = settings.connect.scheduler_enabled and schedules is not None
    scheduler = CrawlScheduler(built, schedules) if enabled and schedules is not None else None

    def ready() -> bool:
        states = run_checks(ready_checks, settings.health.check_timeout_s)
        return all(state == "ok" for state in states.values())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # A round trip to MongoDB (the TTL index): off the event loop.
        await run_in_threadpool(janitor.start)
        if built.offload is not None:  # its processes start now, not on the first large body
            await run_in_threadpool(built.offload.start)
        if scheduler is not None:
            scheduler.start()
        unwatch = readiness(ready)  # metalake_ready: /readyz's checks, at each scrape
        yield
        unwatch()
        if scheduler is not None:
            await run_in_threadpool(scheduler.stop)
        await run_in_threadpool(janitor.stop)
        built.publisher.close()
        built.offsets.close()

    app = FastAPI(title="metalake connector worker", version="1", lifespan=lifespan)
    app.state.runtime = built
    app.state.scheduler = scheduler
    install_problem_handlers(app)
    # Every route's body is bounded while it is read; the webhook and ingest routes tighten it to their own limit.
    limits = settings.connect
    app.add_middleware(
        BodyLimit,
        max_bytes=max(limits.webhook_max_body_bytes, limits.ingest_max_body_bytes, limits.openlineage_max_body_bytes),
    )
    # Outermost: counts the body limit's answers too.
    install_metrics(app, settings.telemetry.metrics_token, intake=INTAKE_ROUTES)
    app.include_router(webhook_router)
    app.include_router(ingest_router)
    app.include_router(openlineage_router)

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """Liveness: the process serves requests (it does not probe Kafka or MongoDB)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    async def readyz() -> JSONResponse:
        """Readiness: MongoDB and Kafka answer within health.check_timeout_s; 503 names the one that does not
        (``"down: <exception class>"``, never the driver's text)."""
        states = await run_in_threadpool(run_checks, ready_checks, settings.health.check_timeout_s)
        ready = all(state == "ok" for state in states.values())
        body = {"status": "ready" if ready else "not-ready", "checks": states}
        return JSONResponse(body, status_code=200 if ready else 503, headers={"Cache-Control": "no-store"})

    return app
