"""One structured-mode CloudEvent (a JSON object) from a producer, checked and turned into a metalake event.

The credential (write key or access token) decides the tenant: an event naming another tenant is rejected; it also
decides the ``actor`` of the types that carry one (a tag added or removed): the body's is replaced. The data must
match its type's schema. Rejections name the field at fault and a rule, never the value sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from metalake.events import CloudEvent, EventTypeSpec, UnknownEventType, spec_for, validate_data
from metalake.events.canonical import canonical_data, canonical_subject
from metalake.events.envelope import JSON, SPEC_VERSION
from metalake.events.validation import InvalidData

ATTRIBUTES = frozenset(
    {
        "specversion",
        "id",
        "source",
        "type",
        "time",
        "subject",
        "data",
        "tenantid",
        "datacontenttype",
        "traceparent",
        "partitionkey",
    }
)
REQUIRED = ("specversion", "id", "source", "type", "data", "tenantid")
# A person's edits: only the admin API publishes them, with the actor taken from the token and an audit row
# (docs/edits.md); a producer could otherwise write an edit in anyone's name, unaudited.
API_ONLY_TYPES = frozenset({"io.metalake.asset.edited.v1", "io.metalake.asset.edit.cleared.v1"})
# What the propagation processor concludes from the lineage graph: a producer could otherwise claim a tag reached a
# column (which the Snowflake script and Trino's masks follow) or withdraw one, whatever the lineage says.
PROCESSOR_ONLY_TYPES = frozenset(
    {"io.metalake.classification.propagated.v1", "io.metalake.classification.unpropagated.v1"}
)
# What metalake's own processes publish to its internal topics: on an event topic a forged one would at best be a
# dead letter, at worst be taken for the processes' word by a later reader.
INTERNAL_TYPES = frozenset(
    {
        "io.metalake.propagation.completed.v1",
        "io.metalake.asset.erased.v1",
        "io.metalake.state.changed.v1",
        "io.metalake.subscription.test.requested.v1",
    }
)


class Rejected(ValueError):
    """Why one event was not accepted; ``field`` names the attribute or ``data/<path>`` at fault."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Result:
    """The per-event answer: ``accepted`` means durable in Kafka once the request returns."""

    index: int
    id: str | None
    status: str
    error: str | None = None
    field: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "id": self.id, "status": self.status}
        if self.error is not None:
            out["error"] = {"detail": self.error, "field": self.field}
        return out


def _check_shape(item: Any, tenant: str) -> dict[str, Any]:  # noqa: ANN401
    if not isinstance(item, dict):
        raise Rejected("an event must be a JSON object", "(root)")
    for attr in REQUIRED:
        if attr not in item:
            raise Rejected(f"{attr} is required", attr)
    unknown = sorted(k for k in item if k not in ATTRIBUTES)
    if unknown:
        raise Rejected(f"unsupported attribute {unknown[0][:64]!r}", unknown[0][:64])
    if item["specversion"] != SPEC_VERSION:
        raise Rejected(f"specversion must be {SPEC_VERSION!r}", "specversion")
    if item["tenantid"] != tenant:
        raise Rejected("tenantid differs from the tenant of the write key or token", "tenantid")
    if item.get("datacontenttype", JSON) != JSON:
        raise Rejected(f"datacontenttype must be {JSON!r}", "datacontenttype")
    if not isinstance(item["data"], dict):
        raise Rejected("data must be a JSON object", "data")
    for attr in ("id", "source", "type"):
        if not isinstance(item[attr], str):
            raise Rejected(f"{attr} must be a string", attr)
    return item


def _credential_actor(spec: EventTypeSpec, data: dict[str, Any], actor: str | None) -> dict[str, Any]:
    """``data`` with the ``actor`` of a type that has one taken from the credential, whatever the body says: it is
    shown as who made the change (Slack, Teams, Jira, webhooks), so a sender must not name someone else. Without a
    credential's actor, the body's is dropped."""
    field = spec.schema.get("properties", {}).get("actor")
    if field is None or ("actor" not in data and actor is None):
        return data
    out = {k: v for k, v in data.items() if k != "actor"}
    if actor is not None:
        out["actor"] = actor[: int(field.get("maxLength", len(actor)))]
    return out


def _check_data(item: dict[str, Any], actor: str | None) -> dict[str, Any]:
    """The item's data, valid and with its URNs in canonical form (stored rows hold one spelling per asset)."""
    try:
        spec = spec_for(item["type"])
        if item["type"] in API_ONLY_TYPES:
            raise Rejected("published by the admin API only (PATCH /v1/tenants/{tenant}/assets)", "type")
        if item["type"] in PROCESSOR_ONLY_TYPES:
            raise Rejected("written by metalake's tag propagation only (it follows the lineage graph)", "type")
        if item["type"] in INTERNAL_TYPES:
            raise Rejected("published by metalake's own processes only, never by a source", "type")
        data = _credential_actor(spec, item["data"], actor)
        validate_data(item["type"], data)
        return canonical_data(item["type"], data)
    except UnknownEventType:
        raise Rejected("unknown event type", "type") from None
    except InvalidData as exc:
        raise Rejected(str(exc), f"data/{exc.field}") from None


def to_event(item: Any, tenant: str, actor: str | None = None) -> CloudEvent:  # noqa: ANN401
    """The event ``item`` describes, for ``tenant``, its ``actor`` (if its type has one) the credential's; raises
    :class:`Rejected`."""
    checked = _check_shape(item, tenant)
    data = _check_data(checked, actor)
    urn = data.get("urn")
    given = checked.get("subject")
    subject = (canonical_subject(given) if isinstance(given, str) else given) or (urn if isinstance(urn, str) else None)
    if urn is not None and subject != urn:
        raise Rejected("subject must equal data.urn", "subject")
    key = checked.get("partitionkey") or f"{tenant}:{subject or checked['id']}"
    if not isinstance(key, str) or not key.startswith(f"{tenant}:"):
        raise Rejected(f"partitionkey must start with '{tenant}:'", "partitionkey")
    try:
        return CloudEvent(
            id=checked["id"],
            source=checked["source"],
            type=checked["type"],
            time=checked.get("time") or datetime.now(UTC),
            subject=subject,
            tenantid=tenant,
            partitionkey=key,
            traceparent=checked.get("traceparent"),
            data=data,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise Rejected(f"{field}: {first['msg']}", field) from None


def item_id(item: Any) -> str | None:  # noqa: ANN401
    value = item.get("id") if isinstance(item, dict) else None
    return value[:256] if isinstance(value, str) else None
