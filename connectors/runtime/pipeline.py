"""The per-record steps between a plugin and Kafka: transforms, schema validation, and error tolerance."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from pydantic import ValidationError

from connectors.runtime.errors import ErrorPolicy
from connectors.runtime.transforms import Chain, Routed, TransformError
from metalake.events import CloudEvent, InvalidEvent, UnknownEventType, validate_data
from metalake.events.canonical import canonical_data, canonical_subject
from metalake.events.validation import InvalidData
from metalake.kafka import RawRecord
from metalake.tenancy import InvalidTenantId

# What a transform or an invalid event may raise; anything else is a bug and propagates.
RECORD_ERRORS = (TransformError, UnknownEventType, InvalidData, InvalidEvent, InvalidTenantId, ValidationError)


def check(event: CloudEvent) -> CloudEvent:
    """The event with its URNs canonical (a plugin or a webhook mapping may spell one another way); raises unless
    its data matches its type's schema and its subject names the asset it carries."""
    validate_data(event.type, event.data)
    data = canonical_data(event.type, event.data)
    subject = canonical_subject(event.subject)
    urn = data.get("urn")
    if urn is not None and subject is not None and subject != urn:
        raise InvalidEvent("subject must equal data.urn", "subject", event.tenantid)
    if data == event.data and subject == event.subject:
        return event
    key = event.partitionkey
    if event.subject is not None and key == f"{event.tenantid}:{event.subject}":
        key = f"{event.tenantid}:{subject}"  # the default key names the asset: keep one key per asset
    return event.model_copy(update={"data": data, "subject": subject, "partitionkey": key})


@dataclass
class Prepared:
    """The outcome of running a batch through the chain: what to publish, what to dead-letter, what was dropped."""

    routed: list[Routed] = field(default_factory=list)
    dead: list[RawRecord] = field(default_factory=list)
    dropped: int = 0


def prepare(items: Iterable[tuple[CloudEvent, str]], chain: Chain, policy: ErrorPolicy) -> Prepared:
    """Transform and validate each ``(event, origin)``; failures become dead letters whose ``origin`` header says
    where the record came from (or :class:`TaskFailed` under ``errors.tolerance=none``)."""
    out = Prepared()
    for event, origin in items:
        try:
            routed = chain.run(event)
            if routed is not None:
                routed = replace(routed, event=check(routed.event))
        except RECORD_ERRORS as exc:
            out.dead.append(
                policy.dead_letter(
                    exc, stage="transform", value=event.value(), original_headers=event.headers(), origin=origin
                )
            )
            continue
        if routed is None:
            out.dropped += 1
        else:
            out.routed.append(routed)
    return out
