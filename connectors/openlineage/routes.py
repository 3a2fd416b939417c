"""``POST /api/v1/lineage``: the endpoint the OpenLineage HTTP transport posts to (its default, as Marquez serves it).

The body is one OpenLineage event (RunEvent, JobEvent or DatasetEvent), JSON, optionally gzip-compressed
(``Content-Encoding: gzip``, the transport's ``compression: gzip``). The caller authenticates as on the ingest API
(:mod:`connectors.ingest.auth`: a write key or an access token with ``events:write``, as ``Authorization: Bearer``,
which is what the transport's ``api_key`` auth sends); the credential decides the tenant.

The request is admitted before its body is read (:mod:`connectors.runtime.admission`: 429 when the tenant has too
many in progress or its events budget is spent), and the body is parsed and mapped off the event loop, a large one in
the worker's pool of processes (:mod:`connectors.runtime.offload`). The whole event is mapped (:mod:`.mapping`)
before anything is published: an event that cannot be mapped is refused
with 400 problem+json whose ``field`` is the JSON pointer at fault, and nothing is published. 201 means every metalake
event of it is durable in Kafka; if Kafka does not confirm, 503 with Retry-After (a resend produces the same event ids,
which consumers deduplicate). The OpenLineage Python client 1.54 has no batch endpoint: one event per request.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connectors.ingest.auth import IngestCallerDep
from connectors.ingest.parsing import JSON_TYPES, media_type
from connectors.openlineage.bounds import InvalidLineage, TooManyEvents, text_budget
from connectors.openlineage.mapping import body_digest, map_event
from connectors.runtime.accept import Batch, publish_confirmed
from connectors.runtime.admission import Ticket
from connectors.runtime.bodies import read_limited
from connectors.runtime.context import Runtime, RuntimeDep
from connectors.runtime.publisher import Encoded, encode
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


def parse(text: bytes) -> Any:  # noqa: ANN401
    """The JSON value of a (decompressed) body; a :class:`Problem` saying why it is not JSON (too deeply nested too)."""
    try:
        return loads(text)
    except NotJson as exc:
        raise _invalid(f"the body is {exc}") from None


@dataclass(frozen=True)
class Decoded:
    """A request's answer (:meth:`Mapped.summary`) and its events, encoded for Kafka where they were mapped."""

    summary: dict[str, Any]
    encoded: list[Encoded]


def decode(
    body: bytes, content_type: str | None, content_encoding: str | None, tenant: str, limits: tuple[int, int]
) -> Decoded:
    """The metalake events of one request's body (``limits``: the body limit, the events limit), or the
    :class:`Problem` that refuses it. CPU work of plain values: it runs in the worker's pool of processes for a large
    body (:mod:`connectors.runtime.offload`), which also encodes the events, so the worker only hands them to Kafka."""
    max_body, max_events = limits
    text = inflate(body, content_type, content_encoding, max_body)
    value = parse(text)
    try:
        mapped = map_event(value, tenant, body_digest(body), max_events=max_events, max_text=text_budget(len(text)))
    except InvalidLineage as exc:
        raise Problem(400, "invalid-lineage-event", str(exc), field=exc.pointer) from None
    except TooManyEvents as exc:
        raise Problem(413, "too-many-events", str(exc), field=exc.pointer) from None
    return Decoded(mapped.summary(), encode(mapped.events))


def _publish(runtime: Runtime, tenant: str, decoded: Decoded, ticket: Ticket) -> None:
    publish_confirmed(runtime, Batch(tenant, encoded=decoded.encoded), source="openlineage", ticket=ticket)
    with bind_tenant(tenant):
        summary = decoded.summary
        log.info(
            "openlineage.accepted",
            extra={"events": len(decoded.encoded), "kind": summary["kind"], "event_type": summary["eventType"]},
        )


@router.post(PATH, status_code=201)
async def lineage(request: Request, caller: IngestCallerDep, runtime: RuntimeDep) -> JSONResponse:
    """Map one OpenLineage event to metalake events and publish them all (confirmed), or none."""
    limits = runtime.settings.connect
    headers = request.headers
    # Admitted (or refused) once the credential named the tenant, before a byte of the body is read.
    with runtime.admit(caller.tenant, headers.get("content-length")) as ticket:
        body = await read_limited(request, limits.openlineage_max_body_bytes)
        decoded = await runtime.parse(
            caller.tenant,
            len(body),
            decode,
            body,
            headers.get("content-type"),
            headers.get("content-encoding"),
            caller.tenant,
            (limits.openlineage_max_body_bytes, limits.openlineage_max_events),
        )
        if decoded.encoded:
            await run_in_threadpool(_publish, runtime, caller.tenant, decoded, ticket)
        else:
            ticket.settle(0)
    return JSONResponse(decoded.summary, status_code=201)
