"""Single-message transforms (SMTs), a chain configured per connector, as in Kafka Connect's ``transforms=a,b``.

A transform is pure: ``apply(event)`` returns the (possibly changed) event, or ``None`` to drop it. A transform that
cannot handle an event raises :class:`TransformError`; the error-tolerance policy then decides (DLQ or fail).
Routing does not change the event: a transform may override the topic class (priority/bulk) through ``route``.

Their configuration (a JSON list of tagged objects) is validated by :mod:`control.connectors.transforms`, where
the admin API stores it; :func:`build` turns one validated spec into its transform. :func:`check` is the last step
of every record (canonical URNs, schema, subject). In the control layer because two deployables run records through
a connector's chain: the worker (``connectors.runtime``) and the admin API's dead-letter replay.
"""

from __future__ import annotations

import fnmatch
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from control.connectors.transforms import FilterSpec, RenameSpec, StampTenantSpec, TransformSpec
from metalake.events import CloudEvent, InvalidEvent, UnknownEventType, spec_for, validate_data
from metalake.events.canonical import canonical_data, canonical_subject
from metalake.events.validation import InvalidData
from metalake.tenancy import InvalidTenantId
from tenants.naming import TopicClass


class TransformError(ValueError):
    """An event a transform cannot handle. The message names the transform and field, never a payload value."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class Transform(ABC):
    """One step of the chain. Implementations hold only their (immutable) configuration."""

    @abstractmethod
    def apply(self, event: CloudEvent) -> CloudEvent | None:
        """The event to pass on, or ``None`` to drop it. Raise :class:`TransformError` if it cannot be handled."""

    def route(self, event: CloudEvent) -> TopicClass | None:
        """A topic class that overrides the event type's own, or ``None`` to leave it (most transforms)."""
        return None


class StampTenant(Transform):
    """Sets ``tenantid`` to the connector's tenant and keeps the partition key ``<tenant>:...`` consistent with it.

    The runtime always runs this first, so a connector can only ever write into the tenant it is configured for.
    """

    def __init__(self, tenant_id: str) -> None:
        self._tenant = tenant_id

    def apply(self, event: CloudEvent) -> CloudEvent:
        prefix = f"{self._tenant}:"
        key = event.partitionkey
        if event.tenantid != self._tenant and key.startswith(f"{event.tenantid}:"):
            key = key[len(event.tenantid) + 1 :]
        if not key.startswith(prefix):
            key = prefix + key
        if event.tenantid == self._tenant and key == event.partitionkey:
            return event
        return event.model_copy(update={"tenantid": self._tenant, "partitionkey": key})


class RenameField(Transform):
    """Renames a top-level field of ``data`` (absent: the event passes unchanged; target taken: an error)."""

    def __init__(self, source: str, target: str) -> None:
        self._from, self._to = source, target

    def apply(self, event: CloudEvent) -> CloudEvent:
        if self._from not in event.data:
            return event
        if self._to in event.data:
            raise TransformError(f"rename: data/{self._to} already exists", f"data/{self._to}")
        data = {(self._to if k == self._from else k): v for k, v in event.data.items()}
        return event.model_copy(update={"data": data})


class FilterType(Transform):
    """Drops events whose type matches a glob pattern (``mode="drop"``) or does not match it (``mode="keep"``)."""

    def __init__(self, pattern: str, mode: Literal["drop", "keep"] = "drop") -> None:
        self._pattern, self._mode = pattern, mode

    def apply(self, event: CloudEvent) -> CloudEvent | None:
        matches = fnmatch.fnmatchcase(event.type, self._pattern)
        return None if matches == (self._mode == "drop") else event


class RouteTopicClass(Transform):
    """Sends events whose type matches a glob pattern to the given topic class (priority or bulk)."""

    def __init__(self, pattern: str, topic_class: TopicClass) -> None:
        self._pattern, self._class = pattern, topic_class

    def apply(self, event: CloudEvent) -> CloudEvent:
        return event

    def route(self, event: CloudEvent) -> TopicClass | None:
        return self._class if fnmatch.fnmatchcase(event.type, self._pattern) else None


def build(spec: TransformSpec, tenant_id: str) -> Transform:
    """The transform a validated spec describes, for a connector of ``tenant_id``."""
    if isinstance(spec, StampTenantSpec):
        return StampTenant(tenant_id)
    if isinstance(spec, RenameSpec):
        return RenameField(spec.source, spec.target)
    if isinstance(spec, FilterSpec):
        return FilterType(spec.pattern, spec.mode)
    return RouteTopicClass(spec.pattern, spec.topic_class)


# -- the chain ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Routed:
    """An event that passed the chain, with the topic class it travels on."""

    event: CloudEvent
    topic_class: TopicClass


class Chain:
    """Stamp tenant, then the configured transforms in order; the last matching ``route`` wins."""

    def __init__(self, tenant_id: str, transforms: Sequence[Transform] = ()) -> None:
        self._steps: tuple[Transform, ...] = (StampTenant(tenant_id), *transforms)

    @classmethod
    def from_specs(cls, tenant_id: str, specs: Sequence[TransformSpec]) -> Chain:
        return cls(tenant_id, [build(s, tenant_id) for s in specs])

    def run(self, event: CloudEvent) -> Routed | None:
        """The routed event, or ``None`` if a transform dropped it.

        Raises :class:`TransformError`, or :class:`metalake.events.UnknownEventType` when no transform routes an
        event whose type has no spec.
        """
        current: CloudEvent | None = event
        override: TopicClass | None = None
        for step in self._steps:
            if current is None:
                return None
            current = step.apply(current)
            if current is not None:
                override = step.route(current) or override
        if current is None:
            return None
        return Routed(current, override or spec_for(current.type).topic_class(current.data))


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
