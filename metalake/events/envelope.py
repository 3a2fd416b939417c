"""CloudEvents 1.0 in Kafka binary mode.

The record value is the ``data`` JSON; every other attribute is a ``ce_``-prefixed UTF-8 header, plus
``content-type``. The record key is the partition key ``<tenant>:<asset urn>`` so one asset's events stay ordered.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, NoReturn

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator

from metalake.events.canonical import canonical_data, canonical_subject
from metalake.events.registry import UnknownEventType, spec_for
from metalake.events.validation import InvalidData, validate_data
from metalake.tenancy import InvalidTenantId, validate_tenant_id

SPEC_VERSION = "1.0"
JSON = "application/json"
Headers = list[tuple[str, bytes]]

# Header names of the binary-mode binding, attribute -> header.
_ATTR_HEADERS = {
    "specversion": "ce_specversion",
    "id": "ce_id",
    "source": "ce_source",
    "type": "ce_type",
    "time": "ce_time",
    "subject": "ce_subject",
    "tenantid": "ce_tenantid",
    "partitionkey": "ce_partitionkey",
    "traceparent": "ce_traceparent",
}
_REQUIRED = ("specversion", "id", "source", "type", "tenantid")


class InvalidEvent(ValueError):
    """A record that is not a valid metalake CloudEvent. ``field`` names what is at fault."""

    def __init__(self, reason: str, field: str, tenant_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.field = field
        self.tenant_id = tenant_id


class CloudEvent(BaseModel):
    """A metalake event. ``data`` is validated against the type's schema by :func:`decode_record`."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1, max_length=256)
    source: str = Field(min_length=1, max_length=1024)
    type: str = Field(min_length=1, max_length=256)
    specversion: str = SPEC_VERSION
    time: AwareDatetime
    subject: str | None = Field(default=None, max_length=2048)
    tenantid: str
    partitionkey: str
    traceparent: str | None = None
    datacontenttype: str = JSON
    data: dict[str, Any]

    @field_validator("tenantid")
    @classmethod
    def _tenant(cls, value: str) -> str:
        return validate_tenant_id(value)

    @field_validator("specversion")
    @classmethod
    def _spec(cls, value: str) -> str:
        if value != SPEC_VERSION:
            raise ValueError(f"specversion must be {SPEC_VERSION!r}")
        return value

    @property
    def key(self) -> bytes:
        return self.partitionkey.encode()

    @property
    def version(self) -> int | None:
        value = self.data.get("version")
        return value if isinstance(value, int) else None

    def headers(self) -> Headers:
        out: Headers = [("content-type", self.datacontenttype.encode())]
        for attr, header in _ATTR_HEADERS.items():
            value = getattr(self, attr)
            if value is None:
                continue
            text = value.isoformat().replace("+00:00", "Z") if isinstance(value, datetime) else str(value)
            out.append((header, text.encode()))
        return out

    def value(self) -> bytes:
        return json.dumps(self.data, separators=(",", ":"), ensure_ascii=False).encode()


def new_event(  # noqa: PLR0913
    event_type: str,
    tenant_id: str,
    data: Mapping[str, Any],
    *,
    source: str,
    subject: str | None = None,
    event_id: str | None = None,
    time: datetime | None = None,
    traceparent: str | None = None,
    partitionkey: str | None = None,
) -> CloudEvent:
    """Build and validate an event, its URNs canonical (``metalake.events.canonical``). The subject defaults to
    ``data["urn"]``; the key to ``<tenant>:<subject>`` (``metalake.changes`` records pass the tenant alone)."""
    spec_for(event_type)
    validate_data(event_type, data)
    data = canonical_data(event_type, data)
    subject = canonical_subject(subject or data.get("urn"))
    return CloudEvent(
        id=event_id or str(uuid.uuid4()),
        source=source,
        type=event_type,
        time=time or datetime.now(UTC),
        subject=subject,
        tenantid=tenant_id,
        partitionkey=partitionkey or f"{tenant_id}:{subject or event_id}",
        traceparent=traceparent,
        data=dict(data),
    )


class _NonJsonConstant(ValueError):
    """``NaN`` or ``Infinity`` in a record value."""


