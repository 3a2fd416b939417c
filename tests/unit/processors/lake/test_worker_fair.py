"""The lake worker over fakes of its stores: it takes queued erasures round-robin over the tenants (one tenant's long
queue does not hold another's erasure back), and hands the child its URN on stdin, never on its command line."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from control.erasures import ErasureRecord, ErasureState
from control.settings import ErasureSettings
from metalake.lease import LeaseHeld
from ops.settings import Settings
from processors.lake.leased import LeasedRuns
from processors.lake.worker import Ending, ErasureWorker, Outcome, fair_order

T0 = datetime(2026, 11, 1, tzinfo=UTC)
URN = "urn:metalake:postgres:prod/shop/public/customers"


def _record(tenant: str, n: int, minutes: int, state: ErasureState = ErasureState.ACCEPTED) -> ErasureRecord:
    at = T0 + timedelta(minutes=minutes)
    return ErasureRecord(tenant, f"era_{tenant}_{n}", "h" * 64, False, state, "dpo", at, at)


class FakeStore:
    def __init__(self, records: Sequence[ErasureRecord]) -> None:
        self.records = {(r.tenant, r.id): r for r in records}

    def unfinished(self, tenant: str | None = None) -> list[ErasureRecord]:
        open_ = [r for r in self.records.values() if r.state in (ErasureState.ACCEPTED, ErasureState.RUNNING)]
        return sorted(open_, key=lambda r: (r.created_at, r.id))

    def get(self, tenant: str, erasure_id: str) -> ErasureRecord | None:
        return self.records.get((tenant, erasure_id))

    def update(self, tenant: str, erasure_id: str, state: ErasureState, **_: Any) -> ErasureRecord:
        record = replace(self.records[(tenant, erasure_id)], state=state)
        self.records[(tenant, erasure_id)] = record
        return record


class FakePending:
    def urn(self, tenant: str, erasure_id: str) -> str:
        return f"{URN}/{erasure_id}"

    def drop(self, tenant: str, erasure_id: str) -> None:
        return None


class FakeLeases:
    def __init__(self, taken: Sequence[str] = ()) -> None:
        self.taken = set(taken)

    @contextmanager
    def held(self, key: str, ttl_s: float) -> Iterator[None]:
        if key in self.taken:
            raise LeaseHeld(key, None)
        yield


class Runner:
    """The erase stood in; with ``gated``, each erase runs until the test lets it end (one per poll then)."""

    def __init__(self, gated: bool = False) -> None:
        self.calls: list[tuple[list[str], str]] = []
        self.gate = threading.Semaphore(0)
        self.gated = gated

    def __call__(self, argv: Sequence[str], timeout_s: float, stop: threading.Event, stdin: str) -> Outcome:
        self.calls.append((list(argv), stdin))
        if self.gated:
            assert self.gate.acquire(timeout=10)
        return Outcome(Ending.EXITED, 0, "{}")


def _worker(
    records: Sequence[ErasureRecord], taken: Sequence[str] = (), gated: bool = False
) -> tuple[ErasureWorker, Runner]:
    runner = Runner(gated)
    settings = Settings(erasure=ErasureSettings(concurrency=1))

    def audit(_record: ErasureRecord, _result: str, _counts: Mapping[str, int]) -> None:
        return None

    worker = ErasureWorker(settings, cast(Any, defaultdict(dict)), runner=runner, audit=audit)
    worker.store = cast(Any, FakeStore(records))
    worker.pending = cast(Any, FakePending())
    worker.runs = LeasedRuns(cast(Any, FakeLeases(taken)))
    return worker, runner


def _drain(worker: ErasureWorker) -> list[str]:
    while worker.poll():
        worker.wait(10)
    return list(worker.ran)


def test_one_tenants_long_queue_does_not_hold_back_anothers_erasure() -> None:
    # A flooder queued five erasures first; two others queued one each afterwards. The worker runs one at a time:
    # each poll lists the queue afresh and starts one.
    flood = [_record("flooder", n, n) for n in range(5)]
    worker, runner = _worker([*flood, _record("acme", 0, 10), _record("zeta", 0, 11)], gated=True)
    for _ in range(7):
        assert worker.poll() == 1
        assert worker.poll() == 0  # the one started still runs
        runner.gate.release()
        worker.wait(10)
    assert worker.ran[:3] == ["era_flooder_0", "era_acme_0", "era_zeta_0"]
    assert worker.ran[3:] == [f"era_flooder_{n}" for n in range(1, 5)]


def test_several_started_in_one_poll_go_round_robin_too() -> None:
    flood = [_record("flooder", n, n) for n in range(3)]
    records = [*flood, _record("acme", 0, 10), _record("acme", 1, 12), _record("zeta", 0, 11)]
    order = [r.id for r in fair_order(records)]
    assert order == ["era_flooder_0", "era_acme_0", "era_zeta_0", "era_flooder_1", "era_acme_1", "era_flooder_2"]
    # Served tenants go after those never served, the least recently served first.
    later = [r.id for r in fair_order(records, {"flooder": 7, "acme": 3})]
    assert later[:3] == ["era_zeta_0", "era_acme_0", "era_flooder_0"]


def test_a_tenant_with_an_erasure_running_waits_behind_the_others() -> None:
    # The flooder's first runs on another worker (its lease is held there): acme's goes next, not the flooder's 2nd.
    running = _record("flooder", 0, 0, ErasureState.RUNNING)
    records = [running, _record("flooder", 1, 1), _record("acme", 0, 5)]
    assert [r.id for r in fair_order(records)] == ["era_acme_0", "era_flooder_0", "era_flooder_1"]
    worker, _ = _worker(records, taken=["flooder/erasure/era_flooder_0"])
    assert _drain(worker) == ["era_acme_0", "era_flooder_1"]


def test_the_urn_goes_to_the_child_on_stdin_never_on_its_command_line() -> None:
    worker, runner = _worker([_record("acme", 0, 0)])
    assert _drain(worker) == ["era_acme_0"]
    [(argv, stdin)] = runner.calls
    assert stdin == f"{URN}/era_acme_0\n"
    assert argv[argv.index("--urn") + 1] == "-" and not any("urn:metalake" in a for a in argv)
