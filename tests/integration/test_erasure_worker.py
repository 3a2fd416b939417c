"""The erasure queue and the lake worker on the real FerretDB, with the erase command stood in (no Spark): admission
is bounded (per tenant, globally, one per target) even under concurrent requests; the worker runs at most its
concurrency, fails an erase that times out, records outcomes without the URN, takes over a crashed worker's erasure
once its lease expired and leaves a live one alone.

Each test uses a scratch database of its own, not the control plane: the stack's lake worker drains the control
plane's queue and would take these erasures."""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from control.erasures import (
    ERASURES_COLLECTION,
    PENDING_ERASURES,
    AlreadyQueued,
    ErasureQueue,
    ErasureRecord,
    ErasureState,
    QueueFull,
    QueueLimits,
    announcement_id,
    erasure_key,
)
from control.settings import ErasureSettings
from metalake.lease import LEASES
from metalake.mongo import mongo_client
from ops.settings import Settings
from processors.lake.worker import ORPHANED, REFUSED, TIMED_OUT, Ending, ErasureWorker, Outcome
from tests._support.itest import wait_for

pytestmark = pytest.mark.integration

URN = "urn:metalake:postgres:it/shop/public/customers"


def _hash(urn: str) -> str:
    return hashlib.sha256(urn.encode()).hexdigest()


@pytest.fixture
def scratch(settings: Settings, stack: object) -> Iterator[Database[Any]]:
    client: MongoClient[dict[str, Any]] = mongo_client(settings)
    name = f"it_erasures_{secrets.token_hex(4)}"
    try:
        yield client[name]
    finally:
        client.drop_database(name)
        client.close()


def _queue(db: Database[Any], queue_max: int = 50, per_tenant_max: int = 3) -> ErasureQueue:
    return ErasureQueue(db, QueueLimits(queue_max=queue_max, per_tenant_max=per_tenant_max))


class Runner:
    """The erase command stood in: the outcome given for the URN (else ``default``), once ``hold`` is set."""

    def __init__(self, default: Outcome, by_urn: Mapping[str, Outcome] | None = None, block: bool = False) -> None:
        self.default = default
        self.by_urn = dict(by_urn or {})
        self.argvs: list[list[str]] = []
        self.stdins: list[str] = []
        self.hold = threading.Event()
        if not block:
            self.hold.set()
        self.running = 0
        self.most = 0
        self._lock = threading.Lock()

    def __call__(self, argv: Sequence[str], timeout_s: float, stop: threading.Event, stdin: str) -> Outcome:
        with self._lock:
            self.argvs.append(list(argv))
            self.stdins.append(stdin)
            self.running += 1
            self.most = max(self.most, self.running)
            # The URN comes on stdin (``--urn -``), never on the command line.
            outcome = self.by_urn.get(stdin.strip(), self.default)
        self.hold.wait(30)
        with self._lock:
            self.running -= 1
        return outcome


def _worker(
    settings: Settings, db: Database[Any], runner: Runner, audits: list[tuple[str, str]], **erasure: Any
) -> ErasureWorker:
    tuned = settings.model_copy(update={"erasure": ErasureSettings(**{"poll_s": 0.1, **erasure})})

    def audit(record: ErasureRecord, result: str, _counts: Mapping[str, int]) -> None:
        audits.append((record.id, result))

    return ErasureWorker(tuned, db, runner=runner, audit=audit)


