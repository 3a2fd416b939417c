"""The records of ``metalake.changes``: what the stores committed, for the processes that react to it.

The topic carries ``io.metalake.state.changed.v1`` (one per state row the streaming job wrote, modelled by
:class:`StateChange`), ``io.metalake.propagation.completed.v1`` (one per propagation run) and
``io.metalake.asset.erased.v1`` (one per GDPR erase). All three are CloudEvents in binary mode like every event, with
schemas in the registry. :meth:`StateChange.event` is the one way a state change is written, :func:`decode_change` the
one way any record of the topic is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from metalake.events.envelope import CloudEvent, InvalidEvent, decode_record, new_event

STATE_CHANGED = "io.metalake.state.changed.v1"
PROPAGATION_COMPLETED = "io.metalake.propagation.completed.v1"
ASSET_ERASED = "io.metalake.asset.erased.v1"

# Kinds of change subscriptions filter on, for the tables whose rows are tag assignments.
_TABLE_KINDS = {
    "classifications": ("classification.added", "classification.removed"),
    "propagated_tags": ("tag.propagated", "tag.unpropagated"),
}


class InvalidChange(InvalidEvent):
    """A record of ``metalake.changes`` that breaks its type's contract. Like :class:`InvalidEvent`, ``reason`` and
    ``field`` name what is wrong, never a value."""


def _jsonable(value: Any) -> Any:  # noqa: ANN401
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def changes_key(tenant: str) -> str:
    """The record key of everything on ``metalake.changes``: the tenant alone, so all of a tenant's records (state
    changes, propagation runs, erasures) land on one partition, in order, and one instance of a consumer group holds
    a whole tenant (the propagation processor keeps a tenant's lineage graph in memory). Per-asset order follows.
    The price: one tenant's changes are read by one instance per group (docs/propagation.md#scaling-out)."""
    return tenant


class StateChange(BaseModel):
    """One committed state row (``io.metalake.state.changed.v1``): its table, key, meta columns and other columns.

    ``key`` and ``state`` keep their producer's order (the table's key and field order), which the record's value
    keeps too. The record's subject is the row's asset, ``key["urn"]``; its partition key is the tenant
    (:func:`changes_key`).
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1, max_length=256)
    source: str = Field(min_length=1, max_length=1024)
    tenant: str
    time: AwareDatetime = Field(default_factory=lambda: datetime.now(UTC))
    traceparent: str | None = None
    table: str
    key: dict[str, Any]
    deleted: bool
    version: int
    event_id: str
    state: dict[str, Any] = Field(default_factory=dict)

    @field_validator("key")
    @classmethod
    def _names_its_asset(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(value.get("urn"), str):
            raise ValueError("key must hold the asset's urn")
        return value

    @property
    def urn(self) -> str:
        return str(self.key["urn"])

    @property
    def row(self) -> dict[str, Any]:
        """The row as its table holds it: the other columns, the key and the meta columns, flat."""
        return {
            **self.state,
            **self.key,
            "deleted": self.deleted,
            "version": self.version,
            "event_id": self.event_id,
        }

    def event(self) -> CloudEvent:
        """The record: ``event().key``, ``.headers()`` and ``.value()``. Raises ``InvalidData`` (from the schema)."""
        data = {
            "table": self.table,
            "key": _jsonable(self.key),
            "deleted": self.deleted,
            "version": self.version,
            "event_id": self.event_id,
            "state": _jsonable(self.state),
        }
        return new_event(
            STATE_CHANGED,
            self.tenant,
            data,
            source=self.source,
            subject=self.urn,
            event_id=self.id,
            time=self.time,
            traceparent=self.traceparent,
            partitionkey=changes_key(self.tenant),
        )

    @classmethod
    def of(cls, event: CloudEvent) -> StateChange:
        """The state change an event decoded by ``decode_record`` carries (its data already matches the schema)."""
        if event.type != STATE_CHANGED:
            raise InvalidChange(f"ce_type is not {STATE_CHANGED}", "ce_type", event.tenantid)
        data = event.data
        urn = data["key"]["urn"]
        if event.subject != urn:
            # decode_record compares the subject with data.urn; a state change names its asset in the key.
            raise InvalidChange("ce_subject must equal data.key.urn", "ce_subject", event.tenantid)
        # Validated already: the envelope by CloudEvent, data by the schema (which is stricter than the fields here).
        # Validating again would double what decoding costs, and every consumer decodes every state change.
        return cls.model_construct(
            id=event.id,
            source=event.source,
            tenant=event.tenantid,
            time=event.time,
            traceparent=event.traceparent,
            table=data["table"],
            key=data["key"],
            deleted=data["deleted"],
            version=data["version"],
            event_id=data["event_id"],
            state=data["state"],
        )


@dataclass(frozen=True)
class Change:
    """A record of ``metalake.changes`` as its consumers read it: routing attributes, ``data``, and what outbound
    subscriptions filter on (``kind``, ``asset``, ``tag``). ``time`` is the ``ce_time`` header as sent."""

    id: str
    type: str
    tenant: str
    data: Mapping[str, Any]
    subject: str | None = None
    time: str | None = None
    # The typed row of an io.metalake.state.changed.v1 record (set by decode_change and of), None for other types.
    state_change: StateChange | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, event: CloudEvent, time: str | None = None) -> Change:
        """The change an event carries. ``time``: the ``ce_time`` text as received (the event's time otherwise).
        Raises :class:`InvalidChange` if a state change breaks the rules beyond its schema."""
        sent = time if time is not None else event.time.isoformat().replace("+00:00", "Z")
        return cls(
            id=event.id,
            type=event.type,
            tenant=event.tenantid,
            data=event.data,
            subject=event.subject,
            time=sent,
            state_change=StateChange.of(event) if event.type == STATE_CHANGED else None,
        )

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


def change_type(headers: Iterable[tuple[str, bytes | str | None]] | None) -> str | None:
    """A record's ``ce_type`` without decoding it: consumers skip the types they do not read before paying for it."""
    for name, raw in headers or ():
        if name == "ce_type" and raw is not None:
            return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return None


def decode_change(key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]] | None) -> Change:
    """Parse and validate one record of ``metalake.changes``; raises :class:`InvalidChange` for a bad record."""
    header_list = list(headers or ())
    try:
        event = decode_record(key, value, header_list)
    except InvalidEvent as exc:
        raise InvalidChange(exc.reason, exc.field, exc.tenant_id) from None
    sent = next((raw for name, raw in header_list if name == "ce_time" and raw is not None), None)
    return Change.of(event, sent.decode("utf-8") if sent is not None else None)
