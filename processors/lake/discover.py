"""Which tenants the lake commands act on, and where each one's rows are: the one place that decides a tenant's tier.

A tenant's tier comes from the tenant registry (``metalake_control.tenants``) when it is registered. A tenant nobody
registered (tests and the demo publish events for such tenants) is pooled, unless it has table folders of its own
(``<lake>/<tenant>/assets/_delta_log``): an unregistered dedicated tenant, or a tenant of a lake written by the old
layout, which gave every tenant its own tables.

A tenant exists when the registry knows it, it has a lake folder (its ``audit`` table, or tables of its own), its
MongoDB projection database exists, or the shared tables hold rows of it. The shared tables are read with delta-rs
(no Spark): a named tenant's check reads its bucket only. On S3 a lake folder is a key prefix: the lake root's
"folders" are listed with ListObjectsV2 and a delimiter (paged), and a tenant's folder exists when an object is
under it (``LakeFolders``, ``metalake.s3.S3Client``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from deltalake import DeltaTable, QueryBuilder

from control.audit import StorageOptions
from metalake.lake_uri import LakeRoot, S3Path, delta_rs_uri
from metalake.mongo import mongo_client
from metalake.s3 import lake_s3_client, lake_storage_options
from metalake.tenancy import InvalidTenantId
from processors.lake.errors import LakeUsageError
from processors.lake.settings import LakeWorkerSettings
from tenants.naming import (
    CONTROL_DATABASE,
    POOLED_TABLES,
    LakeTable,
    TenantNames,
    names_for,
    pooled_table_path,
    validate_tenant_id,
)
from tenants.registry import TenantRecord, TenantRegistry

# Every valid event lands in ``events`` and every dead letter naming a valid tenant in ``_dlq``; the state tables
# are derived from events. So these two name every tenant with rows in the shared tables.
TENANT_EVIDENCE = ("events", "_dlq")
_DATABASE_PREFIX = "metalake_"


class Registry(Protocol):
    """What discovery reads of the tenant registry (``tenants.registry.TenantRegistry``)."""

    def get(self, tenant_id: str) -> TenantRecord | None: ...

    def list(self) -> list[TenantRecord]: ...


class LakeFolders(Protocol):
    """What discovery asks the object store of an S3 lake (``metalake.s3.S3Client``)."""

    def common_prefixes(self, bucket: str, prefix: str) -> list[str]: ...

    def has_objects(self, bucket: str, prefix: str) -> bool: ...


def tenant_ids(names: Iterable[str]) -> list[str]:
    """The names that are tenant ids, sorted: ``_pooled``, ``_unrouted``, Trino's ``_trino_metastore`` are not."""
    found = []
    for name in sorted(names):
        try:
            found.append(validate_tenant_id(name))
        except InvalidTenantId:
            continue
    return found


def lake_tenants(lake_root: LakeRoot, folders: LakeFolders | None = None) -> list[str]:
    """Tenant ids with a folder under ``lake_root``, sorted; a missing lake root means no tenants. On S3 the
    "folders" are the common prefixes under the root, listed through ``folders`` (every page), that still hold an
    object: a store with a file system behind it (SeaweedFS) keeps listing the empty folder of a dropped tenant.
    Without a client none are listed."""
    if isinstance(lake_root, S3Path):
        if folders is None:
            return []
        listed = tenant_ids(folders.common_prefixes(lake_root.bucket, lake_root.folder))
        return [t for t in listed if folders.has_objects(lake_root.bucket, (lake_root / t).folder)]
    if not lake_root.is_dir():
        return []
    return tenant_ids(child.name for child in lake_root.iterdir() if child.is_dir())


def has_folder(lake_dir: LakeRoot, folders: LakeFolders | None = None) -> bool:
    """Whether a tenant's lake folder exists: a directory, or on S3 any object under its prefix."""
    if isinstance(lake_dir, S3Path):
        return folders is not None and folders.has_objects(lake_dir.bucket, lake_dir.folder)
    return lake_dir.is_dir()


def has_own_tables(lake_root: LakeRoot, tenant: str, storage: StorageOptions = None) -> bool:
    """Whether the tenant has Delta tables of its own (``audit`` alone does not count: every tenant has one)."""
    return is_table(names_for(tenant, lake_root, dedicated=True).delta_path("assets"), storage)


def projection_tenants(databases: Iterable[str]) -> list[str]:
    """Tenant ids of the MongoDB projection databases (``metalake_<tenant>``) among ``databases``."""
    found = []
    for name in databases:
        if not name.startswith(_DATABASE_PREFIX) or name == CONTROL_DATABASE:
            continue
        try:
            found.append(validate_tenant_id(name.removeprefix(_DATABASE_PREFIX)))
        except InvalidTenantId:
            continue
    return sorted(found)


def is_table(path: LakeRoot, storage: StorageOptions = None) -> bool:
    """Whether a Delta table is at ``path`` (its log exists), read without Spark."""
    if isinstance(path, Path):
        return (path / "_delta_log").is_dir()
    return bool(DeltaTable.is_deltatable(delta_rs_uri(path), storage_options=dict(storage or {})))


