"""RFC 9457 problem details: every error the admin API and the connector worker answer is ``application/problem+json``.

A :class:`Problem` carries only what is safe to show the caller: a type, a title, a detail written by us, and the
name of the field at fault. Details never quote payload values or secrets.

In the kernel because both HTTP services use it (``api.problems`` adds a last-resort handler). It needs ``fastapi``,
which the ``api`` and ``connectors`` extras both install; no other kernel module imports this one, so the kernel
itself stays importable without them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

MEDIA_TYPE = "application/problem+json"
# Problem types are relative URI references documented in docs/connectors/runtime.md; clients match on them.
TYPE_PREFIX = "/problems/"


class Problem(Exception):
    """An error answer. Raise it from a route; the handler installed by :func:`install_problem_handlers` renders it."""

    def __init__(  # noqa: PLR0913
        self,
        status: int,
        slug: str,
        detail: str,
        *,
        title: str | None = None,
        field: str | None = None,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.detail = detail
        self.title = title or HTTPStatus(status).phrase
        self.field = field
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})

    def body(self, instance: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": TYPE_PREFIX + self.slug,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if instance is not None:
            out["instance"] = instance
        if self.field is not None:
            out["field"] = self.field
        out.update(self.extra)
        return out


def problem_response(problem: Problem, instance: str | None = None) -> JSONResponse:
    return JSONResponse(
        problem.body(instance), status_code=problem.status, media_type=MEDIA_TYPE, headers=problem.headers
    )


def _field_of(loc: Sequence[Any]) -> str:
    # FastAPI locations start with where the value came from ("body", "query", "path"); the rest is the field path.
    parts = [str(p) for p in loc]
    return "/".join(parts[1:]) if len(parts) > 1 else (parts[0] if parts else "(root)")


async def _on_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)  # noqa: S101 - registered for Problem only
    return problem_response(exc, request.url.path)


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)  # noqa: S101 - registered for RequestValidationError only
    first = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid request"}
    field = _field_of(first.get("loc", ("body",)))
    # pydantic's msg names the rule, never the input value ("Field required", "String should have at most 5 chars").
    problem = Problem(422, "invalid-request", f"{field}: {first.get('msg', 'invalid')}", field=field)
    return problem_response(problem, request.url.path)


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)  # noqa: S101 - registered for HTTPException only
    status = exc.status_code
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(status).phrase
    problem = Problem(status, HTTPStatus(status).phrase.lower().replace(" ", "-"), detail, headers=exc.headers)
    return problem_response(problem, request.url.path)


def install_problem_handlers(app: FastAPI) -> None:
    """Render :class:`Problem`, request validation errors and HTTP errors (404 route, 405) as problem+json."""
    app.add_exception_handler(Problem, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
