"""The per-record steps between a plugin and Kafka: transforms, schema validation, and error tolerance."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import ValidationError

from connectors.runtime.errors import ErrorPolicy
from connectors.runtime.transforms import Chain, Routed, TransformError
from metalake.events import CloudEvent, InvalidEvent, UnknownEventType, validate_data
from metalake.events.validation import InvalidData
from metalake.kafka import RawRecord
from metalake.tenancy import InvalidTenantId

# What a transform or an invalid event may raise; anything else is a bug and propagates.
RECORD_ERRORS = (TransformError, UnknownEventType, InvalidData, InvalidEvent, InvalidTenantId, ValidationError)


def check(event: CloudEvent) -> None:
    """Raise unless the event's data matches its type's schema and its subject names the asset it carries."""
    validate_data(event.type, event.data)
    urn = event.data.get("urn")
    if urn is not None and event.subject is not None and event.subject != urn:
        raise InvalidEvent("subject must equal data.urn", "subject", event.tenantid)


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
                check(routed.event)
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
