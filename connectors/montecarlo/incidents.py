"""From a verified, parsed delivery to metalake incident events: status rules, dedup key, event ids, ``data``.

**Status** (decides the event type ``com.montecarlodata.incident.<status>.v1``):

- ``resolved`` if ``alert_feedback`` is one of fixed, expected, no_action_needed, false_positive (whatever ``type``);
- ``opened`` if ``type`` starts with ``open_`` and the delivery carries no alert update: ``alert_feedback``,
  ``declared_alert_severity`` and ``owner`` all null or absent (Monte Carlo's "created" shape). Updates share the
  channel and, as far as is documented, the ``type``, so an ``open_`` delivery with e.g.
  ``alert_feedback=investigating`` is an update, not a new incident;
- ``updated`` otherwise: any other feedback, severity set or unset, owner change, or a ``type`` we do not know.

**Dedup key**: ``sha256`` of the canonical JSON of ``[account.id, incident_id, type, alert_feedback,
declared_alert_severity, owner, event_list]`` (effective alert fields, see ``payloads``; ``event_list`` as received,
keys sorted). Monte Carlo documents no retry policy and signs no timestamp, so the same content twice is treated as
one delivery: each event's id is ``uuid5(namespace, dedup_key + table urn)``, identical on a redelivery.

**Version** is when metalake received the delivery (ms): Monte Carlo sends no timestamp or sequence. A redelivery
therefore keeps its ids but gets a newer version (it carries the same content, so applying it again is harmless).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from connectors.montecarlo.mapping import TableRef, clean_text
from connectors.montecarlo.payloads import Envelope
from control.connectors.plugin import InvalidPayload

Status = Literal["opened", "updated", "resolved"]
RESOLVING_FEEDBACK = frozenset({"fixed", "expected", "no_action_needed", "false_positive"})
# Fixed forever: changing it changes every event id, so redeliveries would no longer deduplicate.
ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://metalake.dev/connectors/montecarlo")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def event_type(status: Status) -> str:
    return f"com.montecarlodata.incident.{status}.v1"


def status_of(envelope: Envelope) -> Status:
    feedback = envelope.alert_field("alert_feedback")
    if feedback is not None and feedback.strip().lower() in RESOLVING_FEEDBACK:
        return "resolved"
    no_update = all(
        envelope.alert_field(name) is None for name in ("alert_feedback", "declared_alert_severity", "owner")
    )
    if no_update and (envelope.type or "").startswith("open_"):
        return "opened"
    return "updated"


def dedup_key(raw: dict[str, Any], envelope: Envelope) -> str:
    """Hex sha256 identifying the delivery's content (see the module docstring); ``raw`` is the parsed body."""
    payload = raw.get("payload")
    event_list = payload.get("event_list") if isinstance(payload, dict) else None
    parts = [
        envelope.account_id,
        envelope.incident_id,
        envelope.type,
        envelope.alert_field("alert_feedback"),
        envelope.alert_field("declared_alert_severity"),
        envelope.alert_field("owner"),
        event_list,
    ]
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a JSON "\ud800" escape parses to a lone surrogate; it must hash, not crash.
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def event_id(key: str, urn: str) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, f"{key}\n{urn}"))


def aware(received_at: datetime) -> datetime:
    """``received_at`` with a time zone: a naive datetime is taken as UTC (CloudEvents ``time`` needs an offset)."""
    return received_at if received_at.tzinfo is not None else received_at.replace(tzinfo=UTC)


def version_ms(received_at: datetime) -> int:
    """Milliseconds since the epoch; a naive datetime is taken as UTC."""
    return (aware(received_at) - _EPOCH) // timedelta(milliseconds=1)


def required_incident_id(envelope: Envelope) -> str:
    if envelope.payload is None:
        raise InvalidPayload("payload is missing", "payload")
    incident_id = envelope.incident_id
    if incident_id is None or not incident_id.strip():
        raise InvalidPayload("payload/incident_id is missing", "payload/incident_id")
    return clean_text(incident_id)


def _text(value: str | None) -> str | None:
    return clean_text(value) if value is not None else None


def incident_data(envelope: Envelope, table: TableRef, status: Status, version: int) -> dict[str, Any]:
    """The ``data`` of one table's event. Holds only payload fields: never a secret or a header."""
    payload = envelope.payload
    return {
        "urn": table.urn,
        "version": version,
        "incident_id": required_incident_id(envelope),
        "status": status,
        "account_id": _text(envelope.account_id),
        "webhook_type": _text(envelope.type),
        "incident_type": _text(payload.incident_type if payload is not None else None),
        "feedback": _text(envelope.alert_field("alert_feedback")),
        "severity": _text(envelope.alert_field("declared_alert_severity")),
        "owner": _text(envelope.alert_field("owner")),
        "url": _text(payload.url if payload is not None else None),
        "summary": table.summary,
        "table_name": table.table_name,
        "full_table_id": table.full_table_id,
        "mcon": table.mcon,
    }