def _reject_constant(name: str) -> NoReturn:
    # Python's json accepts NaN and ±Infinity; JSON (RFC 8259) does not, and the schemas' range checks let NaN through.
    raise _NonJsonConstant(f"{name} is not a JSON number")


def _urn_of(data: Mapping[str, Any]) -> str | None:
    # Like new_event: without a ce_subject header the subject is the asset URN, which stores key assets by.
    urn = data.get("urn")
    return urn if isinstance(urn, str) else None


def _read_headers(headers: Iterable[tuple[str, bytes | None]] | None) -> tuple[dict[str, str], str]:
    """The ``ce_`` attributes (without prefix) and the content type of a record's headers."""
    attrs: dict[str, str] = {}
    content_type = JSON
    for name, raw in headers or ():
        if raw is None or not (name == "content-type" or name.startswith("ce_")):
            continue  # other headers belong to other tools and may be binary
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidEvent(f"header {name} is not UTF-8", name) from None
        if name == "content-type":
            content_type = text
        elif name.startswith("ce_"):
            attrs[name[3:]] = text
    return attrs, content_type


def _valid_tenant_or_none(tenant: str | None) -> str | None:
    # The tenant routes the dead letter, so it is kept whenever it is valid, even if the rest of the record is not.
    try:
        return validate_tenant_id(tenant) if tenant is not None else None
    except InvalidTenantId:
        return None


def _parse_data(value: bytes | None, tenant: str | None) -> dict[str, Any]:
    if value is None:
        raise InvalidEvent("empty record value: data is required", "data", tenant)
    try:
        data = json.loads(value, parse_constant=_reject_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidEvent(
            f"data is not JSON: {type(exc).__name__} at position {getattr(exc, 'pos', '?')}", "data", tenant
        ) from None
    except _NonJsonConstant as exc:
        raise InvalidEvent(f"data is not JSON: {exc}", "data", tenant) from None
    if not isinstance(data, dict):
        raise InvalidEvent("data must be a JSON object", "data", tenant)
    return data


def _validate_data(event_type: str, data: dict[str, Any], tenant: str | None) -> dict[str, Any]:
    """The data, validated and with its URNs canonical."""
    try:
        validate_data(event_type, data)
        return canonical_data(event_type, data)
    except UnknownEventType as exc:
        raise InvalidEvent(str(exc), "ce_type", tenant) from None
    except InvalidData as exc:
        raise InvalidEvent(str(exc), f"data/{exc.field}", tenant) from None


def _build_event(
    key: bytes | None, attrs: Mapping[str, str], content_type: str, data: dict[str, Any], tenant: str | None
) -> CloudEvent:
    try:
        return CloudEvent(
            id=attrs["id"],
            source=attrs["source"],
            type=attrs["type"],
            specversion=attrs["specversion"],
            time=attrs.get("time") or datetime.now(UTC),
            subject=canonical_subject(attrs.get("subject")) or _urn_of(data),
            tenantid=attrs["tenantid"],
            partitionkey=attrs.get("partitionkey") or (key or b"").decode("utf-8", "replace"),
            traceparent=attrs.get("traceparent"),
            datacontenttype=content_type,
            data=data,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = "ce_" + ".".join(str(p) for p in first["loc"])
        raise InvalidEvent(f"{field}: {first['msg']}", field, tenant) from None


def decode_record(
    key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]] | None
) -> CloudEvent:
    """Parse and validate one Kafka record, its URNs made canonical (a producer that bypassed ``new_event`` may have
    sent another spelling). Raises :class:`InvalidEvent` with a reason safe to store and log."""
    attrs, content_type = _read_headers(headers)
    tenant = _valid_tenant_or_none(attrs.get("tenantid"))
    for attr in _REQUIRED:
        if attr not in attrs:
            raise InvalidEvent(f"missing header ce_{attr}", f"ce_{attr}", tenant)
    if content_type.split(";")[0].strip() != JSON:
        raise InvalidEvent(f"unsupported content-type {content_type[:80]!r}", "content-type", tenant)
    data = _validate_data(attrs["type"], _parse_data(value, tenant), tenant)
    event = _build_event(key, attrs, content_type, data, tenant)
    urn = data.get("urn")
    if urn is not None and event.subject is not None and event.subject != urn:
        raise InvalidEvent("ce_subject must equal data.urn", "ce_subject", tenant)
    return event
