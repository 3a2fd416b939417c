"""``POST /api/v1/lineage``: the endpoint the OpenLineage HTTP transport posts to (its default, as Marquez serves it).

The body is one OpenLineage event (RunEvent, JobEvent or DatasetEvent), JSON, optionally gzip-compressed
(``Content-Encoding: gzip``, the transport's ``compression: gzip``). The caller authenticates as on the ingest API
(:mod:`connectors.ingest.auth`: a write key or an access token with ``events:write``, as ``Authorization: Bearer``,
which is what the transport's ``api_key`` auth sends); the credential decides the tenant.

The whole event is mapped (:mod:`.mapping`) before anything is published: an event that cannot be mapped is refused
with 400 problem+json whose ``field`` is the JSON pointer at fault, and nothing is published. 201 means every metalake
event of it is durable in Kafka; if Kafka does not confirm, 503 with Retry-After (a resend produces the same event ids,
which consumers deduplicate). The OpenLineage Python client 1.54 has no batch endpoint: one event per request.
"""

from __future__ import annotations

import logging
import zlib
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connectors.ingest.auth import IngestCallerDep
from connectors.ingest.parsing import JSON_TYPES, media_type
from connectors.openlineage.bounds import InvalidLineage, TooManyEvents, text_budget
from connectors.openlineage.mapping import Mapped, body_digest, map_event
from connectors.runtime.accept import publish_confirmed
from connectors.runtime.bodies import read_limited
from connectors.runtime.context import Runtime, RuntimeDep
from metalake.http.json_body import NotJson, loads
from metalake.http.problems import Problem
from metalake.telemetry import bind_tenant

log = logging.getLogger(__name__)

router = APIRouter(tags=["openlineage"])

PATH = "/api/v1/lineage"


def _invalid(detail: str, field: str = "body", status: int = 400, slug: str = "invalid-body") -> Problem:
    return Problem(status, slug, detail, field=field)


def _gunzip(body: bytes, limit: int) -> bytes:
    # Bounded: a small gzip body may inflate without end (a "zip bomb"); the decompressed size counts against the limit.
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error:
        raise _invalid("the body is not valid gzip", "content-encoding") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise Problem(413, "payload-too-large", f"the decompressed body is larger than {limit} bytes", field="body")
    if not inflater.eof:
        raise _invalid("the gzip body is truncated", "content-encoding")
    return out


def inflate(body: bytes, content_type: str | None, content_encoding: str | None, limit: int) -> bytes:
    """The JSON text of a request body (decompressed); a :class:`Problem` naming the header at fault."""
    kind = media_type(content_type)
    if kind not in JSON_TYPES:
        raise _invalid(
            f"unsupported content type {kind[:80]!r}: use application/json",
            "content-type",
            415,
            "unsupported-media-type",
        )
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "gzip":
        return _gunzip(body, limit)
    if encoding != "identity":
        raise _invalid(
            f"unsupported content encoding {encoding[:40]!r}: use gzip or none",
            "content-encoding",
            415,
            "unsupported-media-type",
        )
    return body


def parse(text: bytes) -> Any:
    """The JSON value of a (decompressed) body; a :class:`Problem` saying why it is not JSON (too deeply nested too)."""
    try:
        return loads(text)
    except NotJson as exc:
        raise _invalid(f"the body is {exc}") from None


def _publish(runtime: Runtime, tenant: str, mapped: Mapped) -> None:
    publish_confirmed(runtime, tenant, mapped.events, source="openlineage")
    with bind_tenant(tenant):
        log.info(
            "openlineage.accepted",
            extra={"events": len(mapped.events), "kind": mapped.kind, "event_type": mapped.event_type},
        )


@router.post(PATH, status_code=201)
async def lineage(request: Request, caller: IngestCallerDep, runtime: RuntimeDep) -> JSONResponse:
    """Map one OpenLineage event to metalake events and publish them all (confirmed), or none."""
    limits = runtime.settings.connect
    body = await read_limited(request, limits.openlineage_max_body_bytes)
    text = inflate(
        body,
        request.headers.get("content-type"),
        request.headers.get("content-encoding"),
        limits.openlineage_max_body_bytes,
    )
    value = parse(text)
    try:
        mapped = map_event(
            value,
            caller.tenant,
            body_digest(body),
            max_events=limits.openlineage_max_events,
            max_text=text_budget(len(text)),
        )
    except InvalidLineage as exc:
        raise Problem(400, "invalid-lineage-event", str(exc), field=exc.pointer) from None
    except TooManyEvents as exc:
        raise Problem(413, "too-many-events", str(exc), field=exc.pointer) from None
    if mapped.events:
        await run_in_threadpool(_publish, runtime, caller.tenant, mapped)
    return JSONResponse(mapped.summary(), status_code=201)
