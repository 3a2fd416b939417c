"""The lake commands' S3 parts without a store: tenants discovered from the bucket's prefixes (an emptied folder
no longer counts), a tenant folder's existence, and drop's deletion of a folder on S3 under the writer leases of the
tenant's tables. The store itself is covered by tests/unit/metalake/test_s3_objects.py, the whole on SeaweedFS by
tests/integration/test_s3_lake_ops.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from metalake.lake_settings import LakeWriterLeaseSettings
from metalake.lake_uri import S3Path
from metalake.lease import Lease, LeaseDoc, LeaseStore
from processors.enrichment.single_writer import KEY_PREFIX, WriterLeases
from processors.lake import discover
from processors.lake.discover import Directory, has_folder, lake_tenants
from processors.lake.drop import SPARK_TABLES, DropReport, remove_folder
from tenants.naming import names_for

ROOT = S3Path.parse("s3a://bkt/lake")


@dataclass
class Store:
    """Objects by key; answers the discovery and drop calls as S3 does."""

    keys: set[str] = field(default_factory=set)
    deleted_under: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    on_delete: list[object] = field(default_factory=list)

    def common_prefixes(self, bucket: str, prefix: str) -> list[str]:
        return sorted({k[len(prefix) :].split("/", 1)[0] for k in self.keys if k.startswith(prefix)})

    def has_objects(self, bucket: str, prefix: str) -> bool:
        return any(k.startswith(prefix) for k in self.keys)

    def delete_prefix(self, bucket: str, prefix: str, first: Sequence[str] = ()) -> int:
        self.deleted_under.append((bucket, prefix, tuple(first)))
        for hook in self.on_delete:
            hook()  # type: ignore[operator]
        doomed = {k for k in self.keys if k.startswith(prefix)}
        self.keys -= doomed
        return len(doomed)


class MemoryLeases(LeaseStore):
    def __init__(self) -> None:
        self.docs: dict[str, LeaseDoc] = {}
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def acquire(self, key: str, owner: str, ttl_s: float) -> Lease | None:
        held = self.docs.get(key)
        if held is not None and held["owner"] != owner:
            return None
        expires = self.now + timedelta(seconds=ttl_s)
        self.docs[key] = {"_id": key, "owner": owner, "acquired_at": self.now, "expires_at": expires}
        return Lease(key, owner, expires)

    def holder(self, key: str) -> LeaseDoc | None:
        return self.docs.get(key)

    def renew(self, lease: Lease, ttl_s: float) -> Lease | None:
        return lease if lease.key in self.docs else None

    def release(self, lease: Lease) -> None:
        self.docs.pop(lease.key, None)


class _Registry:
    def get(self, tenant_id: str) -> None:
        return None

    def list(self) -> list[object]:
        return []


def test_tenants_of_an_s3_lake_are_its_prefixes_that_hold_objects() -> None:
    store = Store({"lake/acme/audit/_delta_log/0.json", "lake/beta-co/events/x.parquet", "lake/_pooled/events/y"})
    store.keys |= {"lake/_trino_metastore/z", "lake/Bad_Id/w", "other/gamma/audit/v"}
    assert lake_tenants(ROOT, store) == ["acme", "beta-co"]
    assert lake_tenants(ROOT) == []  # no client, no listing


def test_an_emptied_folder_a_file_system_backed_store_still_lists_is_no_tenant() -> None:
    class KeepsFolders(Store):
        def common_prefixes(self, bucket: str, prefix: str) -> list[str]:
            return ["acme", "dropped"]

    assert lake_tenants(ROOT, KeepsFolders({"lake/acme/audit/x"})) == ["acme"]


def test_a_tenant_folder_on_s3_exists_while_an_object_is_under_it() -> None:
    store = Store({"lake/acme2/audit/x"})
    assert not has_folder(ROOT / "acme", store)  # a longer id sharing the prefix is not the tenant
    assert has_folder(ROOT / "acme2", store)
    assert not has_folder(ROOT / "acme2")  # no client: nothing known
    directory = Directory(ROOT, _Registry(), lambda: [], None, store)  # type: ignore[arg-type]
    assert directory.exists(names_for("acme2", ROOT))


def test_drop_deletes_a_folder_on_s3_holding_the_tenants_table_leases() -> None:
    names = names_for("acme", ROOT, dedicated=True)
    store = Store({"lake/acme/events/_delta_log/0.json", "lake/acme/events/p.parquet", "lake/acme2/audit/x"})
    memory = MemoryLeases()
    held: list[set[str]] = []
    store.on_delete.append(lambda: held.append(set(memory.docs)))
    leases = WriterLeases(memory, LakeWriterLeaseSettings())
    report = DropReport("acme", "dedicated")
    remove_folder(names, report, store, leases)
    assert store.deleted_under == [("bkt", "lake/acme/", ("_delta_log",))]
    assert store.keys == {"lake/acme2/audit/x"}
    assert (report.removed, report.removed_objects) == (["acme"], 2)
    assert held == [{f"{KEY_PREFIX}s3://bkt/lake/acme/{t}" for t in SPARK_TABLES}]
    assert memory.docs == {}  # given back
    again = DropReport("acme", "dedicated")
    remove_folder(names, again, store, leases)
    assert (again.removed, again.removed_objects) == ([], 0)


def test_drop_refuses_a_folder_on_s3_without_the_store_or_the_leases() -> None:
    names = names_for("acme", ROOT)
    with pytest.raises(RuntimeError, match="object store client"):
        remove_folder(names, DropReport("acme", "pooled"))
    with pytest.raises(RuntimeError, match="writer leases"):
        remove_folder(names, DropReport("acme", "pooled"), Store({"lake/acme/audit/x"}))


def test_every_tenant_of_an_s3_lake_includes_those_only_its_bucket_knows(monkeypatch: pytest.MonkeyPatch) -> None:
    # No shared tables here (delta-rs reads them; tests/integration/test_s3_lake_ops.py does so on SeaweedFS).
    monkeypatch.setattr(discover, "pooled_tenant_ids", lambda root, storage=None: {"pooled-only"})
    monkeypatch.setattr(discover, "has_own_tables", lambda root, tenant, storage=None: tenant == "bucket-only")
    store = Store({"lake/bucket-only/assets/_delta_log/0.json"})
    directory = Directory(ROOT, _Registry(), lambda: ["metalake_db-only"], None, store)  # type: ignore[arg-type]
    found = {n.tenant_id: n.dedicated for n in directory.all()}
    assert found == {"bucket-only": True, "db-only": False, "pooled-only": False}
