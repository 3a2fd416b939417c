"""A change read from ``metalake.changes``: the CloudEvent's attributes and data, and what outbound filters on.

The topic carries ``io.metalake.state.changed.v1`` (one per committed state row) and, from propagation,
``io.metalake.propagation.completed.v1``. Decoding is deliberately lenient about ``data`` (the producers validated
it): only the attributes routing needs are required.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

STATE_CHANGED = "io.metalake.state.changed.v1"
PROPAGATION_COMPLETED = "io.metalake.propagation.completed.v1"

# Kinds of change subscriptions filter on, for the tables whose rows are tag assignments.
_TABLE_KINDS = {
    "classifications": ("classification.added", "classification.removed"),
    "propagated_tags": ("tag.propagated", "tag.unpropagated"),
}


class UndecodableChange(ValueError):
    """A record of the changes topic outbound cannot read; ``reason`` names the attribute, never values."""


@dataclass(frozen=True)
class Change:
    id: str
    type: str
    tenant: str
    data: Mapping[str, Any]
    subject: str | None = None
    time: str | None = None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = field(default=(), repr=False)

    @property
    def kind(self) -> str:
        """``classification.added``, ``propagation.completed``, ``assets.changed``, ``lineage_edges.deleted``, ..."""
        if self.type == STATE_CHANGED:
            table = str(self.data.get("table", "unknown"))
            deleted = bool(self.data.get("deleted"))
            if table in _TABLE_KINDS:
                return _TABLE_KINDS[table][1 if deleted else 0]
            return f"{table}.{'deleted' if deleted else 'changed'}"
        if self.type == PROPAGATION_COMPLETED:
            return "propagation.completed"
        name = self.type.removeprefix("io.metalake.")
        return name.rsplit(".", 1)[0] if name.endswith((".v1", ".v2", ".v3")) else name

    @property
    def asset(self) -> str | None:
        """The asset the change is about: the state row's URN, or the origin of a propagation run."""
        key = self.data.get("key")
        if isinstance(key, Mapping) and isinstance(key.get("urn"), str):
            return str(key["urn"])
        for name in ("urn", "origin"):
            value = self.data.get(name)
            if isinstance(value, str):
                return value
        return self.subject

    @property
    def tag(self) -> str | None:
        key = self.data.get("key")
        if isinstance(key, Mapping) and isinstance(key.get("tag"), str):
            return str(key["tag"])
        value = self.data.get("tag")
        return value if isinstance(value, str) else None

    @property
    def state(self) -> Mapping[str, Any]:
        value = self.data.get("state")
        return value if isinstance(value, Mapping) else {}

    @property
    def happened_at(self) -> datetime | None:
        """``ce_time`` as an aware datetime (``None`` if absent or not ISO 8601)."""
        if not self.time:
            return None
        try:
            parsed = datetime.fromisoformat(self.time.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)

    @property
    def version(self) -> int | None:
        value = self.data.get("version")
        return value if isinstance(value, int) else None


def _attrs(headers: Iterable[tuple[str, bytes | None]] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, raw in headers or ():
        if raw is None or not name.startswith("ce_"):
            continue
        try:
            out[name[3:]] = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UndecodableChange(f"header {name} is not UTF-8") from None
    return out


def decode_change(key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]] | None) -> Change:
    header_list = [(n, v) for n, v in headers or () if v is not None]
    attrs = _attrs(header_list)
    for required in ("id", "type", "tenantid"):
        if not attrs.get(required):
            raise UndecodableChange(f"missing header ce_{required}")
    if value is None:
        raise UndecodableChange("empty record value")
    try:
        data = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UndecodableChange("record value is not JSON") from None
    if not isinstance(data, dict):
        raise UndecodableChange("record value is not a JSON object")
    return Change(
        id=attrs["id"],
        type=attrs["type"],
        tenant=attrs["tenantid"],
        data=data,
        subject=attrs.get("subject"),
        time=attrs.get("time"),
        key=key,
        headers=tuple(header_list),
    )
