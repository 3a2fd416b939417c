"""Running a :class:`SourceConnector` once (a crawl): poll, transform, publish in batches, then store offsets.

Per batch (``connect.source_batch_size`` records): transforms and validation (failures dead-lettered or, under
``errors.tolerance=none``, the connector FAILED), publish and wait for Kafka's confirmation, publish the dead letters,
and only then write the offsets the batch reached. A crash between two batches resumes from the last stored offsets;
a crash inside one republishes at most that batch (stores are idempotent by event id and version).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from connectors.base import SourceConnector, SourceRecord, partition_key
from connectors.runtime.context import PluginUnavailable, Runtime, instantiate
from connectors.runtime.control import ConnectorState
from connectors.runtime.errors import ErrorPolicy, TaskFailed, safe_reason
from connectors.runtime.offsets import OffsetStore, OffsetsUnavailable
from connectors.runtime.pipeline import prepare
from connectors.runtime.publisher import Publisher
from connectors.runtime.transforms import Chain
from metalake.kafka import PublishError
from metalake.telemetry import bind_tenant

log = logging.getLogger(__name__)

DELETED = "io.metalake.asset.deleted.v1"


class CrawlRefused(RuntimeError):
    """The connector cannot run now: unknown, not a source, PAUSED or FAILED."""


@dataclass
class CrawlSummary:
    """What one run did. ``records`` counts events confirmed by Kafka; ``per_kind`` splits them by asset kind."""

    tenant: str
    connector: str
    records: int = 0
    per_kind: Counter[str] = field(default_factory=Counter)
    deletions: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    batches: int = 0
    offsets_stored: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "connector": self.connector,
            "records": self.records,
            "per_kind": dict(sorted(self.per_kind.items())),
            "deletions": self.deletions,
            "dead_lettered": self.dead_lettered,
            "dropped": self.dropped,
            "batches": self.batches,
            "offsets_stored": self.offsets_stored,
            "seconds": round(self.seconds, 3),
        }


def _batches(records: Iterable[SourceRecord], size: int) -> Iterator[list[SourceRecord]]:
    batch: list[SourceRecord] = []
    for record in records:
        batch.append(record)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class SourceRunner:
    """Drives one source connector instance through one run. Not shared between threads."""

    def __init__(
        self,
        connector: SourceConnector[Any],
        *,
        chain: Chain,
        policy: ErrorPolicy,
        publisher: Publisher,
        offsets: OffsetStore,
        batch_size: int = 1000,
        progress_every_s: float = 10.0,
    ) -> None:
        self._connector = connector
        self._chain, self._policy = chain, policy
        self._publisher, self._offsets = publisher, offsets
        self._batch_size = batch_size
        self._progress_every_s = progress_every_s

    def run(self) -> CrawlSummary:
        """Poll to the end; raises :class:`TaskFailed`, ``PublishError`` or the connector's own exception."""
        ctx = self._connector.ctx
        summary = CrawlSummary(ctx.tenant_id, ctx.connector_name)
        started = last_progress = time.monotonic()
        stored = self._offsets.load(ctx.tenant_id, ctx.connector_name)
        log.info("connect.crawl_started", extra={"connector": ctx.connector_name, "partitions": len(stored)})
        for batch in _batches(self._connector.poll(stored), self._batch_size):
            self._run_batch(batch, summary)
            if time.monotonic() - last_progress >= self._progress_every_s:
                last_progress = time.monotonic()
                log.info("connect.crawl_progress", extra={"connector": ctx.connector_name, "records": summary.records})
        summary.seconds = time.monotonic() - started
        log.info("connect.crawl_done", extra=summary.as_dict())
        return summary

    def _run_batch(self, batch: list[SourceRecord], summary: CrawlSummary) -> None:
        ctx = self._connector.ctx
        prepared = prepare(
            ((r.event, f"source:{ctx.tenant_id}/{ctx.connector_name}/{partition_key(r.partition)}") for r in batch),
            self._chain,
            self._policy,
        )
        self._publisher.publish(prepared.routed)
        self._publisher.publish_dead_letters(prepared.dead)
        self._policy.count(prepared.dead)
        # Later records of a partition carry its newer position; None (a dropped partition) becomes a tombstone.
        offsets: dict[str, dict[str, Any] | None] = {}
        for record in batch:
            offsets[partition_key(record.partition)] = None if record.offset is None else dict(record.offset)
        self._offsets.store(ctx.tenant_id, ctx.connector_name, offsets)
        summary.batches += 1
        summary.records += len(prepared.routed)
        summary.dead_lettered += len(prepared.dead)
        summary.dropped += prepared.dropped
        summary.offsets_stored += len(offsets)
        for routed in prepared.routed:
            if routed.event.type == DELETED:
                summary.deletions += 1
            else:
                summary.per_kind[str(routed.event.data.get("kind") or routed.event.type)] += 1


def crawl(runtime: Runtime, tenant: str, name: str) -> CrawlSummary:
    """Run a configured source connector once. A failure of the connector marks it FAILED with the error; Kafka
    being unavailable does not (the next run resumes from the stored offsets)."""
    record = runtime.store.get_connector(tenant, name)
    if record is None:
        raise CrawlRefused(f"no connector {tenant}/{name}")
    if record.state is not ConnectorState.RUNNING:
        raise CrawlRefused(
            f"connector {tenant}/{name} is {record.state.value}{': ' + record.error if record.error else ''}"
        )
    try:
        cls = runtime.plugin_class(record.type)
    except PluginUnavailable as exc:
        raise CrawlRefused(str(exc)) from exc
    if not issubclass(cls, SourceConnector):
        raise CrawlRefused(f"connector {tenant}/{name} is of type {record.type}, not a source connector")
    with bind_tenant(tenant):
        try:
            connector = instantiate(cls, record, runtime.store.config_secrets(tenant, name))
        except PluginUnavailable as exc:
            runtime.store.set_state(tenant, name, ConnectorState.FAILED, str(exc))
            raise CrawlRefused(str(exc)) from exc
        assert isinstance(connector, SourceConnector)  # noqa: S101 - checked with issubclass above
        runner = SourceRunner(
            connector,
            chain=runtime.chain(record),
            policy=runtime.policy(record),
            publisher=runtime.publisher,
            offsets=runtime.offsets,
            batch_size=runtime.settings.connect.source_batch_size,
        )
        try:
            return runner.run()
        except TaskFailed as exc:
            runtime.store.set_state(tenant, name, ConnectorState.FAILED, str(exc))
            raise
        except Exception as exc:
            # Kafka being unavailable is not the connector's failure: the next run resumes from the stored offsets.
            if not isinstance(exc, PublishError | OffsetsUnavailable):
                runtime.store.set_state(
                    tenant, name, ConnectorState.FAILED, f"{type(exc).__name__}: {safe_reason(exc)}"
                )
            raise
