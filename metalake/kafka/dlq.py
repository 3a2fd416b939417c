"""Dead-letter records: the original bytes plus context headers, in the spirit of Kafka Connect's DLQ."""

from __future__ import annotations

from dataclasses import dataclass

from metalake.events.envelope import Headers


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


def dead_letter_headers(dl: DeadLetter) -> Headers:
    pairs: dict[str, object | None] = {
        "error.class": dl.error_class,
        "error.message": dl.reason,
        "stage": dl.stage,
        "plugin": dl.plugin,
        "tenant_id": dl.tenant_id,
        "origin.topic": dl.origin_topic,
        "origin.partition": dl.origin_partition,
        "origin.offset": dl.origin_offset,
        "attempts": dl.attempts,
    }
    return [(k, str(v).encode()) for k, v in pairs.items() if v is not None]
