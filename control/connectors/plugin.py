"""The two kinds of inbound connector, after Kafka Connect's source model, and what the runtime hands them.

Connectors translate; they never do I/O to Kafka. The runtime (``connectors.runtime``) owns publishing with confirmed
delivery, source offsets, single-message transforms, error tolerance and the dead-letter topic.

The interface is in the control plane, not beside the runtime, because the admin API needs it too: to list the types
by kind and validate a configuration by type name (``config_model``) without importing the worker. The plugins
themselves live in ``connectors/<name>/`` and are loaded by entry point (:mod:`control.connectors.registry`).
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from functools import cached_property
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from control.connectors.settings import ConnectSettings
from metalake.events import CloudEvent
from metalake.http.json_body import NotJson, loads
from metalake.net.ssrf import AddressGuard


class ConnectorConfig(BaseModel):
    """Base of every connector's typed configuration. Unknown keys are refused so typos surface at validation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Fields that say where the connector sends its secret fields (a server's host, port, TLS mode): a change of one
    # requires the secret fields again, so a stored password is never handed to an endpoint it was not given for.
    endpoint_fields: ClassVar[tuple[str, ...]] = ()


C = TypeVar("C", bound=ConnectorConfig)
# What a webhook plugin's ``read`` makes of a delivery: its typed payload.
P = TypeVar("P")


@dataclass(frozen=True)
class SourceAccess:
    """What a source connector may connect to: the host a tenant named goes through ``guard`` (the SSRF guard, connect
    to the address it checked), and the source must ask for a password unless ``allow_passwordless``. The default is
    the strict policy; the runtime builds it from ``connect.ssrf_allow`` and ``connect.allow_passwordless_sources``."""

    guard: AddressGuard = field(default_factory=AddressGuard)
    allow_passwordless: bool = False
    # Folders a file-reading source may read from, a tenant only under <root>/<tenant id>/ (connect.artifact_roots).
    artifact_roots: tuple[str, ...] = ()
    # The worker's cap on one artifact (local file or object) a source reads (connect.artifact_max_bytes).
    max_artifact_bytes: int = 64 * 1024 * 1024
    # The address space of the child process that parses one artifact (connect.artifact_parse_memory_bytes).
    parse_memory_bytes: int = 1024 * 1024 * 1024
    # The CA bundle a source's verified TLS trusts (connect.source_tls_ca_file); None: the system's CAs.
    tls_ca_file: str | None = None

    @classmethod
    def from_settings(cls, connect: ConnectSettings) -> SourceAccess:
        return cls(
            AddressGuard.from_settings(connect.ssrf_allow),
            connect.allow_passwordless_sources,
            tuple(connect.artifact_roots),
            connect.artifact_max_bytes,
            connect.artifact_parse_memory_bytes,
            connect.source_tls_ca_file,
        )


@dataclass(frozen=True)
class ConnectorContext:
    """Who a connector instance works for. No I/O handles: those stay with the runtime.

    A source connector's task is an instance built with ``task_id`` and the ``task_config`` its connector produced
    (:meth:`SourceConnector.task_configs`); ``task_id=None`` with an empty config is the connector itself, or a lone
    task that owns every partition.
    """

    tenant_id: str
    connector_name: str
    task_id: int | None = None
    task_config: Mapping[str, Any] = field(default_factory=dict)
    access: SourceAccess = field(default_factory=SourceAccess)

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
class ParsedBody:
    """A body as ``json.loads`` read it: ``value``, or, when it is not JSON, ``error`` (the decoder error's class name,
    or ``nested too deeply``) and ``position`` (where the decoder stopped, if it says). Never quotes the body."""

    value: Any = None
    error: str | None = None
    position: int | None = None


def parse_json(body: bytes) -> ParsedBody:
    """Parse ``body`` as JSON (UTF-8/16/32, as ``json.loads`` detects it); a body that is not JSON is a result, not an
    exception. ``json.loads`` keeps the key order, which signatures over a re-encoding (Monte Carlo's) rely on."""
    try:
        return ParsedBody(loads(body, constants=True))
    except NotJson as exc:  # JSONDecodeError, UnicodeDecodeError, nested too deeply: the one way every route says it
        return ParsedBody(error=exc.reason, position=exc.position)