def test_admission_is_bounded_per_tenant_globally_and_per_target(scratch: Database[Any], tenant: str) -> None:
    queue = _queue(scratch, queue_max=3, per_tenant_max=2)
    first = queue.enqueue(tenant, URN, _hash(URN), False, "it-dpo")
    assert first.state is ErasureState.ACCEPTED
    # The same target again, while the first is queued: 409 in the API.
    with pytest.raises(AlreadyQueued) as same:
        queue.enqueue(tenant, URN, _hash(URN), True, "it-dpo")
    assert same.value.existing == first.id
    queue.enqueue(tenant, f"{URN}/email", _hash(f"{URN}/email"), False, "it-dpo")
    with pytest.raises(QueueFull) as mine:
        queue.enqueue(tenant, f"{URN}/name", _hash(f"{URN}/name"), False, "it-dpo")
    assert (mine.value.scope, mine.value.limit) == ("tenant", 2)
    queue.enqueue(f"{tenant}-b", URN, _hash(URN), False, "it-dpo")
    with pytest.raises(QueueFull) as everyone:
        queue.enqueue(f"{tenant}-c", URN, _hash(URN), False, "it-dpo")
    assert (everyone.value.scope, everyone.value.limit) == ("global", 3)
    # A finished erasure frees its place, and its target may be erased again.
    queue.store.update(tenant, first.id, ErasureState.DONE)
    again = queue.enqueue(tenant, URN, _hash(URN), False, "it-dpo")
    assert again.id != first.id
    # The URN waits in erasures_pending only; the status documents hold its hash.
    assert queue.pending.urn(tenant, again.id) == URN
    assert all(URN not in str(doc) for doc in scratch[ERASURES_COLLECTION].find({}))


