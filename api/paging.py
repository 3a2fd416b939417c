"""Opaque cursors for ``?limit=&cursor=`` paging: base64url of the last item's sort key, checked on the way back in.

A cursor names the listing it belongs to (``kind``), so a cursor from one listing handed to another is refused
instead of silently skipping rows. Anything that does not decode to the expected shape is a 400 problem naming
``cursor``; the detail never quotes the value.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Query

from api.problems import Problem

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_CURSOR_CHARS = 4096

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Page size.")]
CursorParam = Annotated[
    str | None,
    Query(max_length=MAX_CURSOR_CHARS, description="`next_cursor` of the previous page; omit for the first page."),
]


def _bad_cursor() -> Problem:
    return Problem(
        400, "invalid-cursor", "cursor: not a cursor of this listing; start again without it", field="cursor"
    )


def encode_cursor(kind: str, key: Sequence[str]) -> str:
    """The cursor that resumes ``kind`` after the item whose sort key is ``key``."""
    raw = json.dumps({"k": kind, "v": list(key)}, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str | None, arity: int) -> tuple[str, ...] | None:
    """The sort key a cursor resumes after (``None`` without a cursor); 400 unless it is a ``kind`` cursor of
    ``arity`` strings."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        decoded: Any = json.loads(raw)
    except (binascii.Error, ValueError):
        raise _bad_cursor() from None
    if not isinstance(decoded, dict) or decoded.get("k") != kind:
        raise _bad_cursor()
    key = decoded.get("v")
    if not isinstance(key, list) or len(key) != arity or not all(isinstance(k, str) for k in key):
        raise _bad_cursor()
    return tuple(key)