@dataclass(frozen=True)
class InboundRequest:
    """One HTTP delivery as the runtime read it: header names lower-cased, the body bytes exactly as received.

    :attr:`parsed` is the body parsed as JSON, once per request on first use: the signature check, the runtime's JSON
    check, the default dedup key and the plugin's ``read`` all take this one value (do not mutate it). A signature
    over the raw bytes uses :attr:`body`.
    """

    headers: Mapping[str, str]
    body: bytes
    received_at: datetime

    @cached_property
    def parsed(self) -> ParsedBody:
        # cached_property writes the instance's __dict__ directly, so it works on a frozen dataclass.
        return parse_json(self.body)


def parsed_key(request: InboundRequest) -> str:
    """The dedup key of a body by its parsed content (a canonical JSON form), not its bytes.

    A signature may not cover the bytes (Monte Carlo signs ``urlencode(json.loads(body))``): one captured delivery
    re-spaced, re-indented or with its keys' escapes rewritten still verifies. Keyed by bytes, each variant was a new
    delivery and a new dead letter; keyed by what it parses to, they are one.
    """
    try:
        canonical = json.dumps(request.parsed.value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON (the runtime refuses it before), or too deep to re-encode
        return "b:" + hashlib.sha256(request.body).hexdigest()
    # surrogatepass: a JSON "\ud800" escape parses to a lone surrogate; it must hash, not crash.
    return "p:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class WebhookConnector(ABC, Generic[C, P]):
    """A push source: turns one verified HTTP delivery into events. Pure: no I/O, so a test is fixture in, events out.

    ``P`` is the plugin's payload: what :meth:`read` makes of a delivery, read once per request. For each delivery
    the runtime calls, in order: ``verify``; then, once the body is JSON (else 400), ``read``; ``dedup_key`` of what
    it read (a delivery already handled under that key is answered 200 ``duplicate``, nothing published); then
    ``to_events`` of what it read. It answers 2xx only after Kafka confirmed every returned event. The body is parsed
    as JSON once per request (``request.parsed``); read that, not ``request.body`` again.

    What raising means: :class:`AuthenticationFailed` from ``verify`` is 401; :class:`InvalidPayload` from ``verify``
    is 400 (nothing authenticated the body, so it is not dead-lettered); :class:`InvalidPayload` from ``read`` or
    ``to_events`` sends the raw body to the dead-letter topic (202 ``dead_lettered``; under ``errors.tolerance=none``
    the connector is marked FAILED and the answer is 503). The runtime owns the order of the steps, remembering
    deliveries by their dedup key, the dead letters, and publishing.
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
    def read(self, request: InboundRequest) -> P:
        """The delivery as the plugin's payload, from ``request.parsed`` (JSON: the runtime checked it). Called once
        per delivery, after ``verify``; ``dedup_key`` and ``to_events`` get what it returns. Raise
        :class:`InvalidPayload` naming the field at fault for a body that is not a delivery of this plugin: it is
        dead-lettered, and remembered by its parsed content (:func:`parsed_key`), so its resends cost nothing."""

    def dedup_key(self, payload: P, request: InboundRequest) -> str:
        """What makes two deliveries one: a redelivery under a key already handled is not published again. Called
        once per delivery ``read`` accepted, before ``to_events``; must not raise (what ``read`` accepted has a key:
        the runtime catches nothing here). Default: the parsed content
        (:func:`parsed_key`), so variants of one body that the signature does not tell apart (spacing, escapes) are
        one delivery. Override to say more, e.g. which fields identify an incident's update."""
        return parsed_key(request)

    @abstractmethod
    def to_events(self, payload: P, request: InboundRequest) -> Sequence[CloudEvent]:
        """The events of a delivery ``read`` accepted (``payload``; ``request`` for what it does not hold, e.g.
        ``received_at``). Called once per delivery not seen before; raise :class:`InvalidPayload` if it cannot be
        mapped."""


class OffsetAction(Enum):
    """What a :class:`SourceRecord` without a new position does to its partition's stored offset."""

    KEEP = "keep"
    """No new position: the stored offset stays as it is (e.g. a record in the middle of a table's records)."""
    FORGET = "forget"
    """The partition is gone: its offset is forgotten (a tombstone in the offsets topic)."""


KEEP = OffsetAction.KEEP
FORGET = OffsetAction.FORGET


@dataclass(frozen=True)
class SourceRecord:
    """An event from a pull source, with the source position reached once it is published.

    ``partition`` identifies a slice of the source (e.g. one table); ``offset`` is where that slice stands after this
    record, :data:`KEEP` (the default: no new position) or :data:`FORGET` (the partition is gone). ``None`` is read as
    ``FORGET``, its meaning before the two were told apart. The runtime stores offsets only after Kafka confirmed the
    records before them.
    """

    event: CloudEvent
    partition: Mapping[str, str]
    offset: Mapping[str, Any] | OffsetAction | None = field(default=KEEP)

    @property
    def forgets(self) -> bool:
        return self.offset is None or self.offset is FORGET


class SourceConnector(ABC, Generic[C]):
    """A pull source, like a Kafka Connect ``SourceTask``: reads its source and yields records, resuming from offsets.

    ``poll`` receives the stored offsets of every partition this task owns (empty on the first run) and yields
    records as it reads, so a large source is streamed, never loaded whole. A partition whose offset should be
    forgotten (e.g. a dropped table) is yielded with ``offset=FORGET`` on its last record.

    Tasks, like Kafka Connect's: the runtime asks the connector for up to ``tasks.max`` task configurations
    (:meth:`task_configs`), builds one instance per configuration (``ctx.task_id``, ``ctx.task_config``) and runs
    each one's ``poll``. Every task owns a disjoint set of partitions (:meth:`owns`): it is handed only their offsets
    and may emit records for them only, so its deletion detection can never touch another task's partitions.
    """

    config_model: ClassVar[type[ConnectorConfig]]

    def __init__(self, config: C, ctx: ConnectorContext) -> None:
        self.config = config
        self.ctx = ctx

    @abstractmethod
    def poll(self, offsets: Mapping[str, Mapping[str, Any]]) -> Iterator[SourceRecord]:
        """Yield records; ``offsets`` maps ``partition_key(partition)`` to the stored offset."""

    def task_configs(self, max_tasks: int, offsets: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Connect's ``Connector.taskConfigs``: between 1 and ``max_tasks`` JSON-serialisable task configurations.

        ``offsets`` holds every stored partition of the connector, so partitions that vanished from the source still
        get an owner (who then deletes them). Default: one task that owns everything.
        """
        return [{}]

    def owns(self, partition: Mapping[str, str]) -> bool:
        """Whether this task (``ctx.task_config``) owns ``partition``. Default: every partition."""
        return True

    def progress(self) -> Mapping[str, int]:
        """Counters of the running :meth:`poll` a crawl shows (``metalake connect crawl --follow``), e.g.
        ``tables_read`` / ``tables_total``; read between batches, from the thread that polls. Default: none."""
        return {}


# Only the three characters that structure a key are escaped, so the key of a partition whose values hold none of
# them is byte for byte what it was before escaping existed (stored offsets stay readable).
_ESCAPES = {"%": "%25", "&": "%26", "=": "%3D"}
_UNESCAPES = {v: k for k, v in _ESCAPES.items()}


def _escape(text: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in text)


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        code = text[i : i + 3].upper()
        if code in _UNESCAPES:
            out.append(_UNESCAPES[code])
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def partition_key(partition: Mapping[str, str]) -> str:
    """A stable string for a source partition (the key of its offset): ``k=v`` pairs sorted by key, joined by ``&``,
    with ``%``, ``&`` and ``=`` in names and values percent-escaped, so two partitions never share a key."""
    return "&".join(f"{_escape(k)}={_escape(partition[k])}" for k in sorted(partition))


class InvalidPartitionKey(ValueError):
    pass


def parse_partition_key(key: str) -> dict[str, str]:
    """The partition a :func:`partition_key` was built from; raises :class:`InvalidPartitionKey` for another string."""
    if not key:
        return {}
    partition: dict[str, str] = {}
    for pair in key.split("&"):
        name, sep, value = pair.partition("=")
        if not sep or "=" in value:
            raise InvalidPartitionKey("not a partition key: a pair without exactly one '='")
        partition[_unescape(name)] = _unescape(value)
    return partition