def _query(path: LakeRoot, sql: str, storage: StorageOptions = None) -> list[object]:
    """The first column of ``sql`` over the Delta table at ``path`` (registered as ``t``); [] for no table."""
    if not is_table(path, storage):
        return []
    table = DeltaTable(delta_rs_uri(path), storage_options=dict(storage) if storage else None)
    result = QueryBuilder().register("t", table).execute(sql).read_all()
    return list(result.column(0).to_pylist()) if result.num_rows else []


def pooled_tenant_ids(lake_root: LakeRoot, storage: StorageOptions = None) -> set[str]:
    """The tenants with rows in the shared tables (a scan of the ``tenant_id`` column of ``TENANT_EVIDENCE``)."""
    found: set[str] = set()
    for table in TENANT_EVIDENCE:
        path = pooled_table_path(lake_root, table)
        found |= {str(t) for t in _query(path, "SELECT DISTINCT tenant_id FROM t", storage)}
    return found


def has_pooled_rows(names: TenantNames, storage: StorageOptions = None) -> bool:
    """Whether the shared tables hold rows of the tenant (its bucket's files only)."""
    for table in TENANT_EVIDENCE:
        place = shared_place(names, table)
        sql = f"SELECT 1 FROM t WHERE {place.predicate} LIMIT 1"  # noqa: S608 - validated id
        if _query(place.path, sql, storage):
            return True
    return False


def shared_place(names: TenantNames, table: str) -> LakeTable:
    """The tenant's rows of the shared ``table``, whatever its tier."""
    return replace(names, dedicated=False).table(table)


def places(names: TenantNames, table: str) -> list[LakeTable]:
    """Every place the tenant's rows of ``table`` may be, its tier's first: a pooled tenant may still have a folder
    written by the old layout, and a tenant with folders of its own may have rows in the shared table (an old-layout
    tenant the pooled job now writes). Erase and drop act on all of them; a place may not exist."""
    primary = names.table(table)
    if table not in POOLED_TABLES:
        return [primary]
    other = replace(names, dedicated=not names.dedicated).table(table)
    return [primary, other]


@dataclass(frozen=True)
class Directory:
    """The tenants of one lake: their tier (``resolve``), whether a named one exists (``named``), all of them."""

    lake_root: LakeRoot
    registry: Registry
    databases: Callable[[], Iterable[str]]
    # delta-rs' storage options when the lake is on S3 (``metalake.s3.lake_storage_options``).
    storage: StorageOptions = None
    # The lake's object store, whose prefixes are the tenants' folders on S3 (None for a local lake).
    folders: LakeFolders | None = None
    # Whether one database exists, without listing them all (FerretDB lists 1,800 databases in about 4 s, and a
    # filter does not make it faster); None: looked up in ``databases()``.
    database_exists: Callable[[str], bool] | None = None

    def resolve(self, tenant: str) -> TenantNames:
        """The tenant's names with its tier; LakeUsageError for an invalid id."""
        try:
            tenant = validate_tenant_id(tenant)
        except InvalidTenantId as exc:
            raise LakeUsageError(str(exc)) from None
        record = self.registry.get(tenant)
        if record is not None:
            return record.names(self.lake_root)
        return names_for(tenant, self.lake_root, dedicated=has_own_tables(self.lake_root, tenant, self.storage))

    def exists(self, names: TenantNames) -> bool:
        """Cheapest evidence first: a registered tenant resolves without the rest."""
        return (
            self.registry.get(names.tenant_id) is not None
            or has_folder(names.lake_dir, self.folders)
            or self._has_database(names.mongo_database)
            or has_pooled_rows(names, self.storage)
        )

    def _has_database(self, name: str) -> bool:
        if self.database_exists is not None:
            return self.database_exists(name)
        return name in set(self.databases())

    def named(self, tenant: str) -> TenantNames:
        """An existing tenant's names. LakeUsageError (naming where it looked) for an unknown one: a typo must not
        silently act on nothing."""
        names = self.resolve(tenant)
        if not self.exists(names):
            raise LakeUsageError(
                f"unknown tenant {tenant!r}: not in the tenant registry, no lake folder at {names.lake_dir}, "
                f"no MongoDB database {names.mongo_database}, no rows in the shared tables"
            )
        return names

    def all(self) -> list[TenantNames]:
        """Every tenant: registered, with a lake folder, with a projection database, or with rows in the shared
        tables. Sorted by id."""
        ids = {r.id for r in self.registry.list()}
        ids |= set(lake_tenants(self.lake_root, self.folders))
        ids |= set(projection_tenants(self.databases()))
        ids |= pooled_tenant_ids(self.lake_root, self.storage)
        return [self.resolve(t) for t in sorted(ids)]

    def selected(self, tenant: str | None) -> list[TenantNames]:
        """One named tenant (which must exist) or every tenant."""
        return [self.named(tenant)] if tenant is not None else self.all()


@contextmanager
def connect(settings: LakeWorkerSettings) -> Iterator[Directory]:
    """The directory of the configured lake, reading the registry and database names from MongoDB."""
    client = mongo_client(settings)
    try:
        yield Directory(
            settings.lake_root,
            TenantRegistry(client[CONTROL_DATABASE]),
            client.list_database_names,
            lake_storage_options(settings),
            lake_s3_client(settings),
            # A database exists in MongoDB while it holds a collection: one cheap call, whatever their number.
            lambda name: bool(client[name].list_collection_names()),
        )
    finally:
        client.close()
