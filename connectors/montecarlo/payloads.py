"""Lenient models of Monte Carlo's webhook envelope (``version`` ``v0.1``; docs/connectors/montecarlo.md, "What Monte
Carlo sends").

Monte Carlo documents its webhooks loosely, so these models accept what they may send rather than what the samples
show: every field is optional and nullable, unknown keys are kept (``extra="allow"``), numbers are accepted where a
string is expected, and enum-like fields (``type``, ``incident_type``, ``alert_feedback``,
``declared_alert_severity``) are plain strings: an unknown value is kept, never rejected. Only a value of the wrong
shape (an object where a string is expected, a list that is not a list) fails, with :class:`InvalidPayload` naming
the location.

Alert-update fields (``alert_feedback``, ``declared_alert_severity``, ``owner``) may arrive at the top level or inside
``payload`` (Spike's integration reads both). **Inside ``payload`` wins**: a key present there, even as ``null``,
decides; the top-level key counts only when ``payload`` lacks it. ``payload`` is where Monte Carlo's documented
envelope puts incident data, and an explicit ``null`` there is meaningful (``declared_alert_severity=null`` means
"unmarked").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from control.connectors.plugin import InvalidPayload, ParsedBody

ALERT_UPDATE_FIELDS = ("alert_feedback", "declared_alert_severity", "owner")


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, coerce_numbers_to_str=True)


class Account(_Lenient):
    id: str | None = None


class RuleComparison(_Lenient):
    """One comparison of a custom rule; the only place a custom-rule breach names its table."""

    full_table_id: str | None = None
    warehouse_uuid: str | None = None
    mcon: str | None = None


class Rule(_Lenient):
    uuid: str | None = None
    description: str | None = None
    rule_type: str | None = None
    comparisons: list[RuleComparison] | None = None


class IncidentEvent(_Lenient):
    """One ``payload.event_list[]`` item. ``full_table_id``, ``mcon`` and ``warehouse_uuid`` are not in Monte Carlo's
    samples but are read if present: they name the table more precisely than ``table_name``."""

    table_name: str | None = None
    event_details: str | None = None
    full_table_id: str | None = None
    mcon: str | None = None
    warehouse_uuid: str | None = None
    rule: Rule | None = None


class _AlertUpdate(_Lenient):
    alert_feedback: str | None = None
    declared_alert_severity: str | None = None
    owner: str | None = None


class Payload(_AlertUpdate):
    incident_id: str | None = None
    group_id: str | None = None
    url: str | None = None
    incident_type: str | None = None
    event_list: list[IncidentEvent] | None = None


class Envelope(_AlertUpdate):
    """The whole delivery. Use :meth:`alert_field` (not the attributes) for alert-update fields."""

    account: Account | None = None
    action: str | None = None
    type: str | None = None
    version: str | None = None
    payload: Payload | None = None

    def alert_field(self, name: str) -> str | None:
        """``alert_feedback``, ``declared_alert_severity`` or ``owner``: from ``payload`` if it has the key, else the
        top level (see the module docstring)."""
        if name not in ALERT_UPDATE_FIELDS:
            raise KeyError(name)
        if self.payload is not None and name in self.payload.model_fields_set:
            value: str | None = getattr(self.payload, name)
            return value
        top: str | None = getattr(self, name)
        return top

    @property
    def account_id(self) -> str | None:
        return self.account.id if self.account is not None else None

    @property
    def incident_id(self) -> str | None:
        return self.payload.incident_id if self.payload is not None else None

    @property
    def events(self) -> list[IncidentEvent]:
        if self.payload is None or self.payload.event_list is None:
            return []
        return self.payload.event_list


def json_object(body: ParsedBody) -> dict[str, Any]:
    """The parsed body as a JSON object, or :class:`InvalidPayload` (field ``(body)``). Never quotes the body."""
    if body.error is not None:
        raise InvalidPayload(f"body is not JSON ({body.error})", "(body)")
    if not isinstance(body.value, dict):
        raise InvalidPayload("body must be a JSON object", "(body)")
    value: dict[str, Any] = body.value
    return value


def parse_envelope(raw: dict[str, Any]) -> Envelope:
    """Validate a parsed body. A value of the wrong shape raises :class:`InvalidPayload` naming its location
    (``payload/event_list/0/table_name``); the message says what was expected, never the value sent."""
    try:
        return Envelope.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        field = "/".join(str(part) for part in first["loc"]) or "(root)"
        raise InvalidPayload(f"{field}: {first['msg']}", field) from None


@dataclass(frozen=True)
class Delivery:
    """A delivery as the connector reads it, once per request: the body as a JSON object (``raw``: the dedup key
    hashes its ``event_list`` as received) and that object validated (``envelope``)."""

    raw: dict[str, Any]
    envelope: Envelope


def read_delivery(body: ParsedBody) -> Delivery:
    """The parsed body as a :class:`Delivery`, or :class:`InvalidPayload` naming the location at fault."""
    raw = json_object(body)
    return Delivery(raw, parse_envelope(raw))
