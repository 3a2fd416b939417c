"""Splitting an ingest body into candidate events: one JSON object, a JSON array of them, or NDJSON.

Pure functions: bytes in, a list of JSON values out, or :class:`BodyError` naming where the body is broken (the line
number for NDJSON). Error messages name positions, never content.
"""

from __future__ import annotations

from typing import Any

from metalake.http.json_body import NotJson, loads

NDJSON_TYPES = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl"})
JSON_TYPES = frozenset({"application/json", "application/cloudevents+json", "application/cloudevents-batch+json"})


class BodyError(ValueError):
    """The body cannot be split into events. ``line`` is set for NDJSON (1-based)."""

    def __init__(self, message: str, *, status: int = 400, line: int | None = None, field: str = "body") -> None:
        super().__init__(message)
        self.status = status
        self.line = line
        self.field = field


def media_type(content_type: str | None) -> str:
    return (content_type or "application/json").split(";")[0].strip().lower()


def split_body(body: bytes, content_type: str | None, max_events: int) -> list[Any]:
    """The candidate events of a body; raises :class:`BodyError` (415, 400 or 413 for too many events)."""
    kind = media_type(content_type)
    if kind in NDJSON_TYPES:
        items = _split_ndjson(body, max_events)
    elif kind in JSON_TYPES:
        items = _split_json(body)
    else:
        raise BodyError(
            f"unsupported content type {kind[:80]!r}: use application/json or application/x-ndjson",
            status=415,
            field="content-type",
        )
    if not items:
        raise BodyError("the body holds no event")
    if len(items) > max_events:
        raise BodyError(f"too many events: at most {max_events} per request", status=413)
    return items


def _split_json(body: bytes) -> list[Any]:
    try:
        value = loads(body)
    except NotJson as exc:  # a body nested too deeply too (it was a bare 500)
        raise BodyError(f"the body is {exc}") from None
    return value if isinstance(value, list) else [value]


def _split_ndjson(body: bytes, max_events: int) -> list[Any]:
    items: list[Any] = []
    for number, line in enumerate(body.split(b"\n"), start=1):
        if not line.strip():
            continue  # blank lines (and the final newline) separate nothing
        if len(items) >= max_events:
            raise BodyError(f"too many events: at most {max_events} per request", status=413)
        try:
            items.append(loads(line))
        except NotJson as exc:
            raise BodyError(f"line {number} is {exc}", line=number) from None
    return items
