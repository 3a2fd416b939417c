"""The writer leases of Delta tables on S3 (processors.enrichment.single_writer) over an in-memory lease store with a
settable clock: all or none, waiting for a holder, a dead holder's expiry, fencing, nothing for a local lake."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from metalake.lake_settings import LakeWriterLeaseSettings
from metalake.lake_uri import S3Path
from metalake.lease import Lease, LeaseDoc, LeaseStore
from processors.enrichment.single_writer import (
    NO_FENCE,
    NoWriterLeases,
    WriterLeaseLost,
    WriterLeases,
    WriterLeaseTimeout,
    lease_key,
    s3_table,
)

EVENTS = "s3a://lake/p/acme/events"
ASSETS = "s3a://lake/p/acme/assets"


class MemoryLeases(LeaseStore):
    """LeaseStore's semantics (one live holder per key, expiry, owner-only renew and release) in a dict."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self.docs: dict[str, LeaseDoc] = {}

    def acquire(self, key: str, owner: str, ttl_s: float) -> Lease | None:
        held = self.docs.get(key)
        if held is not None and held["owner"] != owner and held["expires_at"] > self.now:
            return None
        expires = self.now + timedelta(seconds=ttl_s)
        self.docs[key] = {"_id": key, "owner": owner, "acquired_at": self.now, "expires_at": expires}
        return Lease(key, owner, expires)

    def holder(self, key: str) -> LeaseDoc | None:
        return self.docs.get(key)

    def renew(self, lease: Lease, ttl_s: float) -> Lease | None:
        held = self.docs.get(lease.key)
        if held is None or held["owner"] != lease.owner:
            return None
        held["expires_at"] = self.now + timedelta(seconds=ttl_s)
        return Lease(lease.key, lease.owner, held["expires_at"])

    def release(self, lease: Lease) -> None:
        if (held := self.docs.get(lease.key)) is not None and held["owner"] == lease.owner:
            del self.docs[lease.key]


class FakeTime:
    """A monotonic clock and a sleep that advance the store's clock too (a waiting writer lets time pass)."""

    def __init__(self, store: MemoryLeases) -> None:
        self.store = store
        self.t = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds
        self.store.now += timedelta(seconds=seconds)


SETTINGS = LakeWriterLeaseSettings(ttl_s=30, wait_s=100, poll_s=1)


def writers(store: MemoryLeases, owner: str, clock: FakeTime | None = None) -> WriterLeases:
    clock = clock or FakeTime(store)
    return WriterLeases(store, SETTINGS, owner, sleep=clock.sleep, monotonic=clock.monotonic)


def test_one_key_per_table_whatever_the_scheme_and_none_on_a_local_folder() -> None:
    assert (
        lease_key(S3Path.parse("s3a://lake/p/t"))
        == lease_key(S3Path.parse("s3://lake/p/t"))
        == "lake-writer:s3://lake/p/t"
    )
    assert s3_table("s3a://lake/p/t") == S3Path.parse("s3a://lake/p/t")
    assert s3_table("/data/lake/t") is None and s3_table(Path("/data/lake/t")) is None


def test_a_local_lake_takes_no_lease() -> None:
    store = MemoryLeases()
    with writers(store, "job").holding([Path("/lake/acme/events"), "/lake/acme/assets"]) as fence:
        assert fence is NO_FENCE
        fence.check()
    assert store.docs == {}
    with NoWriterLeases().holding(["/lake/acme/events"]) as fence:
        assert fence is NO_FENCE


def test_without_a_lease_store_an_s3_table_is_refused_not_written_unguarded() -> None:
    with pytest.raises(RuntimeError, match="writer leases"), NoWriterLeases().holding([EVENTS]):
        pass


