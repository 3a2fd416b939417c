"""``metalake access run``: regenerate the Trino rules as classifications and propagated tags change.

Consumes ``metalake.changes`` in its own consumer group. A batch's tag changes name the tenants to refresh; each is
reloaded from MongoDB (the change is already there: the job upserts MongoDB before it publishes the change), the
rules file is rendered once per batch, and only then are the offsets committed. A full resync runs at start and
every ``access.resync_interval_s`` (new tenants, tables registered after their columns were tagged).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence

import trino
from confluent_kafka import Message
from pymongo.errors import PyMongoError

from catalog.changes import STATE_CHANGED, InvalidChange, change_type, decode_change
from metalake.kafka import BatchConsumer, Received
from metalake.mongo import mongo_client
from metalake.telemetry.propagation import batch_span
from processors.access.settings import AccessProcessSettings
from tenants.access.sync import AccessSync
from tenants.naming import CHANGES_TOPIC

log = logging.getLogger(__name__)

TAG_TABLES = frozenset({"classifications", "propagated_tags"})
_FIRST_RETRY_S = 1.0
_MAX_RETRY_S = 30.0
_MONGO_SOCKET_TIMEOUT_MS = 30_000


def tenants_to_refresh(records: Iterable[Received]) -> set[str]:
    """Tenants whose tag assignments a batch of ``metalake.changes`` records changed. Pure; skips what it cannot
    read (other record types, records that break the state change's contract)."""
    out: set[str] = set()
    for record in records:
        if change_type(record.headers()) != STATE_CHANGED:
            continue
        try:
            change = decode_change(record.key(), record.value(), record.headers()).state_change
        except InvalidChange:
            continue
        if change is not None and change.table in TAG_TABLES:
            out.add(change.tenant)
    return out


class AccessRunner:
    """The consume loop. ``stop`` ends it after the current batch."""

    def __init__(self, settings: AccessProcessSettings, sync: AccessSync, consumer: BatchConsumer) -> None:
        self._settings = settings
        self._sync = sync
        self._consumer = consumer
        self.stop = threading.Event()
        # Set once the start-up sync is done: every tenant's current tags are in the rules.
        self.ready = threading.Event()

    def handle(self, batch: Sequence[Message]) -> None:
        tenants = tenants_to_refresh(batch)
        if tenants:
            with batch_span("access.render", (m.headers() for m in batch)) as span:
                span.set_attribute("metalake.tenants", len(tenants))
                self._sync_until_done(tenants)

    def _sync_until_done(self, tenants: set[str] | None) -> None:
        """Retry a sync while MongoDB or Trino is unreachable (the batch stays uncommitted meanwhile); give up only
        when asked to stop."""
        delay = _FIRST_RETRY_S
        while True:
            try:
                self._sync.sync(tenants)
                return
            except (PyMongoError, trino.exceptions.Error, trino.exceptions.HttpError, OSError) as exc:
                if self.stop.is_set():
                    raise
                log.warning("access.sync_failed", extra={"error": type(exc).__name__, "retry_in_s": delay})
                self.stop.wait(delay)
                delay = min(delay * 2, _MAX_RETRY_S)

    def _move_schemas(self) -> None:
        """Schemas still under an earlier name (before keyed names, or another key) move to their current one before
        the first render, so an upgraded deployment's tenants keep reading their tables. Idempotent; a failure is
        logged and the runner goes on (the next start, or ``metalake access migrate-schemas``, retries)."""
        try:
            moves = self._sync.move_schemas()
        except (PyMongoError, trino.exceptions.Error, trino.exceptions.HttpError, OSError, LookupError) as exc:
            log.warning("access.schema_move_failed", extra={"error": type(exc).__name__})
            return
        for move in moves:
            log.info("access.schema_moved", extra={"tenant": move.tenant, "left": list(move.left), "error": move.error})

    def run(self) -> None:
        interval = self._settings.access.resync_interval_s
        self._move_schemas()
        self._sync_until_done(None)
        self.ready.set()
        next_resync = time.monotonic() + interval
        while not self.stop.is_set():
            self._consumer.process_once(self.handle, max_records=500, timeout_s=0.5)
            if time.monotonic() >= next_resync:
                self._sync_until_done(None)
                next_resync = time.monotonic() + interval


def run(
    settings: AccessProcessSettings,
    *,
    group_id: str | None = None,
    stop: threading.Event | None = None,
    ready: threading.Event | None = None,
) -> None:
    """Run until ``stop`` is set (or forever). Builds its own MongoDB client and consumer and closes them."""
    # A bounded socket timeout: an operation the server never answers fails and is retried, instead of stalling
    # the runner (and every tenant's rules) forever.
    mongo = mongo_client(settings, socket_timeout_ms=_MONGO_SOCKET_TIMEOUT_MS)
    consumer = BatchConsumer(settings, group_id or settings.access.group_id, [CHANGES_TOPIC])
    runner = AccessRunner(settings, AccessSync(settings, mongo), consumer)
    if stop is not None:
        runner.stop = stop
    if ready is not None:
        runner.ready = ready
    log.info("access.started", extra={"rules_file": str(settings.access_rules_file)})
    try:
        runner.run()
    finally:
        consumer.close()
        mongo.close()
