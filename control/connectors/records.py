"""The connector control plane's records as its callers see them: a connector, its tasks, the public facts of its
secrets and of the tenants' write keys (never a secret value), and the ids that name them. The stores that read and
write them: ``store`` (connectors), ``tasks``, ``secrets`` and ``write_keys`` beside this module."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from control.connectors.schedule import Schedule
from control.connectors.transforms import TransformSpec


class ConnectorState(StrEnum):
    """Like Kafka Connect's connector states; a new connector starts RUNNING."""

    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"


class Tolerance(StrEnum):
    """``errors.tolerance``: ``all`` dead-letters a record failing a transform or mapping; ``none`` fails the task."""

    NONE = "none"
    ALL = "all"


@dataclass(frozen=True)
class ConnectorRecord:
    """A configured connector instance, without secrets."""

    tenant: str
    name: str
    type: str
    config: Mapping[str, Any]
    transforms: Sequence[TransformSpec] = ()
    errors_tolerance: Tolerance = Tolerance.ALL
    state: ConnectorState = ConnectorState.RUNNING
    error: str | None = None
    updated_at: datetime | None = None
    secret_fields: Sequence[str] = field(default_factory=tuple)
    tasks_max: int = 1
    # A source connector crawled on its own every interval (control.connectors.schedule); None: on request only.
    schedule: Schedule | None = None

    @property
    def id(self) -> str:
        return connector_id(self.tenant, self.name)


@dataclass(frozen=True)
class TaskRecord:
    """One task of a source connector: its configuration (which partitions it owns), state and last run."""

    tenant: str
    name: str
    id: int
    config: Mapping[str, Any]
    state: ConnectorState = ConnectorState.RUNNING
    trace: str | None = None
    worker_id: str | None = None
    last_run: Mapping[str, Any] | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class SecretInfo:
    """What may be shown about a stored secret: its id, age and end of overlap, never its value."""

    id: str
    created_at: datetime
    # Set on the previous secret by a rotation: it is accepted until then, not until the next rotation.
    expires_at: datetime | None = None


@dataclass(frozen=True)
class WriteKeyInfo:
    """What may be shown about an ingest write key: its id, age and grants, never the key (only its hash is stored).
    ``pii``: the key may take PII tags off and stop them spreading (``control.auth.pii``), set at creation only."""

    key_id: str
    created_at: datetime
    pii: bool = False


@dataclass(frozen=True)
class WriteKeyGrant:
    """What a valid write key may do: send events for ``tenant``, and weaken PII masks if ``pii``."""

    tenant: str
    key_id: str
    pii: bool = False


def connector_id(tenant: str, name: str) -> str:
    """A connector's id, ``<tenant>/<name>``: its documents' ``_id`` in ``connectors`` and ``connector_secrets``."""
    return f"{tenant}/{name}"


def task_doc_id(tenant: str, name: str, task: int) -> str:
    """The ``_id`` of a connector's task in ``connector_tasks``."""
    return f"{tenant}/{name}/{task}"


def utc_now() -> datetime:
    """Now, in UTC: the time every record of the control plane is stamped with."""
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """``value`` read back from the store, in UTC."""
    # FerretDB hands datetimes back naive unless the client asked for tz_aware; they are UTC either way.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