def test_holding_takes_every_table_and_releases_them_at_the_end() -> None:
    store = MemoryLeases()
    with writers(store, "job").holding([EVENTS, ASSETS, EVENTS]) as fence:
        assert sorted(store.docs) == [lease_key(S3Path.parse(ASSETS)), lease_key(S3Path.parse(EVENTS))]
        assert fence.keys == sorted(store.docs)
        fence.check()
    assert store.docs == {}


def test_all_or_none_a_refused_table_releases_those_taken() -> None:
    store = MemoryLeases()
    assets_key = lease_key(S3Path.parse(ASSETS))
    assert store.acquire(assets_key, "maintain", 30) is not None
    job = writers(store, "job")
    keys = sorted([lease_key(S3Path.parse(EVENTS)), assets_key])
    assert job.try_acquire(keys) is None
    assert list(store.docs) == [assets_key]  # the events lease it took first was given back


def test_a_writer_waits_for_the_holder_and_goes_once_it_releases() -> None:
    store = MemoryLeases()
    clock = FakeTime(store)
    maintain = writers(store, "maintain")
    holding = maintain.holding([EVENTS])
    holding.__enter__()
    released = {"at": 3.0}

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.t >= released["at"]:
            holding.__exit__(None, None, None)
            released["at"] = float("inf")

    job = WriterLeases(store, SETTINGS, "job", sleep=sleep, monotonic=clock.monotonic)
    with job.holding([EVENTS]) as fence:
        assert store.docs[lease_key(S3Path.parse(EVENTS))]["owner"] == "job"
        fence.check()
    assert clock.slept == [1, 1, 1]


def test_a_dead_holder_blocks_only_until_its_lease_expires() -> None:
    store = MemoryLeases()
    assert store.acquire(lease_key(S3Path.parse(EVENTS)), "dead-driver", SETTINGS.ttl_s) is not None
    clock = FakeTime(store)
    with writers(store, "erase", clock).holding([EVENTS]):
        assert store.docs[lease_key(S3Path.parse(EVENTS))]["owner"] == "erase"
    assert sum(clock.slept) == pytest.approx(SETTINGS.ttl_s)


def test_a_live_holder_past_the_wait_is_a_readable_refusal() -> None:
    store = MemoryLeases()
    key = lease_key(S3Path.parse(EVENTS))
    held = store.acquire(key, "host:42:job", SETTINGS.ttl_s)
    assert held is not None

    clock = FakeTime(store)

    def renewing_sleep(seconds: float) -> None:
        clock.sleep(seconds)
        store.renew(held, SETTINGS.ttl_s)  # the holder is alive and renews

    waiter = WriterLeases(store, SETTINGS, "maintain", sleep=renewing_sleep, monotonic=clock.monotonic)
    with pytest.raises(WriterLeaseTimeout, match="held by host:42:job"), waiter.holding([EVENTS]):
        pass
    assert clock.t >= SETTINGS.wait_s


def test_the_fence_refuses_to_commit_once_the_lease_was_taken_over() -> None:
    store = MemoryLeases()
    stalled = writers(store, "stalled-job")
    with stalled.holding([EVENTS]) as fence:
        fence.check()
        store.now += timedelta(seconds=SETTINGS.ttl_s + 1)  # stalled past the TTL: no renewal meanwhile
        assert store.acquire(lease_key(S3Path.parse(EVENTS)), "maintain", SETTINGS.ttl_s) is not None
        with pytest.raises(WriterLeaseLost, match="another writer took it over"):
            fence.check()
    # Its exit released nothing of the new holder's.
    assert store.docs[lease_key(S3Path.parse(EVENTS))]["owner"] == "maintain"


def test_the_fence_check_extends_the_lease() -> None:
    store = MemoryLeases()
    with writers(store, "job").holding([EVENTS]) as fence:
        store.now += timedelta(seconds=SETTINGS.ttl_s - 1)
        fence.check()
        assert store.docs[lease_key(S3Path.parse(EVENTS))]["expires_at"] == store.now + timedelta(seconds=30)
