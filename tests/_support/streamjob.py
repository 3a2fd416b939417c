"""A dedicated tenant's streaming job as a child process, and probes of its output (Delta via Trino, MongoDB).

Fault tests run one of these per test, for a fresh dedicated tenant (its own topics, checkpoints and ``txnAppId``),
so the shared pooled job never touches their data, and they can kill it (SIGKILL) and restart it at will.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pymongo import MongoClient

from metalake.events import CloudEvent, new_event, spec_for
from metalake.kafka import EventProducer, PublishError
from metalake.urn import asset_urn
from ops.settings import Settings
from tenants.naming import TenantNames
from tests._support import spark_jvm
from tests._support.itest import trino_rows, wait_for
from tests._support.trinoschema import schema_of

# The jobs tests start live seconds, on 2 cores: C2's compiler threads cost them more than its faster code gives back
# (CI: the five-kill chaos test 148 -> 120 s, asset health 77 -> 63 s). Not for the lake commands, whose OPTIMIZE and
# DELETE runs are long enough for C2 to pay (with C1 only, erase took 1.6x as long), nor the stack's pooled job.


def _job_env(env: dict[str, str] | None) -> dict[str, str]:
    out = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    out[spark_jvm.VARIABLE] = spark_jvm.with_c1(out.get(spark_jvm.VARIABLE, ""))
    return out


class Job:
    """One streaming job process for a dedicated tenant, its output in a log file (appended across restarts)."""

    def __init__(
        self, tenant: str, log: Path, env: dict[str, str] | None = None, extra_args: Sequence[str] = ()
    ) -> None:
        self.log = log
        self.ready = log.with_suffix(".ready")
        self.ready.unlink(missing_ok=True)
        self.started = time.monotonic()
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "processors.enrichment",
                    "--tenant",
                    tenant,
                    "--ready-file",
                    str(self.ready),
                    *extra_args,
                ],
                env=_job_env(env),
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def wait_ready(self, timeout_s: float = 180) -> None:
        """Until the queries run (the ready file); fail with the log's tail if the process died first."""

        def probe() -> bool:
            if not self.alive and not self.ready.exists():
                raise AssertionError(f"job exited with {self.proc.returncode} before it was ready:\n{self.tail()}")
            return self.ready.exists()

        wait_for("the streaming job to be ready", probe, timeout_s=timeout_s)

    def wait_exit(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"job still running after {timeout_s:.0f}s:\n{self.tail()}") from None

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no checkpoint commit, as a crashed host would leave it."""
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def next_batch_id(checkpoint: Path) -> int:
    """The id of the next batch a query will plan: one past the newest batch in its offsets log (0 if none)."""
    offsets = [int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")] if checkpoint.exists() else []
    return max(offsets, default=-1) + 1


def settled(checkpoint: Path) -> bool:
    """Whether a query has committed every batch it planned, if any (its newest offsets entry has its commit):
    stopped now, it replays nothing."""
    done = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")] if checkpoint.exists() else []
    return max(done, default=-1) + 1 == next_batch_id(checkpoint)


def txn_versions(table_dir: Path) -> list[tuple[str, int]]:
    """The (appId, version) pairs recorded in a Delta table's commits, read from the log files themselves."""
    pairs = []
    for commit in sorted((table_dir / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                pairs.append((action["txn"]["appId"], action["txn"]["version"]))
    return pairs


def publish_confirmed(
    producer: EventProducer, events: Sequence[CloudEvent], names: TenantNames, deadline_s: float = 120
) -> int:
    """Publish until Kafka confirms every event, retrying retriable errors; return the number of attempts.

    A retry sends the whole batch again: an event whose first send reached Kafka but whose confirmation was lost
    would then be in Kafka twice (the idempotent producer only deduplicates its own internal retries)."""
    deadline = time.monotonic() + deadline_s
    attempts = 0
    while True:
        attempts += 1
        try:
            producer.publish(events, lambda e: names.topic(spec_for(e.type).topic_class(e.data)))
            return attempts
        except PublishError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                raise
            time.sleep(1)


def delta_record_counts(cursor: Any, names: TenantNames) -> tuple[int, int, int]:
    """(rows, distinct Kafka records, distinct event ids) of the tenant's Delta ``events`` table; zeros before it is
    in Trino. ``events`` is history keyed by Kafka delivery: the job appends each record once (rows == records),
    and an event its producer sent twice (a retry after a confirmation lost to a broker's shutdown) is two records
    (records > event ids)."""
    record = "format('%s/%s/%s', kafka_topic, kafka_partition, kafka_offset)"
    sql = f'SELECT count(*), count(DISTINCT {record}), count(DISTINCT event_id) FROM "{schema_of(names)}".events'
    rows = trino_rows(cursor, sql)
    return (int(rows[0][0]), int(rows[0][1]), int(rows[0][2])) if rows else (0, 0, 0)


def delta_event_counts(cursor: Any, names: TenantNames) -> tuple[int, int]:
    """(rows, distinct event ids) of the tenant's Delta ``events`` table; (0, 0) before it is in Trino."""
    rows, _, event_ids = delta_record_counts(cursor, names)
    return rows, event_ids


def _wait_for_count(
    cursor: Any, names: TenantNames, expected: int, which: int, timeout_s: float, job: Job | None
) -> tuple[int, int, int]:
    """Until count ``which`` of :func:`delta_record_counts` reaches ``expected``; fail early (with its log) if
    ``job`` died."""

    def probe() -> tuple[int, int, int] | None:
        if job is not None and not job.alive:
            raise AssertionError(f"the streaming job died while waiting for its events:\n{job.tail()}")
        counts = delta_record_counts(cursor, names)
        return counts if counts[which] >= expected else None

    what = ("rows", "Kafka records", "event ids")[which]
    return wait_for(f"{expected} {what} in {schema_of(names)}.events", probe, timeout_s=timeout_s, interval_s=1)


def wait_for_events(
    cursor: Any, names: TenantNames, expected: int, timeout_s: float, job: Job | None = None
) -> tuple[int, int]:
    """Until the ``events`` table holds ``expected`` rows; :func:`delta_event_counts` then."""
    rows, _, event_ids = _wait_for_count(cursor, names, expected, 0, timeout_s, job)
    return rows, event_ids


def wait_for_event_ids(
    cursor: Any, names: TenantNames, expected: int, timeout_s: float, job: Job | None = None
) -> tuple[int, int, int]:
    """Until the ``events`` table holds ``expected`` distinct event ids, for a producer that may send an event twice;
    :func:`delta_record_counts` then."""
    return _wait_for_count(cursor, names, expected, 2, timeout_s, job)


AssetState = tuple[str, int, str, bool]


def delta_assets(cursor: Any, names: TenantNames) -> list[AssetState]:
    rows = trino_rows(cursor, f'SELECT urn, version, event_id, deleted FROM "{schema_of(names)}".assets ORDER BY urn')
    return [(r[0], int(r[1]), r[2], bool(r[3])) for r in rows or []]


def mongo_assets(mongo: MongoClient[dict[str, Any]], names: TenantNames) -> list[AssetState]:
    docs = mongo[names.mongo_database]["assets"].find({}, {"version": 1, "event_id": 1, "deleted": 1})
    return sorted((d["_id"], int(d["version"]), d["event_id"], bool(d["deleted"])) for d in docs)


def newest_states(events: Sequence[CloudEvent]) -> list[AssetState]:
    """What every asset's state must end as: its newest (version, event id) event, deleted if that is a delete."""
    newest: dict[str, CloudEvent] = {}
    for e in events:
        held = newest.get(e.data["urn"])
        if held is None or (e.data["version"], e.id) > (held.data["version"], held.id):
            newest[e.data["urn"]] = e
    return sorted((urn, e.data["version"], e.id, e.type == "io.metalake.asset.deleted.v1") for urn, e in newest.items())


def table_events(tenant: str, n_tables: int) -> list[CloudEvent]:
    """``n_tables`` table upserts: they all ride the priority topic, so only the priority query has a batch 0."""
    return [
        new_event(
            "io.metalake.asset.upserted.v1",
            tenant,
            {
                "urn": asset_urn("postgres", "faults", "db", "public", f"t{t}"),
                "version": 10,
                "kind": "table",
                "name": f"t{t}",
            },
            source="/tests/faults",
        )
        for t in range(n_tables)
    ]


def kill_after_delta_commit_then_restart(
    settings: Settings,
    names: TenantNames,
    mongo: MongoClient[dict[str, Any]],
    cursor: Any,
    logs: Path,
    env: dict[str, str] | None = None,
) -> None:
    """The effectively-once proof for a dedicated tenant's job (run with ``env``: e.g. on a Spark cluster): killed
    (SIGKILL) right after batch 0's Delta commit and before MongoDB, then restarted, it ends with every event once in
    Delta, one commit for batch 0, and MongoDB equal to Delta."""
    tenant = names.tenant_id
    events = table_events(tenant, n_tables=12)
    with EventProducer(settings) as producer:
        producer.publish(events, lambda e: names.topic(spec_for(e.type).topic_class(e.data)))

    crashed = Job(
        tenant,
        logs / "job-1.log",
        env={**(env or {}), "METALAKE_FAULTS__KILL_AFTER_DELTA": "0", "METALAKE_FAULTS__LAKE_ONLY": "1"},
    )
    try:
        code = crashed.proc.wait(timeout=300)
    finally:
        crashed.stop()
    assert code == -signal.SIGKILL, crashed.tail()
    # The crash window: batch 0 is in Delta (events and assets), MongoDB has nothing yet.
    query = f"metalake-dedicated-{tenant}-lake"
    assert (query, 0) in txn_versions(names.delta_path("events"))
    assert (query, 0) in txn_versions(names.delta_path("assets"))
    assets = mongo[names.mongo_database]["assets"]
    assert assets.count_documents({}) == 0

    schema = schema_of(names)
    restarted = Job(tenant, logs / "job-2.log", env=env)
    try:
        wait_for("MongoDB after the replay", lambda: assets.count_documents({}) == len(events) or None, timeout_s=240)
        # The replay of batch 0 is skipped by Delta; the lake query's next batches hold nothing new either.
        wait_for(
            "every asset in Delta",
            lambda: trino_rows(cursor, f'SELECT count(*) FROM "{schema}".assets') == [(len(events),)] or None,
            timeout_s=240,
        )
    finally:
        restarted.stop()

    # Replaying batch 0 added no second commit for it: Delta skipped it by its (appId, version).
    assert txn_versions(names.delta_path("events")).count((query, 0)) == 1
    count = trino_rows(cursor, f'SELECT count(*), count(DISTINCT event_id) FROM "{schema}".events')
    assert count == [(len(events), len(events))]
    delta_assets = trino_rows(cursor, f'SELECT urn, version, event_id FROM "{schema}".assets ORDER BY urn')
    mongo_assets = sorted((d["_id"], d["version"], d["event_id"]) for d in assets.find({}))
    assert delta_assets == mongo_assets
    assert len(mongo_assets) == len(events)
