"""Errors as RFC 9457 problem+json: the same :class:`Problem` and handlers the connector worker answers with, plus a
last-resort handler so even an unexpected failure answers problem+json (and says nothing about its cause)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from api.redaction import redact_path
from metalake.http.problems import MEDIA_TYPE, Problem, problem_response
from metalake.http.problems import install_problem_handlers as _install_common
from metalake.sealing import SealingError

__all__ = ["MEDIA_TYPE", "Problem", "install_problem_handlers", "problem_doc", "problem_response"]

log = logging.getLogger(__name__)


def problem_doc(description: str, slug: str, status: int) -> dict[str, Any]:
    """An OpenAPI response entry for a problem+json answer, with an example."""
    example = {"type": f"/problems/{slug}", "title": description, "status": status, "detail": description}
    return {"description": description, "content": {MEDIA_TYPE: {"example": example}}}


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    # The exception type goes to the log for the operator; the caller learns only that it was our fault.
    log.error("unhandled error", extra={"path": redact_path(request.url.path), "error": type(exc).__name__})
    problem = Problem(500, "internal-error", "the server failed to answer this request; it has been logged")
    return problem_response(problem, request.url.path)


async def _on_sealing(request: Request, exc: Exception) -> JSONResponse:
    # The server's key configuration is at fault: the reason (object and field, never a value) is the operator's.
    log.error("secrets unusable", extra={"path": redact_path(request.url.path), "reason": str(exc)})
    problem = Problem(
        503,
        "secrets-unavailable",
        "stored secrets cannot be sealed or opened with this server's key-encryption key; the operator must fix it",
    )
    return problem_response(problem, request.url.path)


def install_problem_handlers(app: FastAPI) -> None:
    """Problem, validation and HTTP errors as problem+json; a secret that cannot be sealed or opened as a 503;
    anything unexpected as a 500 problem."""
    _install_common(app)
    app.add_exception_handler(SealingError, _on_sealing)
    app.add_exception_handler(Exception, _on_unexpected)