def test_concurrent_requests_cannot_overshoot_the_tenant_limit(scratch: Database[Any], tenant: str) -> None:
    queue = _queue(scratch, per_tenant_max=3)
    admitted: list[str] = []
    refused: list[str] = []
    start = threading.Barrier(8)

    def request(i: int) -> None:
        urn = f"{URN}/c{i}"
        start.wait()
        try:
            admitted.append(queue.enqueue(tenant, urn, _hash(urn), False, "it-dpo").id)
        except QueueFull:
            refused.append(urn)

    threads = [threading.Thread(target=request, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert (len(admitted), len(refused)) == (3, 5)
    assert scratch[ERASURES_COLLECTION].count_documents({"tenant": tenant}) == 3


def test_the_worker_records_outcomes_without_the_urn_and_audits_them(
    settings: Settings, scratch: Database[Any], tenant: str
) -> None:
    restart = "restart the propagation processor (metalake propagation run) so it forgets the asset"
    report = json.dumps(
        {
            "delta_rows": {"assets": 1, "events": 3},
            "mongo_documents": {"assets": 1},
            "vacuumed": [],
            "propagation_notified": False,
            "action_required": restart,
        }
    )
    urns = [URN, f"{URN}/a", f"{URN}/b", f"{URN}/c"]
    outcomes = [Outcome(Ending.EXITED, 2), Outcome(Ending.EXITED, 1), Outcome(Ending.TIMED_OUT)]
    runner = Runner(Outcome(Ending.EXITED, 0, report), dict(zip(urns[1:], outcomes, strict=True)))
    audits: list[tuple[str, str]] = []
    worker = _worker(settings, scratch, runner, audits, concurrency=1, timeout_s=5.0)
    queue = _queue(scratch, per_tenant_max=10)
    ids = [queue.enqueue(tenant, u, _hash(u), i == 0, "it-dpo").id for i, u in enumerate(urns)]
    for _ in ids:
        wait_for("the worker took one", lambda: worker.poll() == 1 or len(worker.ran) == len(ids), timeout_s=30)
        worker.wait(30)
    records = [queue.store.get(tenant, i) for i in ids]
    done, refused, failed, timed_out = records
    assert done is not None and done.state is ErasureState.DONE and done.error is None
    assert dict(done.counts) == {"delta.assets": 1, "delta.events": 3, "mongo.assets": 1}
    assert done.action_required == restart
    assert refused is not None and (refused.state, refused.error) == (ErasureState.FAILED, REFUSED)
    assert failed is not None and (failed.state, failed.error) == (ErasureState.FAILED, "exit code 1")
    assert timed_out is not None and (timed_out.state, timed_out.error) == (ErasureState.FAILED, TIMED_OUT)
    by_urn = dict(zip((s.strip() for s in runner.stdins), runner.argvs, strict=True))
    assert not any(u in a for argv in runner.argvs for a in argv for u in urns)
    assert by_urn[URN][2:] == [
        "processors.lake",
        "erase",
        "--yes",
        "--tenant",
        tenant,
        "--urn",
        "-",
        "--actor",
        "it-dpo",
        "--erasure-id",
        announcement_id(tenant, ids[0]),
        "--include-children",
    ]
    assert sorted(audits) == sorted(zip(ids, ["done", "failed", "failed", "failed"], strict=True))
    # Once finished, the URN is nowhere: not pending, not on a status document; the leases are released.
    assert scratch[PENDING_ERASURES].count_documents({}) == 0
    assert all(URN not in str(doc) for doc in scratch[ERASURES_COLLECTION].find({}))
    assert scratch[LEASES].count_documents({}) == 0


def test_the_worker_runs_at_most_its_concurrency(settings: Settings, scratch: Database[Any], tenant: str) -> None:
    runner = Runner(Outcome(Ending.EXITED, 0, "{}"), block=True)
    worker = _worker(settings, scratch, runner, [], concurrency=2)
    queue = _queue(scratch, per_tenant_max=10)
    ids = [queue.enqueue(tenant, f"{URN}/{i}", _hash(f"{URN}/{i}"), False, "it-dpo").id for i in range(5)]
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for("two erases running", lambda: runner.running == 2, timeout_s=30)
        time.sleep(0.5)  # several polls: none starts a third
        assert runner.running == 2
        states = [r.state for r in queue.store.unfinished(tenant)]
        assert states.count(ErasureState.RUNNING) == 2 and states.count(ErasureState.ACCEPTED) == 3
        runner.hold.set()
        wait_for("every erasure done", lambda: len(worker.ran) == len(ids), timeout_s=60)
        assert runner.most == 2
    finally:
        runner.hold.set()
        worker.stop.set()
        thread.join(60)


def test_a_crashed_workers_erasure_is_taken_over_and_a_live_ones_is_not(
    settings: Settings, scratch: Database[Any], tenant: str
) -> None:
    queue = _queue(scratch, per_tenant_max=10)
    crashed = queue.enqueue(tenant, URN, _hash(URN), False, "it-dpo")
    alive = queue.enqueue(tenant, f"{URN}/x", _hash(f"{URN}/x"), False, "it-dpo")
    now = datetime.now(UTC)
    for record, expires in ((crashed, now - timedelta(seconds=5)), (alive, now + timedelta(minutes=5))):
        queue.store.update(tenant, record.id, ErasureState.RUNNING)
        scratch[LEASES].insert_one(
            {
                "_id": erasure_key(tenant, record.id),
                "owner": "dead-host:1:abcd",
                "acquired_at": now - timedelta(minutes=1),
                "expires_at": expires,
            }
        )
    runner = Runner(Outcome(Ending.EXITED, 0, "{}"))
    worker = _worker(settings, scratch, runner, [])
    assert worker.poll() == 1
    worker.wait(30)
    taken = queue.store.get(tenant, crashed.id)
    left = queue.store.get(tenant, alive.id)
    assert taken is not None and taken.state is ErasureState.DONE
    assert left is not None and left.state is ErasureState.RUNNING  # its holder still renews it
    assert [a[a.index("--tenant") + 1 : a.index("--urn") + 2] for a in runner.argvs] == [[tenant, "--urn", "-"]]
    assert runner.stdins == [URN + "\n"]


def test_a_queued_erasure_without_its_urn_fails_as_interrupted(
    settings: Settings, scratch: Database[Any], tenant: str
) -> None:
    queue = _queue(scratch)
    record = queue.enqueue(tenant, URN, _hash(URN), False, "it-dpo")
    queue.pending.drop(tenant, record.id)
    runner = Runner(Outcome(Ending.EXITED, 0, "{}"))
    worker = _worker(settings, scratch, runner, [])
    assert worker.poll() == 1
    worker.wait(30)
    failed = queue.store.get(tenant, record.id)
    assert failed is not None and (failed.state, failed.error) == (ErasureState.FAILED, ORPHANED)
    assert runner.argvs == []
