"""What the worker's routes share: settings, stores, the publisher and the plugins, built once per process."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from pydantic import SecretStr, ValidationError

from connectors.runtime.admission import Admission, Ticket
from connectors.runtime.dedup import DeliveryLog
from connectors.runtime.errors import Counter, DeadLetterBudget, ErrorPolicy
from connectors.runtime.lookups import LookupCache
from connectors.runtime.offload import Offload
from connectors.runtime.publisher import Publisher
from connectors.runtime.transforms import Chain
from connectors.settings import WorkerSettings
from control.audit import AuditLog
from control.auth.gate import TokenGate
from control.connectors.offsets import OffsetStore
from control.connectors.plugin import (
    ConnectorConfig,
    ConnectorContext,
    SourceAccess,
    SourceConnector,
    WebhookConnector,
)
from control.connectors.records import ConnectorRecord
from control.connectors.registry import ConnectorClass, Plugin
from control.connectors.store import ControlStore
from metalake.http.problems import Problem
from metalake.http.ratelimit import RateLimiter
from metalake.lease import LeaseStore

T = TypeVar("T")


class PluginUnavailable(LookupError):
    """A connector type that is unknown or disabled (its import failed)."""


@dataclass(frozen=True)
class Runtime:
    """The worker's long-lived collaborators. Immutable; each member is thread-safe."""

    settings: WorkerSettings
    store: ControlStore
    deliveries: DeliveryLog
    publisher: Publisher
    offsets: OffsetStore
    plugins: Mapping[str, Plugin]
    # Admits the ingest API's OAuth access tokens, as the admin API does.
    gate: TokenGate
    dlq_counter: Counter | None = None
    # A publisher and an offset store of its own for each task of a multi-task crawl (tests inject fakes).
    task_io_factory: Callable[[], tuple[Publisher, OffsetStore]] | None = None
    # The webhook path's control-plane reads (off unless built with a TTL: see build_runtime).
    lookups: LookupCache[Any] = field(default_factory=lambda: LookupCache(0.0))
    # Keeps two crawls of one connector from overlapping (None: no lease, for tests that build a runtime of fakes).
    leases: LeaseStore | None = None
    # The tenants' audit tables: the ingest API audits the PII changes it accepts or refuses (None: it has nowhere
    # to write them, so it refuses PII changes with 503).
    audit: AuditLog | None = None
    # The tenant's live propagated PII tags whose path names these URNs (tenants.access.columns.PropagatedPaths):
    # whether an edge removal or asset deletion sent to the ingest API unmasks PII (None: no lineage is known).
    propagated: Callable[[str, Iterable[str], Iterable[str]], list[dict[str, Any]]] | None = None
    # The tag patterns whose removal needs the PII grant for a tenant: PII tags and its engines' consent tags
    # (control.auth.protective.ProtectiveTags; None: access.pii_tags and access.protective_tags alone).
    protective: Callable[[str], tuple[str, ...]] | None = None
    # Dead letters per connector and window; built from settings (connect.dead_letter_cap) when not given.
    dead_letters: DeadLetterBudget | None = None
    dropped_counter: Counter | None = None
    # Events per tenant through the HTTP sources (connect.tenant_events_per_s); built from settings when not given.
    event_budget: RateLimiter | None = None
    # Per-tenant requests in progress and the budget charged before a body is read (connect.tenant_max_in_flight);
    # where bodies are parsed and mapped (connect.parse_workers). Built from settings when not given.
    admission: Admission | None = None
    offload: Offload | None = None

    def __post_init__(self) -> None:
        connect = self.settings.connect
        # Frozen: set once here, shared by every request and task of the process.
        if self.dead_letters is None:
            object.__setattr__(
                self, "dead_letters", DeadLetterBudget(connect.dead_letter_cap, connect.dead_letter_window_s)
            )
        if self.event_budget is None:
            budget = RateLimiter(connect.tenant_events_per_s, connect.tenant_events_burst)
            object.__setattr__(self, "event_budget", budget)
        if self.admission is None:
            object.__setattr__(self, "admission", Admission(connect))
        if self.offload is None:
            object.__setattr__(self, "offload", Offload(connect))

    def admit(self, tenant: str, content_length: str | None) -> AbstractContextManager[Ticket]:
        """Admit a request of ``tenant`` to an HTTP source before its body is read (:mod:`.admission`): a 429 when
        the tenant has too many in progress or its events budget is spent."""
        assert self.admission is not None  # noqa: S101 - built in __post_init__
        return self.admission.admit(tenant, content_length, self.event_budget)

    async def parse(self, tenant: str, size: int, fn: Callable[..., T], *args: Any) -> T:  # noqa: ANN401
        """``fn(*args)``, the parsing and mapping of ``tenant``'s body of ``size`` bytes, off the event loop: in the
        worker's pool of processes for a large body (:mod:`.offload`), else on a thread."""
        assert self.offload is not None  # noqa: S101 - built in __post_init__
        return await self.offload.run(tenant, size, fn, *args)

    def unavailable(self, detail: str, slug: str = "unavailable") -> Problem:
        """The 503 of a request that may succeed when sent again, after ``connect.retry_after_s`` (Kafka or the
        control plane did not answer, the connector is not running): nothing of it was accepted."""
        return Problem(503, slug, detail, headers={"Retry-After": str(self.settings.connect.retry_after_s)})

    @property
    def access(self) -> SourceAccess:
        """What this worker's source connectors may connect to (settings ``connect.ssrf_allow`` and
        ``connect.allow_passwordless_sources``)."""
        return SourceAccess.from_settings(self.settings.connect)

    def task_io(self) -> tuple[Publisher, OffsetStore]:
        if self.task_io_factory is not None:
            return self.task_io_factory()
        return Publisher(self.settings, directory=self.publisher.directory), OffsetStore(self.settings)

    def plugin_class(self, type_: str) -> ConnectorClass:
        plugin = self.plugins.get(type_)
        if plugin is None:
            raise PluginUnavailable(f"unknown connector type {type_!r}")
        if plugin.cls is None:
            raise PluginUnavailable(f"connector type {type_!r} is disabled: {plugin.disabled_reason}")
        return plugin.cls

    def policy(self, record: ConnectorRecord) -> ErrorPolicy:
        return ErrorPolicy(
            record.errors_tolerance,
            tenant=record.tenant,
            connector=record.name,
            plugin=record.type,
            counter=self.dlq_counter,
            budget=self.dead_letters,
            dropped_counter=self.dropped_counter,
        )

    def chain(self, record: ConnectorRecord) -> Chain:
        return Chain.from_specs(record.tenant, record.transforms)


