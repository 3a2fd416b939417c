"""The slice of the Freshdesk REST API v2 the freshdesk destination calls: create, search, update a ticket, add a
note, list conversations. Checks basic auth (API key as user, ``X`` as password), JSON bodies, the fields Freshdesk
requires and refuses, the search query's syntax, and records each ticket's status history."""

from __future__ import annotations

import base64
import re
from typing import Any

from tests._support.fake_http import FakeServer, Reply, Seen

_TICKET = re.compile(r"^/api/v2/tickets/(\d+)(/notes|/conversations)?$")
_QUERY = re.compile(r"^\"tag:'([A-Za-z0-9_.-]+)' AND \(status:2 OR status:3\)\"$")
_STATUSES = {2, 3, 4, 5}


def _error(field: str, message: str, code: str = "invalid_value") -> Reply:
    return Reply(
        400, {"description": "Validation failed", "errors": [{"field": field, "message": message, "code": code}]}
    )


class FreshdeskServer(FakeServer):
    def __init__(self, api_key: str) -> None:
        super().__init__()
        self.auth = "Basic " + base64.b64encode(f"{api_key}:X".encode()).decode()
        self.tickets: dict[int, dict[str, Any]] = {}
        self.notes: dict[int, list[dict[str, Any]]] = {}
        # Every status a ticket had, in order (2 at creation).
        self.history: dict[int, list[int]] = {}
        self._next = 1

    def calls(self) -> list[tuple[str, str]]:
        return [(r.method, r.path) for r in self.requests]

    def route(self, req: Seen) -> Reply:
        if req.headers.get("Authorization") != self.auth:
            return Reply(
                401, {"code": "invalid_credentials", "message": "You have to be logged in to perform this action."}
            )
        if req.method in ("POST", "PUT") and req.headers.get("Content-Type") != "application/json":
            return Reply(
                415, {"code": "invalid_content_type", "message": "Content-Type header is not application/json"}
            )
        if req.path == "/api/v2/tickets" and req.method == "POST":
            return self._create(req.json() or {})
        if req.path == "/api/v2/search/tickets" and req.method == "GET":
            return self._search(req.query.get("query", [""])[0])
        match = _TICKET.match(req.path)
        if match is None or int(match.group(1)) not in self.tickets:
            return Reply(404, None)
        ticket, sub = int(match.group(1)), match.group(2)
        if sub is None and req.method == "PUT":
            return self._update(ticket, req.json() or {})
        if sub is None and req.method == "GET":
            return Reply(200, self.tickets[ticket])
        if sub == "/notes" and req.method == "POST":
            body = req.json() or {}
            if not isinstance(body.get("body"), str) or not body["body"]:
                return _error("body", "It should not be blank as this is a mandatory field", "missing_field")
            entry = {
                "id": 5000 + sum(len(n) for n in self.notes.values()),
                "body": body["body"],
                "private": bool(body.get("private", True)),
                "ticket_id": ticket,
            }
            self.notes[ticket].append(entry)
            return Reply(201, entry)
        if sub == "/conversations" and req.method == "GET":
            return Reply(200, self.notes[ticket])
        return Reply(405, None)

    def _create(self, body: dict[str, Any]) -> Reply:
        if not isinstance(body.get("email"), str) or "@" not in body["email"]:
            return _error("email", "Please fill at least 1 of requester_id, phone, email fields", "missing_field")
        for field in ("subject", "description"):
            if not isinstance(body.get(field), str) or not body[field]:
                return _error(field, "It should not be blank as this is a mandatory field", "missing_field")
        if body.get("status") not in _STATUSES:
            return _error("status", "It should be one of these values: '2,3,4,5'")
        if body.get("priority") not in (1, 2, 3, 4):
            return _error("priority", "It should be one of these values: '1,2,3,4'")
        tags = body.get("tags", [])
        if not isinstance(tags, list) or any(not isinstance(t, str) or not 0 < len(t) <= 32 for t in tags):
            return _error("tags", "It should only contain elements that have maximum of 32 characters")
        unknown = set(body) - {"email", "subject", "description", "status", "priority", "tags", "group_id", "source"}
        if unknown:
            return _error(sorted(unknown)[0], "Unexpected/invalid field in request", "invalid_field")
        ticket_id = self._next
        self._next += 1
        self.tickets[ticket_id] = {"id": ticket_id, **body}
        self.notes[ticket_id] = []
        self.history[ticket_id] = [body["status"]]
        return Reply(201, self.tickets[ticket_id])

    def _update(self, ticket: int, body: dict[str, Any]) -> Reply:
        if set(body) != {"status"} or body["status"] not in _STATUSES:
            return _error("status", "It should be one of these values: '2,3,4,5'")
        self.tickets[ticket]["status"] = body["status"]
        self.history[ticket].append(body["status"])
        return Reply(200, self.tickets[ticket])

    def _search(self, query: str) -> Reply:
        match = _QUERY.match(query)
        if match is None:
            return Reply(
                400, {"description": "Validation failed", "errors": [{"field": "query", "code": "invalid_value"}]}
            )
        found = [t for t in self.tickets.values() if match.group(1) in t.get("tags", []) and t["status"] in (2, 3)]
        return Reply(200, {"results": found, "total": len(found)})
