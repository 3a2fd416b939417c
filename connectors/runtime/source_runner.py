"""Running a :class:`SourceConnector` once (a crawl): split into tasks, then per task poll, transform, publish in
batches and store offsets.

The connector proposes up to ``tasks.max`` task configurations (Kafka Connect's ``taskConfigs``); the split is
recorded in the control plane and each task runs in its own thread with the stored offsets of the partitions it owns
(:mod:`connectors.runtime.tasks`). Per batch (``connect.source_batch_size`` records): transforms and validation
(failures dead-lettered or, under ``errors.tolerance=none``, the task FAILED), publish and wait for Kafka's
confirmation, publish the dead letters, and only then write the offsets the batch reached. A crash between two
batches resumes from the last stored offsets; a crash inside one republishes at most that batch (stores are
idempotent by event id and version).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from connectors.runtime.context import PluginUnavailable, Runtime, instantiate
from connectors.runtime.errors import ErrorPolicy, TaskFailed
from connectors.runtime.pipeline import prepare
from connectors.runtime.publisher import Publisher
from connectors.runtime.tasks import InvalidTaskConfigs, check_configs, owned_offsets, worker_id
from connectors.runtime.transforms import Chain
from control.auth.gate import tenant_usable
from control.connectors.offsets import OffsetStore, OffsetsUnavailable
from control.connectors.plugin import SourceAccess, SourceConnector, SourceRecord, partition_key
from control.connectors.reasons import public_failure, shown_error
from control.connectors.records import ConnectorRecord, ConnectorState, TaskRecord
from metalake.events import CloudEvent
from metalake.kafka import PublishError
from metalake.lease import LeaseHeld
from metalake.sealing import SealingError
from metalake.telemetry import bind_tenant
from metalake.telemetry.metrics import CRAWL_ASSETS, EVENTS

log = logging.getLogger(__name__)

DELETED = "io.metalake.asset.deleted.v1"


class CrawlRefused(RuntimeError):
    """The connector cannot run now: unknown, not a source, PAUSED or FAILED."""


# How a task's run ended, in a crawl's report.
DONE, FAILED, UNAVAILABLE, SKIPPED = "done", "failed", "unavailable", "skipped"
UNAVAILABLE_TEXT = (
    "unavailable: Kafka or the offsets topic did not confirm; the next run resumes from the stored offsets"
)


@dataclass
class CrawlSummary:
    """What one task's run did. ``records`` counts events confirmed by Kafka; ``per_kind`` splits them by asset kind.

    ``outcome``: ``done``; ``failed`` (the task is now FAILED); ``unavailable`` (Kafka could not confirm: the next run
    resumes from the stored offsets); ``skipped`` (the task was FAILED before and waits for a restart).
    """

    tenant: str
    connector: str
    task: int = 0
    records: int = 0
    per_kind: Counter[str] = field(default_factory=Counter)
    deletions: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    batches: int = 0
    offsets_stored: int = 0
    partitions: int = 0
    seconds: float = 0.0
    outcome: str = DONE
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {
            "tenant": self.tenant,
            "connector": self.connector,
            "task": self.task,
            "outcome": self.outcome,
            "records": self.records,
            "per_kind": dict(sorted(self.per_kind.items())),
            "deletions": self.deletions,
            "dead_lettered": self.dead_lettered,
            "dropped": self.dropped,
            "batches": self.batches,
            "offsets_stored": self.offsets_stored,
            "partitions": self.partitions,
            "seconds": round(self.seconds, 3),
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class CrawlReport:
    """A crawl of every task of one connector: per-task summaries and their totals."""

    tenant: str
    connector: str
    tasks: list[CrawlSummary]
    unowned_partitions: int = 0
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        """Whether some task did not complete (failed, skipped as FAILED, or Kafka unavailable)."""
        return any(t.outcome != DONE for t in self.tasks)

    @property
    def records(self) -> int:
        return sum(t.records for t in self.tasks)

    @property
    def deletions(self) -> int:
        return sum(t.deletions for t in self.tasks)

    @property
    def batches(self) -> int:
        return sum(t.batches for t in self.tasks)

    @property
    def dead_lettered(self) -> int:
        return sum(t.dead_lettered for t in self.tasks)

    @property
    def per_kind(self) -> Counter[str]:
        return sum((t.per_kind for t in self.tasks), Counter())

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "connector": self.connector,
            "failed": self.failed,
            "records": self.records,
            "per_kind": dict(sorted(self.per_kind.items())),
            "deletions": self.deletions,
            "dead_lettered": self.dead_lettered,
            "dropped": sum(t.dropped for t in self.tasks),
            "batches": self.batches,
            "unowned_partitions": self.unowned_partitions,
            "seconds": round(self.seconds, 3),
            "tasks": [t.as_dict() for t in self.tasks],
        }


#: Called by each task after each batch Kafka confirmed, and once at its end: what the task did so far, and the
#: connector's own counters (``SourceConnector.progress``). From the task's thread.
Progress = Callable[["CrawlSummary", Mapping[str, int]], None]


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
    """Drives one task (a source connector instance) through one run. Not shared between threads.

    ``summary`` holds what the run did so far, also after it raised.
    """

    def __init__(  # noqa: PLR0913
        self,
        connector: SourceConnector[Any],
        *,
        chain: Chain,
        policy: ErrorPolicy,
        publisher: Publisher,
        offsets: OffsetStore,
        batch_size: int = 1000,
        progress_every_s: float = 10.0,
        on_progress: Progress | None = None,
    ) -> None:
        self._connector = connector
        self._chain, self._policy = chain, policy
        self._publisher, self._offsets = publisher, offsets
        self._batch_size = batch_size
        self._progress_every_s = progress_every_s
        self._on_progress = on_progress
        ctx = connector.ctx
        self.summary = CrawlSummary(ctx.tenant_id, ctx.connector_name, ctx.task_id or 0)

    def run(self, stored: Mapping[str, Mapping[str, Any]] | None = None) -> CrawlSummary:
        """Poll to the end from ``stored`` (the offsets of the partitions this task owns; loaded when ``None``).

        Raises :class:`TaskFailed`, ``PublishError``, :class:`OffsetsUnavailable` or the connector's own exception.
        """
        ctx = self._connector.ctx
        summary = self.summary
        started = last_progress = time.monotonic()
        if stored is None:
            stored = self._offsets.load(ctx.tenant_id, ctx.connector_name)
        summary.partitions = len(stored)
        extra = {"connector": ctx.connector_name, "task": summary.task}
        log.info("connect.crawl_started", extra={**extra, "partitions": len(stored)})
        try:
            for batch in _batches(self._connector.poll(stored), self._batch_size):
                self._run_batch(batch, summary)
                self._report()
                if time.monotonic() - last_progress >= self._progress_every_s:
                    last_progress = time.monotonic()
                    log.info("connect.crawl_progress", extra={**extra, "records": summary.records})
        finally:
            summary.seconds = time.monotonic() - started
        self._report()  # the end, also of a crawl that published nothing
        log.info("connect.crawl_done", extra=summary.as_dict())
        return summary

    def _report(self) -> None:
        if self._on_progress is not None:
            self._on_progress(self.summary, self._connector.progress())

    def _run_batch(self, batch: list[SourceRecord], summary: CrawlSummary) -> None:
        ctx = self._connector.ctx
        for record in batch:
            if not self._connector.owns(record.partition):
                # A task that emitted for another task's partition could delete what that task publishes.
                raise TaskFailed(f"task {summary.task} emitted a record for a partition it does not own", "ownership")
        prepared = prepare(
            ((r.event, f"source:{ctx.tenant_id}/{ctx.connector_name}/{partition_key(r.partition)}") for r in batch),
            self._chain,
            self._policy,
        )
        dead = self._policy.admit(prepared.dead)
        self._publisher.publish(prepared.routed)
        self._publisher.publish_dead_letters(dead)
        self._policy.count(dead)
        # By plugin (postgres, dbt), never the connector's name: tenants name their connectors.
        plugin = self._policy.plugin
        CRAWL_ASSETS.add(len(prepared.routed), {"connector": plugin})
        EVENTS.add(len(prepared.routed), {"source": plugin, "outcome": "accepted", "reason": "none"})
        # Later records of a partition carry its newer position; KEEP leaves it; FORGET (or None) is a tombstone.
        offsets: dict[str, dict[str, Any] | None] = {}
        for record in batch:
            key = partition_key(record.partition)
            if record.forgets:
                offsets[key] = None
            elif isinstance(record.offset, Mapping):
                offsets[key] = dict(record.offset)
        self._offsets.store(ctx.tenant_id, ctx.connector_name, offsets)
        summary.batches += 1
        summary.records += len(prepared.routed)
        summary.dead_lettered += len(dead)
        summary.dropped += prepared.dropped
        summary.offsets_stored += len(offsets)
        for routed in prepared.routed:
            if routed.event.type == DELETED:
                summary.deletions += 1
            else:
                summary.per_kind[_kind_of(routed.event)] += 1


def _kind_of(event: CloudEvent) -> str:
    """An upsert's asset kind, else the event type's short name without dots (``lineage_edge_added``): the counts
    are stored as a document in the control plane, whose keys may not contain a dot."""
    kind = event.data.get("kind")
    if kind:
        return str(kind)
    return event.type.removeprefix("io.metalake.").removesuffix(".v1").replace(".", "_")


def _source_class(runtime: Runtime, record: ConnectorRecord) -> type[SourceConnector[Any]]:
    tenant, name = record.tenant, record.name
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
    return cls


def crawl(
    runtime: Runtime, tenant: str, name: str, *, isolated: bool = False, progress: Progress | None = None
) -> CrawlReport:
    """Run every task of a configured source connector once, in parallel, and report per task.

    A failure of the connector itself (its configuration, or the split: e.g. the source is unreachable while it is
    listed) marks the connector FAILED and raises. A task's failure marks that task FAILED with its trace and is in
    the report; the other tasks run on, and the FAILED task is skipped by later crawls until it is restarted (or the
    split changes). Kafka being unavailable fails nothing: the next run resumes from the stored offsets.

    One crawl per connector at a time, across processes and machines (a lease in the control plane): a second one,
    say a scheduler firing while a slow crawl still runs, is refused instead of splitting the same units again and
    racing the first on the stored offsets.

    ``isolated``: every task gets producers of its own, also a single one (in the worker, whose webhook routes use
    the runtime's publisher from other threads). ``progress``: called by each task as it goes (:data:`Progress`).
    """
    if runtime.leases is None:
        return _crawl(runtime, tenant, name, isolated, progress)
    try:
        exclusive = runtime.leases.held(f"{tenant}/{name}/crawl", runtime.settings.connect.crawl_lease_s)
        with exclusive:
            return _crawl(runtime, tenant, name, isolated, progress)
    except LeaseHeld as exc:
        raise CrawlRefused(f"connector {tenant}/{name} is being crawled already: {exc}") from exc


def _crawl(
    runtime: Runtime, tenant: str, name: str, isolated: bool = False, progress: Progress | None = None
) -> CrawlReport:
    record = runtime.store.get_connector(tenant, name)
    if record is None:
        raise CrawlRefused(f"no connector {tenant}/{name}")
    # As for its webhooks and ingest: a suspended tenant publishes nothing, however the crawl was started (the
    # scheduler, the CLI, the API). Seen within the gate's cache TTL, like a suspension for tokens.
    if not tenant_usable(runtime.gate.tenants, tenant):
        raise CrawlRefused(f"tenant {tenant} is suspended or being deleted: its connectors do not crawl")
    cls = _source_class(runtime, record)
    started = time.monotonic()
    with bind_tenant(tenant):
        try:
            secrets = runtime.store.secrets.config(tenant, name)
        except SealingError as exc:
            # Not crawled without its secrets: the message names the field and the fix, never a value.
            runtime.store.set_state(tenant, name, ConnectorState.FAILED, str(exc))
            raise CrawlRefused(str(exc)) from exc
        try:
            connector = instantiate(cls, record, secrets, access=runtime.access)
        except PluginUnavailable as exc:
            runtime.store.set_state(tenant, name, ConnectorState.FAILED, f"plugin-unavailable: {exc}")
            raise CrawlRefused(str(exc)) from exc
        assert isinstance(connector, SourceConnector)  # noqa: S101 - checked with issubclass above
        stored = runtime.offsets.load(tenant, name)
        try:
            configs = check_configs(connector.task_configs(record.tasks_max, stored), record.tasks_max)
            tasks = [_task(cls, record, secrets, i, c, runtime.access) for i, c in enumerate(configs)]
            owned, unowned = owned_offsets(stored, tasks)
        except Exception as exc:
            if not isinstance(exc, PublishError | OffsetsUnavailable):
                # The tenant's status gets a class and our words; the driver's text and the traceback, the log.
                log.warning("connect.split_failed", extra={"connector": name}, exc_info=True)
                runtime.store.set_state(tenant, name, ConnectorState.FAILED, _failure(exc))
            raise
        assigned = runtime.store.tasks.assign(tenant, name, configs)
        log.info(
            "connect.tasks_assigned",
            extra={"connector": name, "tasks": len(configs), "partitions": len(stored), "unowned": unowned},
        )
    jobs = list(zip(tasks, owned, assigned, strict=True))
    if len(jobs) == 1 and not isolated:
        summaries = [_run_task(runtime, record, *jobs[0], io=(runtime.publisher, runtime.offsets), progress=progress)]
    else:
        with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix=f"task-{name}") as pool:
            summaries = list(
                pool.map(lambda job: _run_isolated(runtime, record, job[0], job[1], job[2], progress=progress), jobs)
            )
    return CrawlReport(tenant, name, summaries, unowned, time.monotonic() - started)


def _failure(exc: BaseException) -> str:
    """What a tenant's status says about ``exc``: an error class and a message of ours, never a traceback."""
    if isinstance(exc, InvalidTaskConfigs):
        return f"invalid-split: {exc}"
    if isinstance(exc, TaskFailed):
        return f"record-failed: {exc}"
    return public_failure(exc)


def _task(
    cls: type[SourceConnector[Any]],
    record: ConnectorRecord,
    secrets: Any,  # noqa: ANN401
    task_id: int,
    config: dict[str, Any],
    access: SourceAccess,
) -> SourceConnector[Any]:
    task = instantiate(cls, record, secrets, task_id=task_id, task_config=config, access=access)
    assert isinstance(task, SourceConnector)  # noqa: S101 - cls is a SourceConnector subclass
    return task


def _run_isolated(
    runtime: Runtime,
    record: ConnectorRecord,
    task: SourceConnector[Any],
    stored: Mapping[str, Mapping[str, Any]],
    assigned: TaskRecord,
    progress: Progress | None = None,
) -> CrawlSummary:
    """A task in its own thread, with its own producers: EventProducer waits for its records with ``flush``, which
    is not safe to call from two threads on one client (one may return before the other's delivery reports ran)."""
    publisher, offsets = runtime.task_io()
    try:
        return _run_task(runtime, record, task, stored, assigned, io=(publisher, offsets), progress=progress)
    finally:
        publisher.close()
        offsets.close()


def _run_task(  # noqa: PLR0913
    runtime: Runtime,
    record: ConnectorRecord,
    task: SourceConnector[Any],
    stored: Mapping[str, Mapping[str, Any]],
    assigned: TaskRecord,
    *,
    io: tuple[Publisher, OffsetStore],
    progress: Progress | None = None,
) -> CrawlSummary:
    """One task's run, in its own thread: its state and last run are written to the control plane."""
    tenant, name, task_id = record.tenant, record.name, assigned.id
    if assigned.state is ConnectorState.FAILED:
        reason = shown_error(assigned.trace) or ""
        return CrawlSummary(tenant, name, task_id, outcome=SKIPPED, error=f"task is FAILED: {reason}")
    me = worker_id()
    with bind_tenant(tenant):  # per thread: a new thread does not inherit the caller's context
        runtime.store.tasks.set_state(tenant, name, task_id, ConnectorState.RUNNING, worker_id=me)
        runner = SourceRunner(
            task,
            chain=runtime.chain(record),
            policy=runtime.policy(record),
            publisher=io[0],
            offsets=io[1],
            batch_size=runtime.settings.connect.source_batch_size,
            on_progress=progress,
        )
        summary = runner.summary
        try:
            runner.run(stored)
        except (PublishError, OffsetsUnavailable):
            # Not the task's failure: the next run resumes from the offsets stored so far.
            summary.outcome, summary.error = UNAVAILABLE, UNAVAILABLE_TEXT
            log.warning("connect.task_unavailable", extra={"connector": name, "task": task_id}, exc_info=True)
        except Exception as exc:
            # ``last_run`` and the task's ``trace`` are served to tenant:read: a class and our words there; the
            # exception's own text and its traceback go to the operator log only.
            summary.outcome, summary.error = FAILED, _failure(exc)
            log.warning(
                "connect.task_failed",
                extra={"connector": name, "task": task_id, "error": summary.error},
                exc_info=True,
            )
            runtime.store.tasks.set_state(
                tenant, name, task_id, ConnectorState.FAILED, trace=summary.error, last_run=summary.as_dict()
            )
            return summary
        runtime.store.tasks.set_state(tenant, name, task_id, ConnectorState.RUNNING, last_run=summary.as_dict())
    return summary