def plugins_from(classes: Mapping[str, ConnectorClass]) -> dict[str, Plugin]:
    """Plugins from an explicit name -> class mapping (tests and embedders; production uses entry points)."""
    return {name: Plugin(name, cls) for name, cls in classes.items()}


def build_config(cls: ConnectorClass, record: ConnectorRecord, secrets: Mapping[str, SecretStr]) -> ConnectorConfig:
    """The plugin's typed config: the stored fields plus the secret ones. Raises ``ValidationError``."""
    values: dict[str, Any] = {**record.config, **secrets}
    return cls.config_model.model_validate(values)


def instantiate(
    cls: ConnectorClass,
    record: ConnectorRecord,
    secrets: Mapping[str, SecretStr],
    *,
    task_id: int | None = None,
    task_config: Mapping[str, Any] | None = None,
    access: SourceAccess | None = None,
) -> WebhookConnector[Any, Any] | SourceConnector[Any]:
    """The connector (``task_id=None``) or one of its tasks, with its typed config; else :class:`PluginUnavailable`."""
    try:
        config = build_config(cls, record, secrets)
    except ValidationError as exc:
        # The stored config no longer fits the plugin (e.g. after an upgrade): a configuration error, not a crash.
        raise PluginUnavailable(
            f"stored config of {record.id} is invalid for {record.type}: {exc.error_count()} error(s)"
        ) from exc
    ctx = ConnectorContext(record.tenant, record.name, task_id, dict(task_config or {}), access or SourceAccess())
    return cls(config, ctx)


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
