"""The two kinds of inbound connector, after Kafka Connect's source model, and what the runtime hands them.

Connectors translate; they never do I/O to Kafka. The runtime (``connectors.runtime``) owns publishing with confirmed
delivery, source offsets, single-message transforms, error tolerance and the dead-letter topic.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from metalake.events import CloudEvent


class ConnectorConfig(BaseModel):
    """Base of every connector's typed configuration. Unknown keys are refused so typos surface at validation."""

    model_config = ConfigDict(extra="forbid", frozen=True)


C = TypeVar("C", bound=ConnectorConfig)


@dataclass(frozen=True)
class ConnectorContext:
    """Who a connector instance works for. No I/O handles: those stay with the runtime."""

    tenant_id: str
    connector_name: str

    @property
    def source(self) -> str:
        """The CloudEvents ``source`` of everything this instance emits."""
        return f"/tenants/{self.tenant_id}/connectors/{self.connector_name}"


class AuthenticationFailed(Exception):
    """The delivery is not from who it claims to be. The message is safe to return: it never holds a secret."""


class InvalidPayload(ValueError):
    """A verified delivery that cannot be mapped to events; ``field`` names what is at fault. Goes to the DLQ."""

    def __init__(self, message: str, field: str = "(root)") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class InboundRequest:
    """One HTTP delivery as the runtime read it: header names lower-cased, the body bytes exactly as received."""

    headers: Mapping[str, str]
    body: bytes
    received_at: datetime


class WebhookConnector(ABC, Generic[C]):
    """A push source: turns one verified HTTP delivery into events. Pure: no I/O, so a test is fixture in, events out.

    The runtime calls ``verify`` first (before any parsing), then ``to_events``; it answers 2xx only after Kafka
    confirmed every returned event.
    """

    config_model: ClassVar[type[ConnectorConfig]]

    def __init__(self, config: C, ctx: ConnectorContext) -> None:
        self.config = config
        self.ctx = ctx

    @abstractmethod
    def verify(self, request: InboundRequest, secrets: Sequence[bytes]) -> None:
        """Raise :class:`AuthenticationFailed` unless the request is signed with one of ``secrets`` (two may be
        active during a rotation). Compare in constant time."""

    @abstractmethod
    def to_events(self, request: InboundRequest) -> Sequence[CloudEvent]:
        """The events this delivery means; raise :class:`InvalidPayload` if it cannot be mapped."""


@dataclass(frozen=True)
class SourceRecord:
    """An event from a pull source, with the source position reached once it is published.

    ``partition`` identifies a slice of the source (e.g. one table); ``offset`` is where that slice stands after this
    record. The runtime stores offsets only after Kafka confirmed the records before them.
    """

    event: CloudEvent
    partition: Mapping[str, str]
    offset: Mapping[str, Any] | None = field(default=None)


class SourceConnector(ABC, Generic[C]):
    """A pull source, like a Kafka Connect ``SourceTask``: reads its source and yields records, resuming from offsets.

    ``poll`` receives the stored offsets of every partition this connector wrote before (empty on the first run) and
    yields records as it reads, so a large source is streamed, never loaded whole. A partition whose offset should be
    forgotten (e.g. a dropped table) is yielded with ``offset=None`` after its last record.
    """

    config_model: ClassVar[type[ConnectorConfig]]

    def __init__(self, config: C, ctx: ConnectorContext) -> None:
        self.config = config
        self.ctx = ctx

    @abstractmethod
    def poll(self, offsets: Mapping[str, Mapping[str, Any]]) -> Iterator[SourceRecord]:
        """Yield records; ``offsets`` maps ``partition_key(partition)`` to the stored offset."""


def partition_key(partition: Mapping[str, str]) -> str:
    """A stable string for a source partition (the key of its offset)."""
    return "&".join(f"{k}={partition[k]}" for k in sorted(partition))
