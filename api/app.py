"""The tenant-admin API: an app factory. ``metalake api`` serves it."""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, FastAPI
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from api import redaction
from api.auth.first import AuthenticateFirst
from api.auth.runtime import AuthRuntime, build_auth
from api.context import ApiContext
from api.openapi import install_openapi
from api.problems import install_problem_handlers
from api.routes.health import ready
from api.services import resume
from api.services.auditbatch import AuditBatcher
from api.services.events import close_publisher
from api.settings import AdminApiSettings
from control.provisioning.queue import ProvisioningQueue
from metalake.http.bodies import BodyLimit
from metalake.http.metrics import install_metrics
from metalake.mongo import mongo_client
from metalake.s3 import lake_storage_options
from metalake.telemetry.metrics import PROVISIONING_OLDEST, PROVISIONING_QUEUE_DEPTH, readiness
from tenants.naming import CONTROL_DATABASE

log = logging.getLogger(__name__)

# One module per resource under api/routes, each exposing ``router``. Add a line here to serve a new one.
ROUTERS: tuple[str, ...] = (
    "health",
    "oauth",
    "clients",
    "platform_clients",
    "connectors",
    "write_keys",
    "assets",
    "sql",
    "shares",
    "tenants",
    "erasures",
    "audit",
    "propagation",
    "subscriptions",
    "deadletters",
    "engines",
    "masking",
)


def _router(module: str) -> APIRouter:
    router = importlib.import_module(f"api.routes.{module}").router
    assert isinstance(router, APIRouter)  # noqa: S101 - the routes package's convention
    return router


def publish_signing_key(auth: AuthRuntime) -> None:
    """Make the signing key (if there is none yet) when the API starts, not with the first token: Trino reads the JWKS
    when it starts and then every 15 minutes, so a key made later would be unknown to it meanwhile."""
    if auth.settings.api.external_issuer is not None or auth.settings.api.key_encryption_key is None:
        return
    try:
        auth.keys.signing_key()
    except PyMongoError as exc:
        # The first token makes it then; the API still starts (its readiness says whether MongoDB answers).
        log.warning("api.signing_key_unavailable", extra={"error": type(exc).__name__})


def audit_batcher(settings: AdminApiSettings) -> AuditBatcher | None:
    api = settings.api
    if api.audit_flush_s <= 0:
        return None  # every row committed before its response
    return AuditBatcher(
        lake_storage_options(settings),
        interval_s=api.audit_flush_s,
        max_rows=api.audit_batch_rows,
        max_buffered=api.audit_buffer_max,
    )


def create_app(settings: AdminApiSettings, *, mongo: MongoClient[dict[str, Any]] | None = None) -> FastAPI:
    client = mongo or mongo_client(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        publish_signing_key(app.state.auth)
        stop_resume = resume.start(app.state.ctx)  # the urn_keys backfill, in a thread
        # metalake_ready (/readyz's checks) and the provisioning queue the API fills (the lake worker drains it and
        # reports it too, as the erasure queue), read at each scrape.
        queue = ProvisioningQueue(client[CONTROL_DATABASE])
        unwatch = [
            readiness(lambda: ready(app.state.ctx)),
            PROVISIONING_QUEUE_DEPTH.watch(lambda: [(float(queue.depth()), {})]),
            PROVISIONING_OLDEST.watch(lambda: [(queue.oldest(datetime.now(UTC)), {})]),
        ]
        yield
        for stop in unwatch:
            stop()
        stop_resume()
        # Every accepted mutation's audit row is committed before the process goes.
        if app.state.ctx.audit_batcher is not None:
            app.state.ctx.audit_batcher.close()
        close_publisher(app)
        if mongo is None:
            client.close()

    app = FastAPI(title="metalake admin API", version="1", lifespan=lifespan)
    app.state.ctx = ApiContext(settings=settings, mongo=client, audit_batcher=audit_batcher(settings))
    app.state.auth = build_auth(settings, client)
    install_problem_handlers(app)
    redaction.install()  # secrets in paths (share ids, engine keys) never in uvicorn's logs
    # The last added runs first: the body limit (a declared length over it is refused unread), then the token of a
    # protected route, both before FastAPI reads and parses a body.
    app.add_middleware(AuthenticateFirst, api=app)
    app.add_middleware(BodyLimit, max_bytes=settings.api.max_body_bytes)
    install_metrics(app, settings.telemetry.metrics_token)  # outermost: counts the answers of the layers above
    for module in ROUTERS:
        app.include_router(_router(module))
    install_openapi(app)
    return app
