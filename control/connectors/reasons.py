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


class SourceFailure(Exception):
    """A source connector's failure as a tenant may see it: a fixed ``error_class`` and a short message we wrote.

    Plugins raise it (chained to nothing: ``from None``) instead of passing on a driver's text, which can tell a
    closed port from an open one, quote the peer's reply or name internal hosts. The full detail goes to the
    operator log where it happens, never into the exception.
    """

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(f"{error_class}: {message}")
        self.error_class = error_class
        self.message = message


#: What a tenant sees for a failure nobody wrote a message for: the traceback and text stay in the operator log.
INTERNAL = SourceFailure("internal-error", "the task failed unexpectedly; the operator log has the details")


def public_failure(exc: BaseException) -> str:
    """``<error class>: <message>`` for ``exc``, fit to store in the control plane and serve to ``tenant:read``.

    Only a :class:`SourceFailure` (its text is ours) and a pydantic error (field and rule, through
    :func:`safe_reason`) say more than :data:`INTERNAL`: anything else may quote a driver, a path or a peer.
    """
    if isinstance(exc, SourceFailure):
        return str(exc)[:MAX_REASON]
    if isinstance(exc, ValidationError):
        return f"invalid-config: {safe_reason(exc)}"[:MAX_REASON]
    return str(INTERNAL)


def shown_error(stored: str | None) -> str | None:
    """A stored error as served: its first line only, so a traceback stored by an older version is not shown."""
    if stored is None:
        return None
    return stored.split("\n", 1)[0][:MAX_REASON]
