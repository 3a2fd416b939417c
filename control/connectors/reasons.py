"""Why something failed, in words safe to store in the control plane and show a tenant admin: the worker's dead
letters and task errors and the admin API's answers all use :func:`safe_reason`."""

from __future__ import annotations

from pydantic import ValidationError

# Reasons are stored in headers and shown to admins; they are capped so a long exception cannot bloat a record.
MAX_REASON = 500


def safe_reason(exc: BaseException) -> str:
    """A reason for ``exc`` that names fields and rules, never input values.

    pydantic's ``str(ValidationError)`` quotes the input, so only the first error's location and message are kept;
    the runtime's own exceptions and the plugins' ``InvalidPayload`` are written not to quote values.
    """
    if isinstance(exc, ValidationError):
        errors = exc.errors()
        if errors:
            first = errors[0]
            loc = "/".join(str(p) for p in first["loc"]) or "(root)"
            return f"{loc}: {first['msg']}"[:MAX_REASON]
    return str(exc)[:MAX_REASON] or type(exc).__name__
