"""The event envelope (CloudEvents 1.0, Kafka binary mode), the registry of event types and their schemas.

Infrastructure, though the types describe metadata: every process builds and decodes its events here (URNs
canonicalised, tenant ids checked), and the Kafka producer and dead letters carry the envelope. The records of
``metalake.changes`` and what they mean are ``catalog.changes``.
"""

from metalake.events.envelope import CloudEvent, InvalidEvent, decode_record, new_event
from metalake.events.registry import EventTypeSpec, UnknownEventType, event_types, spec_for
from metalake.events.validation import validate_data

__all__ = [
    "CloudEvent",
    "EventTypeSpec",
    "InvalidEvent",
    "UnknownEventType",
    "decode_record",
    "event_types",
    "new_event",
    "spec_for",
    "validate_data",
]
