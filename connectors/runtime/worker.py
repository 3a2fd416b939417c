"""The connector worker: an app factory wiring webhooks, ingest, management and health, plus how to serve it.

``metalake connect run`` serves :func:`create_app` with uvicorn on loopback. Webhooks authenticate by signature, the
ingest API by write key, management by the worker's admin token; ``GET /healthz`` is public.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from fastapi import FastAPI

from connectors.ingest import router as ingest_router
from connectors.runtime.context import Runtime, plugins_from
from connectors.runtime.dedup import DeliveryLog
from connectors.runtime.errors import Counter
from connectors.runtime.lookups import LookupCache
from connectors.runtime.management import router as management_router
from connectors.runtime.publisher import Publisher
from connectors.runtime.webhooks import router as webhook_router
from control.connectors import registry
from control.connectors.offsets import OffsetStore
from control.connectors.registry import ConnectorClass
from control.connectors.store import ControlStore
from metalake.http.problems import install_problem_handlers
from metalake.lease import LEASES, LeaseStore
from metalake.mongo import mongo_client
from metalake.settings import Settings
from tenants.naming import CONTROL_DATABASE

log = logging.getLogger(__name__)

# Tokens that must never guard a real worker (copied from examples or left from a template).
_PLACEHOLDERS = frozenset({"changeme", "change-me", "secret", "admin", "token", "password", "dev", "test"})
MIN_ADMIN_TOKEN = 24


class WorkerConfigError(RuntimeError):
    """The worker's settings are not safe to start with."""


def check_admin_token(settings: Settings) -> None:
    """Refuse to start without a strong admin token, unless ``connect.dev_mode`` is set explicitly."""
    token = settings.connect.admin_token
    if settings.connect.dev_mode:
        if token is None:
            log.warning("connect.dev_mode", extra={"detail": "no admin token: management routes answer 503"})
        return
    if token is None:
        raise WorkerConfigError("METALAKE_CONNECT__ADMIN_TOKEN is required (or METALAKE_CONNECT__DEV_MODE=true)")
    value = token.get_secret_value()
    if value.lower() in _PLACEHOLDERS or len(value) < MIN_ADMIN_TOKEN:
        raise WorkerConfigError(f"METALAKE_CONNECT__ADMIN_TOKEN must be a random string of {MIN_ADMIN_TOKEN}+ chars")


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
        store=ControlStore(database),
        deliveries=DeliveryLog(database),
        publisher=Publisher(settings),
        offsets=OffsetStore(settings),
        plugins=plugins_from(plugins) if plugins is not None else registry.plugins(),
        dlq_counter=dlq_counter,
        lookups=LookupCache(settings.connect.lookup_cache_ttl_s),
        leases=LeaseStore(database[LEASES]),
    )


def create_app(
    settings: Settings,
    *,
    runtime: Runtime | None = None,
    plugins: Mapping[str, ConnectorClass] | None = None,
) -> FastAPI:
    """The worker app. Raises :class:`WorkerConfigError` for unsafe settings (see :func:`check_admin_token`)."""
    check_admin_token(settings)
    built = runtime or build_runtime(settings, plugins=plugins)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        built.publisher.close()
        built.offsets.close()

    app = FastAPI(title="metalake connector worker", version="1", lifespan=lifespan)
    app.state.runtime = built
    install_problem_handlers(app)
    app.include_router(webhook_router)
    app.include_router(ingest_router)
    app.include_router(management_router)

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """Liveness: the process serves requests (it does not probe Kafka or MongoDB)."""
        return {"status": "ok"}

    return app
