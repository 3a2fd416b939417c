"""The per-record steps between a plugin and Kafka: transforms, schema validation, and error tolerance."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from connectors.runtime.errors import ErrorPolicy
from control.connectors.chain import RECORD_ERRORS, Chain, Routed, check
from metalake.events import CloudEvent
from metalake.kafka import RawRecord

__all__ = ["RECORD_ERRORS", "Prepared", "check", "prepare"]


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
