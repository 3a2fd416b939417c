"""Liveness and readiness: public, cheap, and never a reason to touch tenant data."""

from __future__ import annotations

from typing import Literal

from confluent_kafka.admin import AdminClient
from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from api.context import ApiContext, ContextDep
from api.problems import MEDIA_TYPE, Problem
from api.schemas.health import Health, Readiness
from metalake.kafka.config import client_config

router = APIRouter(tags=["health"])

_PROBE_TIMEOUT_S = 3.0


@router.get("/healthz", summary="Liveness: the process answers", response_model=Health)
def healthz() -> Health:
    return Health(status="ok")


def _mongo_ok(ctx: ContextDep) -> bool:
    try:
        ctx.mongo.admin.command("ping", maxTimeMS=int(_PROBE_TIMEOUT_S * 1000))
    except Exception:  # noqa: BLE001 - any failure means not ready; the kind is logged by the driver
        return False
    return True


def _kafka_ok(ctx: ContextDep) -> bool:
    try:
        admin = AdminClient(client_config(ctx.settings))
        admin.list_topics(timeout=_PROBE_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - any failure means not ready
        return False
    return True


def ready(ctx: ApiContext) -> bool:
    """What /readyz checks, as one answer (``metalake_ready``)."""
    return _mongo_ok(ctx) and _kafka_ok(ctx)


@router.get(
    "/readyz",
    summary="Readiness: MongoDB and Kafka are reachable",
    response_model=Readiness,
    responses={
        200: {
            "content": {"application/json": {"example": {"status": "ready", "checks": {"mongo": "ok", "kafka": "ok"}}}}
        },
        503: {
            "description": "a dependency is unreachable (problem+json with the same checks)",
            "content": {
                MEDIA_TYPE: {
                    "example": {
                        "type": "/problems/not-ready",
                        "title": "Service Unavailable",
                        "status": 503,
                        "detail": "not ready: kafka",
                        "checks": {"mongo": "ok", "kafka": "unreachable"},
                    }
                }
            },
        },
    },
)
async def readyz(ctx: ContextDep) -> Readiness:
    mongo = await run_in_threadpool(_mongo_ok, ctx)
    kafka = await run_in_threadpool(_kafka_ok, ctx)
    checks: dict[str, Literal["ok", "unreachable"]] = {
        "mongo": "ok" if mongo else "unreachable",
        "kafka": "ok" if kafka else "unreachable",
    }
    if mongo and kafka:
        return Readiness(status="ready", checks=checks)
    failed = ", ".join(name for name, state in checks.items() if state != "ok")
    raise Problem(503, "not-ready", f"not ready: {failed}", extra={"checks": checks})
