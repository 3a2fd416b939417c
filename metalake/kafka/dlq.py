"""Dead letters in a Kafka topic, in the spirit of Kafka Connect's DLQ: the original record (key, value, headers)
plus one fixed set of context headers. Every stage with a DLQ topic (the connector worker, the outbound runtime)
builds its records with :func:`dead_letter_record` and reads them back with :func:`read_dead_letter`.

The context headers, in this order, each left out when unknown:

- ``error.class``, ``error.message`` (the reason: names fields and rules, never payload values; at most
  :data:`MAX_MESSAGE` characters), ``stage``, ``plugin``, ``tenant_id``;
- ``origin.topic``, ``origin.partition``, ``origin.offset`` (the Kafka record that failed), ``attempts``;
- stage-specific: ``connector`` and ``origin`` (the connector worker: the connector's name, and where a record that
  was never a Kafka record came from, ``webhook:<path>`` or ``source:<tenant>/<connector>/<partition key>``),
  ``outbound.subscription`` (the outbound runtime: the subscription a delivery was for);
- ``error.field``: where in the record the fault is, when the error names it (the connector worker).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metalake.events.envelope import Headers
from metalake.kafka.producer import RawRecord

# A long exception message must not bloat a record (nor carry more than a reason should).
MAX_MESSAGE = 500

# Header names by DeadLetter field, in the order they are written.
_HEADERS: tuple[tuple[str, str], ...] = (
    ("error_class", "error.class"),
    ("reason", "error.message"),
    ("stage", "stage"),
    ("plugin", "plugin"),
    ("tenant_id", "tenant_id"),
    ("origin_topic", "origin.topic"),
    ("origin_partition", "origin.partition"),
    ("origin_offset", "origin.offset"),
    ("attempts", "attempts"),
    ("connector", "connector"),
    ("origin", "origin"),
    ("subscription", "outbound.subscription"),
    ("field", "error.field"),
)
# The context header names: what a dead letter added to the original record's headers.
CONTEXT_HEADERS = frozenset(header for _, header in _HEADERS)


@dataclass(frozen=True)
class DeadLetter:
    """Why a record could not be processed and where it came from. ``reason`` never holds payload values."""

    reason: str
    error_class: str
    stage: str
    tenant_id: str | None = None
    plugin: str | None = None
    origin_topic: str | None = None
    origin_partition: int | None = None
    origin_offset: int | None = None
    attempts: int = 1
    # Stage-specific context (see the module docstring).
    connector: str | None = None
    origin: str | None = None
    subscription: str | None = None
    # Where in the record the fault is (``data/warehouse``, ``ce_type``...), when the error says.
    field: str | None = None


def _context_headers(letter: DeadLetter) -> Headers:
    """The context headers of ``letter``, in the fixed order; ``error.message`` capped at :data:`MAX_MESSAGE`."""
    out: Headers = []
    for name, header in _HEADERS:
        value = getattr(letter, name)
        if value is None:
            continue
        text = str(value)[:MAX_MESSAGE] if name == "reason" else str(value)
        out.append((header, text.encode()))
    return out


def dead_letter_record(
    topic: str,
    record_id: str,
    key: bytes | None,
    value: bytes | None,
    original_headers: Sequence[tuple[str, bytes]],
    letter: DeadLetter,
) -> RawRecord:
    """The dead letter for ``topic``: the original key, value and headers, then the context headers of ``letter``.
    ``record_id`` only labels the publish result."""
    return RawRecord(topic, record_id, key, value, [*original_headers, *_context_headers(letter)])


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None  # a broken number is unknown context, not a reason to lose the letter


def read_dead_letter(headers: Sequence[tuple[str, bytes | None]] | None) -> DeadLetter | None:
    """The context of a dead letter from its headers (the last of a repeated name wins), or ``None`` if they lack
    ``error.class``, ``error.message`` or ``stage`` (not a dead letter)."""
    found = {k: v.decode("utf-8", "replace") for k, v in headers or () if v is not None}
    if not {"error.class", "error.message", "stage"} <= found.keys():
        return None
    return DeadLetter(
        reason=found["error.message"],
        error_class=found["error.class"],
        stage=found["stage"],
        tenant_id=found.get("tenant_id"),
        plugin=found.get("plugin"),
        origin_topic=found.get("origin.topic"),
        origin_partition=_int(found.get("origin.partition")),
        origin_offset=_int(found.get("origin.offset")),
        attempts=_int(found.get("attempts")) or 1,
        connector=found.get("connector"),
        origin=found.get("origin"),
        subscription=found.get("outbound.subscription"),
        field=found.get("error.field"),
    )
