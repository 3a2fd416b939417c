"""A request body parsed as JSON, one way for every route that takes JSON (the ingest API, OpenLineage, webhooks).

``json.loads`` signals a body nested deeper than the interpreter's stack with ``RecursionError``, which is no
``ValueError``: a route catching only decode errors answered a bare 500 to a few kilobytes of ``[``. Here every way a
body can fail to be JSON is :class:`NotJson`, whose message says why in words and never quotes the body, for a 400.
Stdlib only: the webhook plugins' contract (``control.connectors.plugin``) parses with it too.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

NESTED_TOO_DEEPLY = "nested too deeply"


class NotJson(ValueError):
    """The body is not JSON: ``reason`` (a decoder error's class name, or :data:`NESTED_TOO_DEEPLY`, or what is wrong)
    and ``position`` (the byte where the decoder stopped, when it says)."""

    def __init__(self, reason: str, position: int | None = None) -> None:
        self.reason = reason
        self.position = position
        where = f" at byte {position}" if position is not None else ""
        super().__init__(f"not JSON ({reason}{where})")  # callers say what: "the body is ...", "line 3 is ..."


def _reject_constant(name: str) -> NoReturn:
    # Python's json accepts NaN and Infinity; JSON (RFC 8259) does not.
    raise ValueError(f"{name} is not a JSON number")


def loads(body: bytes | str, *, constants: bool = False) -> Any:  # noqa: ANN401
    """The JSON value of ``body`` (UTF-8/16/32 as ``json.loads`` detects it); raises :class:`NotJson`. ``NaN`` and
    ``Infinity`` are refused unless ``constants`` (a signature over a re-encoding must see what the sender parsed)."""
    try:
        return json.loads(body) if constants else json.loads(body, parse_constant=_reject_constant)
    except RecursionError:
        raise NotJson(NESTED_TOO_DEEPLY) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotJson(type(exc).__name__, getattr(exc, "pos", None)) from None
    except ValueError as exc:  # a rejected constant
        raise NotJson(str(exc)) from None
