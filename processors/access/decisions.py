"""The lake Trino's OPA decision endpoint, served by the access processor when ``access.mode`` is ``opa``.

Trino's OPA access control (``plugin/opa``) POSTs every access check to ``/v1/opa/lake/<key>/<decision>``:
``allow`` (one resource), ``batch`` (the indexes of ``filterResources`` kept: ``SHOW SCHEMAS``, ``information_schema``)
and ``column-masks`` (a table's masked columns). The decisions are ``processors.access.lake_decisions``'; this module
reads what they depend on, each tenant's state and stored masks (``tenants.access.sync``'s ``trino_access``), through
caches of ``access.decisions.cache_ttl_s`` (a suspension, or a tag's mask, reaches Trino within that), and answers.

Trino's OPA client sends no header of ours, so the key is in the path, compared in constant time; a wrong key is a
401 and its body is never read. A failure (MongoDB unreachable with nothing cached) is a 503: Trino then refuses the
query (OPA access control fails closed). Served by daemon threads (``ThreadingHTTPServer``): each check is a cached
lookup, and Trino sends several per query.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import SecretStr, ValidationError
from pymongo import MongoClient

from control.trino_opa import OpaQuery
from metalake.cache import TtlCache
from processors.access.lake_decisions import LakePolicy, lake_user
from tenants.access.settings import AccessRulesSettings
from tenants.access.sync import stored_masks
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantRegistry, TenantState
from tenants.trino_schemas import schema_namer

log = logging.getLogger(__name__)

PATH = re.compile(r"/v1/opa/lake/(?P<key>[^/]+)/(?P<decision>allow|batch|column-masks)")
_DENIED = frozenset({TenantState.SUSPENDED, TenantState.DELETING})
_MAX_BODY = 4 << 20  # a FilterTables batch of a large schema; Trino's own requests stay far below


class LakeDecisions:
    """The decisions with their inputs read from the control plane, cached per tenant."""

    def __init__(self, settings: AccessRulesSettings, mongo: MongoClient[dict[str, Any]]) -> None:
        ttl_s = settings.access.decisions.cache_ttl_s
        self.policy = LakePolicy(settings.trino.catalog, schema_namer(settings), settings.access.mask_style)
        self._control = mongo[CONTROL_DATABASE]
        self._registry = TenantRegistry(self._control)
        self._active: TtlCache[str, bool] = TtlCache(ttl_s, max_entries=100_000)
        self._masks: TtlCache[str, dict[str, dict[str, str | None]]] = TtlCache(ttl_s, max_entries=100_000)

    def _is_active(self, user: str) -> bool:
        parsed = lake_user(user)
        if parsed is None:
            return True

        def load() -> bool:
            # Unregistered: a tenant the job met before anyone registered it (pooled, active), as the rules had it.
            record = self._registry.get(parsed.tenant)
            return record is None or record.state not in _DENIED

        return self._active.get(parsed.tenant, load)

    def answer(self, decision: str, query: OpaQuery) -> object:
        """The ``result`` of ``decision`` for ``query``."""
        user, action = query.input.context.identity.user, query.input.action
        active = self._is_active(user)
        if decision == "allow":
            return self.policy.allow(user, active, action.resource)
        resources = action.filterResources or []
        if decision == "batch":
            return self.policy.batch(action.operation, user, active, resources)
        columns = [
            (c.catalogName, c.schemaName, c.tableName, c.columnName, c.columnType)
            for c in (r.column for r in resources)
            if c is not None
        ]
        parsed = lake_user(user)
        if parsed is None or not active or len(columns) != len(resources):
            return []
        masked = self._masks.get(parsed.tenant, lambda: stored_masks(self._control, parsed.tenant))
        return [{"index": i, "viewExpression": {"expression": e}} for i, e in self.policy.masks(user, columns, masked)]


# A decision's name and the request -> its ``result`` (:meth:`LakeDecisions.answer`).
Decide = Callable[[str, OpaQuery], object]


def _handler(decide: Decide, key: bytes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            match = PATH.fullmatch(self.path)
            if match is None:
                self._problem(404, "not-found", "no such decision")
                return
            if not hmac.compare_digest(match.group("key").encode(), key):
                self._problem(401, "invalid-key", "wrong decision key")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= _MAX_BODY:
                self._problem(400, "invalid-request", "a JSON body of at most 4 MiB is required")
                return
            try:
                query = OpaQuery.model_validate_json(self.rfile.read(length))
            except ValidationError as exc:
                first = exc.errors()[0]
                field = "/".join(str(p) for p in first.get("loc", ())) or "(root)"
                self._problem(400, "invalid-request", f"{field}: {first.get('msg', 'invalid')}")
                return
            try:
                result = decide(match.group("decision"), query)
            except Exception as exc:  # noqa: BLE001 - every failure answers the same; Trino fails the query
                log.error("access.decision_failed", extra={"error": type(exc).__name__})
                self._problem(503, "decision-unavailable", "the decision could not be made; it has been logged")
                return
            self._send(200, "application/json", {"result": result})

        def _problem(self, status: int, slug: str, detail: str) -> None:
            body = {"type": f"https://metalake.dev/problems/{slug}", "title": slug, "status": status, "detail": detail}
            self._send(status, "application/problem+json", body)

        def _send(self, status: int, content_type: str, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the path holds the key: nothing of the request is logged

    return Handler


class DecisionServer:
    """``/v1/opa/lake/<key>/...`` on ``host:port`` (port 0: any free one, for tests)."""

    def __init__(self, decide: Decide, key: SecretStr, host: str, port: int) -> None:
        handler = _handler(decide, key.get_secret_value().encode())
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="lake-decisions", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> DecisionServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def serve_decisions(settings: AccessRulesSettings, mongo: MongoClient[dict[str, Any]]) -> Callable[[], None]:
    """Start the decision server when ``access.mode`` is ``opa``; returns what stops it (nothing otherwise)."""
    if settings.access.mode != "opa":
        return lambda: None
    section = settings.access.decisions
    decide = LakeDecisions(settings, mongo).answer
    server = DecisionServer(decide, settings.decisions_key, section.host, section.port).start()
    log.info("access.decisions_serving", extra={"port": server.port})
    return server.close
