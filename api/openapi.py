"""The OpenAPI document: FastAPI's, plus the description of the auth model and the public routes marked public."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from api.problems import MEDIA_TYPE
from api.schemas.engines import OPA_ANSWERS, OpaQuery

DESCRIPTION = """\
The metalake tenant-admin API.

**Authentication.** OAuth 2 client credentials: `POST /oauth/token` with the client's id and secret (HTTP Basic or
form fields) returns an RFC 9068 JWT access token; send it as `Authorization: Bearer <token>`. Every route needs a
token except `/healthz`, `/readyz`, `/oauth/token`, `/.well-known/*` and share links (`/share/...`). The OPA
decision endpoints of customers' Trino engines (`/v1/opa/{key}/...`) take no token: the engine's key in the path
authenticates them (Trino's OPA client sends no header; docs/enforcement.md).

**Scopes.** `platform:admin` (everything, every tenant), `tenant:admin`, `tenant:read`, `events:write`, `sql:read`,
and `pii:read` (PII in clear through SQL; granted per client, never by a role). A token is bound to one tenant;
another tenant's objects answer 404.

**Errors** are RFC 9457 `application/problem+json` with `type`, `title`, `status`, `detail` and, for bad input,
`field`. **Rate limits** are per client and per tenant (all its clients together): 429 with `Retry-After`; heavy
work (dead letters, audit, Snowflake script, connector offsets, dry runs) has a per-tenant concurrency share (429)
and bounded pools (503), both at once. **Quotas**: one object more than a tenant's cap is `409 quota-exceeded`.
"""

PUBLIC_PATHS = ("/healthz", "/readyz", "/oauth/token", "/.well-known/", "/share/", "/v1/opa/")

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details.",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "examples": ["/problems/invalid-token"]},
        "title": {"type": "string", "examples": ["Unauthorized"]},
        "status": {"type": "integer", "examples": [401]},
        "detail": {"type": "string", "examples": ["token expired"]},
        "instance": {"type": "string"},
        "field": {"type": "string", "description": "The request field at fault, for bad input."},
    },
    "additionalProperties": True,
}

_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}

# The answers every protected operation can give, whatever the route documents itself.
_AUTH_ERRORS: dict[str, tuple[str, str, str]] = {
    "401": ("Missing or invalid access token (WWW-Authenticate: Bearer ...).", "invalid-token", "token expired"),
    "403": (
        "The token lacks a required scope, or its tenant is suspended.",
        "insufficient-scope",
        "needs tenant:admin",
    ),
    "429": ("Rate limit of this client or its tenant exceeded; see Retry-After.", "rate-limited", "retry in 1 s"),
    "503": (
        "The token issuer's keys or the control plane are unreachable, or the token checks are saturated.",
        "auth-unavailable",
        "retry shortly",
    ),
}
_TENANT_ERROR = ("No such tenant (also for another tenant's objects).", "tenant-not-found", "no such tenant")
_BODY_ERROR = ("The body cannot be parsed.", "bad-request", "There was an error parsing the body")
_CURSOR_ERROR = ("The cursor is not one this listing handed out.", "invalid-cursor", "cursor: not a cursor")
_VALIDATION_ERROR = ("Invalid request; `field` names the field at fault.", "invalid-request", "limit: too large")


def _problem_response(description: str, slug: str, detail: str, status: str) -> dict[str, Any]:
    example = {"type": f"/problems/{slug}", "title": description, "status": int(status), "detail": detail}
    return {"description": description, "content": {MEDIA_TYPE: {"schema": _PROBLEM_REF, "example": example}}}


def _complete(path: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    if "422" in responses:
        # FastAPI documents its own validation body; ours is problem+json (api.problems).
        responses["422"] = _problem_response(*_VALIDATION_ERROR, "422")
    if path.startswith(PUBLIC_PATHS):
        # An explicit empty requirement: tools (and readers) see these need no token.
        operation.setdefault("security", [])
        return
    for status, (description, slug, detail) in _AUTH_ERRORS.items():
        responses.setdefault(status, _problem_response(description, slug, detail, status))
    if "{tenant}" in path:
        responses.setdefault("404", _problem_response(*_TENANT_ERROR, "404"))
    if "requestBody" in operation:
        # FastAPI answers a body it cannot parse (not JSON, not UTF-8) with 400 before any validation.
        responses.setdefault("400", _problem_response(*_BODY_ERROR, "400"))
    if any(p.get("name") == "cursor" and p.get("in") == "query" for p in operation.get("parameters", [])):
        # The shared paging contract: a cursor that is not one this listing handed out is refused.
        responses.setdefault("400", _problem_response(*_CURSOR_ERROR, "400"))
    for status, response in responses.items():
        if status.startswith(("4", "5")):
            _as_problem(response)


def _as_problem(response: dict[str, Any]) -> None:
    # Every error answer is problem+json (api.problems), whatever media type a route documented it with.
    content: dict[str, Any] = response.get("content") or {}
    documented: dict[str, Any] = content.get(MEDIA_TYPE) or next(iter(content.values()), {})
    media: dict[str, Any] = {"schema": documented.get("schema", _PROBLEM_REF)}
    if "example" in documented:
        media["example"] = documented["example"]
    response["content"] = {MEDIA_TYPE: media}


def _document_opa(schema: dict[str, Any]) -> None:
    """The OPA decision routes read their body themselves, once the engine's key is checked (an unknown caller's body
    is never parsed), so FastAPI sees neither it nor the decision's shape: both come from ``api.schemas.engines``."""
    bodies: list[type[BaseModel]] = [OpaQuery, *OPA_ANSWERS.values()]
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [(m, "validation") for m in bodies]
    _, defs = models_json_schema(models, ref_template="#/components/schemas/{model}")
    for name, definition in defs.get("$defs", {}).items():
        schema["components"]["schemas"].setdefault(name, definition)
    for decision, answer in OPA_ANSWERS.items():
        operation = schema["paths"].get(f"/v1/opa/{{key}}/{decision}", {}).get("post")
        if operation is None:
            continue
        body = {"schema": {"$ref": "#/components/schemas/OpaQuery"}}
        operation["requestBody"] = {"required": True, "content": {"application/json": body}}
        operation.setdefault("responses", {})["200"] = {
            "description": "The decision, in the shape Trino's OPA access control reads.",
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{answer.__name__}"}}},
        }


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=DESCRIPTION, routes=app.routes)
        schema.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                _complete(path, operation)
        _document_opa(schema)
        for unused in ("HTTPValidationError", "ValidationError"):
            schema["components"]["schemas"].pop(unused, None)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
